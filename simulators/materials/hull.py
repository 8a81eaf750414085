"""Formation energies and the convex hull, on the lab's own EMT energies.

Elemental references are the lowest-energy relaxed fcc, bcc or hcp cell of each element
with the same calculator and tolerance as the structures measured against them, so that a
formation energy is an energy difference within one model (all seven EMT metals come out
fcc). A binary's reference hull (:func:`reference_hull`) is a fixed set computed once per
element pair: the two elements and four classic ordered cells (L1_2 A3B, L1_0 AB, L1_2 AB3
on fcc and B2 AB on bcc), each relaxed. :func:`e_above_hull` places a structure on that
hull with pymatgen's ``PhaseDiagram`` (the structure is added to the entries, so a structure
below the reference hull has E_hull = 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from labtwin.simulators.materials.emt import Backend
from labtwin.simulators.materials.relax import FMAX_EV_A, relax_many
from labtwin.simulators.materials.structure import (
    LATTICES,
    Structure,
    decorate,
    prototype,
)

BOHR_A = 0.52917721  # Å


def parameter_volume_per_atom(element: str) -> float:
    """EMT's neutral-sphere volume 4/3 pi s0^3 (Å^3) from ASE's parameter table (the 1996
    paper's s0): the fcc equilibrium volume EMT is built around, a good starting volume."""
    from ase.calculators.emt import parameters

    s0 = parameters[element][1] * BOHR_A
    return 4.0 / 3.0 * math.pi * s0**3


@dataclass(frozen=True)
class HullReference:
    """A relaxed reference structure: its name, composition and energy per atom (eV)."""

    name: str
    structure: Structure
    energy_per_atom_eV: float

    @property
    def composition(self) -> dict[str, int]:
        return self.structure.composition()


@cache
def elemental_reference(element: str, backend: Backend, fmax: float = FMAX_EV_A) -> HullReference:
    """The lowest-energy relaxed fcc, bcc or hcp cell of ``element`` (cached per process)."""
    best = None
    starts = [prototype(lat, element, parameter_volume_per_atom(element)) for lat in LATTICES]
    for lattice, result in zip(LATTICES, relax_many(starts, backend, fmax=fmax), strict=True):
        if not result.converged:
            raise RuntimeError(f"reference {lattice} {element} did not relax: {result.reason}")
        if best is None or result.energy_per_atom_eV < best.energy_per_atom_eV:
            best = HullReference(
                f"{element} ({lattice})", result.structure, result.energy_per_atom_eV
            )
    assert best is not None
    return best


#: the ordered cells of a binary A-B hull: name, lattice, fraction of B
ORDERED_REFERENCES: tuple[tuple[str, str, float], ...] = (
    ("L1_2 A3B", "fcc", 0.25),
    ("L1_0 AB", "fcc", 0.5),
    ("L1_2 AB3", "fcc", 0.75),
    ("B2 AB", "bcc", 0.5),
)


@cache
def reference_hull(
    host: str, solute: str, backend: Backend, fmax: float = FMAX_EV_A
) -> tuple[HullReference, ...]:
    """The fixed reference set of the ``host``-``solute`` hull (cached per process)."""
    from pymatgen.core import Composition

    out = [elemental_reference(host, backend, fmax), elemental_reference(solute, backend, fmax)]
    cells = []
    for _, lattice, fraction in ORDERED_REFERENCES:
        volume = (1 - fraction) * parameter_volume_per_atom(
            host
        ) + fraction * parameter_volume_per_atom(solute)
        cell = prototype(lattice, host, volume)  # type: ignore[arg-type]
        cells.append(decorate(cell, solute, round(fraction * len(cell)), "ordered"))
    relaxed = relax_many(cells, backend, fmax=fmax)
    for (name, _, _), result in zip(ORDERED_REFERENCES, relaxed, strict=True):
        if not result.converged:
            raise RuntimeError(f"reference {name} {host}-{solute} did not relax: {result.reason}")
        formula = Composition(result.structure.composition()).reduced_formula
        out.append(
            HullReference(f"{name} ({formula})", result.structure, result.energy_per_atom_eV)
        )
    return tuple(out)


def formation_energy_per_atom(
    energy_per_atom_eV: float,
    composition: dict[str, int],
    backend: Backend,
    fmax: float = FMAX_EV_A,
) -> float:
    """E/N - sum_i x_i E_i/N_i against the elemental references (eV/atom)."""
    n = sum(composition.values())
    reference = sum(
        count / n * elemental_reference(element, backend, fmax).energy_per_atom_eV
        for element, count in composition.items()
    )
    return energy_per_atom_eV - reference


def phase_diagram(references: tuple[HullReference, ...], extra: list[tuple[dict, float]] = ()):  # type: ignore[assignment]
    """pymatgen ``PhaseDiagram`` of the references plus ``extra`` (composition, E/atom)
    entries; returns the diagram and the extra entries."""
    from pymatgen.analysis.phase_diagram import PDEntry, PhaseDiagram
    from pymatgen.core import Composition

    def entry(composition: dict[str, int], per_atom: float, name: str) -> PDEntry:
        comp = Composition(composition)
        return PDEntry(comp, per_atom * comp.num_atoms, name=name)

    entries = [entry(r.composition, r.energy_per_atom_eV, r.name) for r in references]
    added = [entry(c, e, f"candidate {i}") for i, (c, e) in enumerate(extra)]
    return PhaseDiagram(entries + added), added


def e_above_hull(
    references: tuple[HullReference, ...], composition: dict[str, int], energy_per_atom_eV: float
) -> float:
    """Energy above the hull of ``references`` with the structure added (eV/atom, >= 0)."""
    diagram, (candidate,) = phase_diagram(references, [(composition, energy_per_atom_eV)])
    return float(max(diagram.get_e_above_hull(candidate), 0.0))
