"""One measurement of a binary alloy: build, relax, fit, place on the hull.

:func:`measure_alloy` builds the alloy's supercell with pymatgen (a conventional fcc, bcc
or hcp cell repeated ``repeats`` times along each axis, ``n_solute = round(fraction * N)``
sites substituted, ordered by sublattice or at random with a seed of the experiment's own),
relaxes positions and cell with EMT (:mod:`~labtwin.simulators.materials.relax`), fits the
equation of state of the relaxed cell (:mod:`~labtwin.simulators.materials.eos`) and
computes the formation energy and energy above the pair's reference hull
(:mod:`~labtwin.simulators.materials.hull`). Everything is deterministic: the same spec
gives the same numbers, to the last bit, on one machine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from labtwin.simulators.materials.emt import Backend
from labtwin.simulators.materials.eos import fit_equation_of_state
from labtwin.simulators.materials.hull import (
    e_above_hull,
    formation_energy_per_atom,
    parameter_volume_per_atom,
    reference_hull,
)
from labtwin.simulators.materials.relax import FMAX_EV_A, relax
from labtwin.simulators.materials.structure import Structure, decorate, prototype, supercell


@dataclass(frozen=True)
class AlloySpec:
    """What to build: a ``host``-``solute`` alloy on ``lattice`` at ``fraction_solute``."""

    host: str
    solute: str
    lattice: Literal["fcc", "bcc", "hcp"]
    fraction_solute: float
    ordering: Literal["ordered", "random"] = "ordered"
    repeats: int = 2
    ordering_seed: int = 0

    def build(self) -> Structure:
        """The unrelaxed supercell at the Vegard's-law volume of the EMT parameter volumes."""
        cell = supercell(prototype(self.lattice, self.host, 1.0), self.repeats)
        n = len(cell)
        n_solute = int(round(self.fraction_solute * n))
        x = n_solute / n
        volume = (1 - x) * parameter_volume_per_atom(self.host) + x * parameter_volume_per_atom(
            self.solute
        )
        cell = cell.scaled(volume ** (1.0 / 3.0))
        rng = np.random.default_rng(self.ordering_seed)
        return decorate(cell, self.solute, n_solute, self.ordering, rng)


@dataclass(frozen=True)
class AlloyResult:
    """The measured alloy, or why it could not be measured (``status == "failed"``)."""

    status: Literal["ok", "failed"]
    reason: str = ""
    n_atoms: int = 0
    fraction_solute: float = 0.0  # the fraction actually built, n_solute / N
    energy_per_atom_eV: float = float("nan")
    formation_energy_eV_atom: float = float("nan")
    e_above_hull_eV_atom: float = float("nan")
    volume_per_atom_A3: float = float("nan")
    lattice_constant_A: float = float("nan")
    bulk_modulus_GPa: float = float("nan")
    relax_steps: int = 0
    force_evaluations: int = 0  # relaxation steps + 1 + equation-of-state points
    structure: Structure | None = field(default=None, compare=False)


def fcc_equivalent_lattice_constant(volume_per_atom_A3: float) -> float:
    """(4 V/N)^(1/3): the cubic lattice constant of an fcc cell of this volume per atom (Å)."""
    return float((4.0 * volume_per_atom_A3) ** (1.0 / 3.0))


def measure_alloy(
    spec: AlloySpec,
    backend: Backend,
    fmax: float = FMAX_EV_A,
    max_steps: int = 400,
    eos_points: int = 7,
) -> AlloyResult:
    """Build, relax and measure one alloy; a relaxation or fit that fails is ``failed``."""
    start = spec.build()
    n = len(start)
    fraction = start.composition().get(spec.solute, 0) / n
    relaxed = relax(start, backend, fmax=fmax, max_steps=max_steps)
    evaluations = relaxed.force_evaluations
    base = dict(
        n_atoms=n,
        fraction_solute=fraction,
        relax_steps=relaxed.n_steps,
        force_evaluations=evaluations,
    )
    if not relaxed.converged:
        return AlloyResult("failed", relaxed.reason, **base)
    try:
        eos = fit_equation_of_state(relaxed.structure, backend, n_points=eos_points)
    except ValueError as err:
        return AlloyResult("failed", str(err), **base)
    base["force_evaluations"] = evaluations + eos_points
    composition = relaxed.structure.composition()
    per_atom = relaxed.energy_per_atom_eV
    references = reference_hull(spec.host, spec.solute, backend, fmax)
    return AlloyResult(
        "ok",
        energy_per_atom_eV=per_atom,
        formation_energy_eV_atom=formation_energy_per_atom(per_atom, composition, backend, fmax),
        e_above_hull_eV_atom=e_above_hull(references, composition, per_atom),
        volume_per_atom_A3=relaxed.structure.volume_per_atom,
        lattice_constant_A=fcc_equivalent_lattice_constant(relaxed.structure.volume_per_atom),
        bulk_modulus_GPa=eos.bulk_modulus_GPa,
        structure=relaxed.structure,
        **base,
    )
