"""One measurement of a binary alloy: build, relax, fit, place on the hull.

:func:`measure_alloy` builds the alloy's supercell with pymatgen (a conventional fcc, bcc
or hcp cell repeated ``repeats`` times along each axis, ``n_solute = round(fraction * N)``
sites substituted, ordered by sublattice or at random with a seed of the experiment's own),
relaxes positions and cell with EMT (:mod:`~labtwin.simulators.materials.relax`; many
specs in one batched relaxation on the Warp engine with :func:`measure_alloys`), fits the
equation of state of the relaxed cell (:mod:`~labtwin.simulators.materials.eos`) and
computes the formation energy and energy above the pair's reference hull
(:mod:`~labtwin.simulators.materials.hull`; a pair the shipped table lacks raises
``KeyError``). Everything is deterministic: the same spec gives the same numbers, to the
last bit, on one machine.

:func:`design_space` lists every distinct cell of a pair that the alloy lab's knobs can
build, and :func:`reference_cells` relaxes such cells in batches and keeps the lowest of
each composition: the reference hull's table
(:mod:`~labtwin.simulators.materials.hull_table` writes it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Literal

import numpy as np

from labtwin.simulators.materials.emt import Backend
from labtwin.simulators.materials.eos import fit_equations_of_state
from labtwin.simulators.materials.hull import (
    HullReference,
    design_name,
    e_above_hull,
    formation_energy_per_atom,
    hull_vertices,
    parameter_volume_per_atom,
)
from labtwin.simulators.materials.relax import FMAX_EV_A, relax_many
from labtwin.simulators.materials.structure import (
    LATTICES,
    Structure,
    decorate,
    prototype,
    supercell,
)

#: the design space of an alloy experiment that the reference hull enumerates (AlloyDesign's
#: knobs take their bounds from these): supercell repeats along each axis, and the seeds
#: 0 .. DESIGN_ORDERING_SEEDS - 1 of random orderings
DESIGN_REPEATS: tuple[int, ...] = (1, 2, 3)
DESIGN_ORDERING_SEEDS = 100
#: FIRE steps a reference cell may take (the lab's default is 600): a cell that converges
#: only later is still a cell of the model, and more references can only raise E_hull
REFERENCE_MAX_STEPS = 2000


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
        cell = _unit_supercell(self.lattice, self.host, self.repeats)
        n = len(cell)
        n_solute = int(round(self.fraction_solute * n))
        x = n_solute / n
        volume = (1 - x) * parameter_volume_per_atom(self.host) + x * parameter_volume_per_atom(
            self.solute
        )
        cell = cell.scaled(volume ** (1.0 / 3.0))
        rng = np.random.default_rng(self.ordering_seed)
        return decorate(cell, self.solute, n_solute, self.ordering, rng)

    def design(self) -> dict[str, str | int]:
        """The knobs that build this cell, as a reference-hull table stores them."""
        n = len(_unit_supercell(self.lattice, self.host, self.repeats))
        return {
            "lattice": self.lattice,
            "repeats": self.repeats,
            "ordering": self.ordering,
            "ordering_seed": self.ordering_seed if self.ordering == "random" else 0,
            "n_solute": int(round(self.fraction_solute * n)),
            "n_atoms": n,
        }

    def name(self) -> str:
        """e.g. ``Cu3Pt (fcc 2x2x2, random seed 7)``."""
        return design_name(self.host, self.solute, self.design())


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


@cache
def _unit_supercell(lattice: str, host: str, repeats: int) -> Structure:
    """The host's supercell at 1 Å^3 per atom (built once per process: pymatgen's supercell
    costs milliseconds, a reference hull builds tens of thousands; the cell is never mutated,
    :meth:`Structure.scaled` and :func:`decorate` return new ones)."""
    return supercell(prototype(lattice, host, 1.0), repeats)  # type: ignore[arg-type]


def design_space(
    host: str,
    solute: str,
    lattices: Iterable[str] = LATTICES,
    repeats: Iterable[int] = DESIGN_REPEATS,
    ordering_seeds: Iterable[int] = range(DESIGN_ORDERING_SEEDS),
) -> list[AlloySpec]:
    """Every distinct cell an alloy experiment can build for the pair: each lattice, each
    supercell, each solute count 0..N, ordered and with every ordering seed, with cells of
    identical site occupation (the pure cells; most random cells of the 2- and 4-atom cells)
    kept once, the first in this order."""
    seeds = list(ordering_seeds)
    out, seen = [], set()
    for lattice in lattices:
        for r in repeats:
            n = len(_unit_supercell(lattice, host, r))
            for n_solute in range(n + 1):
                orderings = [("ordered", 0)] + [("random", seed) for seed in seeds]
                for ordering, seed in orderings:
                    spec = AlloySpec(host, solute, lattice, n_solute / n, ordering, r, seed)  # type: ignore[arg-type]
                    key = (lattice, r, spec.build().species)
                    if key not in seen:
                        seen.add(key)
                        out.append(spec)
    return out


def reference_cells(
    specs: Sequence[AlloySpec],
    backend: Backend,
    fmax: float = FMAX_EV_A,
    max_steps: int = REFERENCE_MAX_STEPS,
    batch_size: int = 256,
    device: str | None = None,
) -> list[HullReference]:
    """The lowest relaxed cell of each composition among ``specs`` (one pair), in order of
    solute fraction: ``specs`` built and relaxed ``batch_size`` at a time with
    :func:`relax_many` (positions and cell, ``fmax``), cells that do not converge left out
    and counted. A cell's result does not depend on its batch, so a lab measurement of the
    same cell with the same ``fmax`` reads the same energy."""
    best: dict[Fraction, tuple[AlloySpec, Structure, float]] = {}
    counted: dict[Fraction, list[int]] = {}
    ordered = sorted(specs, key=lambda s: (s.lattice, s.repeats))  # like cells batch well
    for i in range(0, len(ordered), batch_size):
        chunk = ordered[i : i + batch_size]
        starts = [s.build() for s in chunk]
        relaxed = relax_many(starts, backend, fmax=fmax, max_steps=max_steps, device=device)
        for spec, start, result in zip(chunk, starts, relaxed, strict=True):
            x = Fraction(start.composition().get(spec.solute, 0), len(start))
            tally = counted.setdefault(x, [0, 0])
            tally[0] += 1
            if not result.converged:
                tally[1] += 1
                continue
            if x not in best or result.energy_per_atom_eV < best[x][2]:
                best[x] = (spec, result.structure, result.energy_per_atom_eV)
    out = []
    for x in sorted(best):
        spec, structure, energy = best[x]
        out.append(
            HullReference(
                spec.name(),
                structure.composition(),
                energy,
                structure.volume_per_atom,
                spec.design(),
                cells=counted[x][0],
                unconverged=counted[x][1],
            )
        )
    return out


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
    return measure_alloys([spec], backend, fmax, max_steps, eos_points)[0]


def measure_alloys(
    specs: Sequence[AlloySpec],
    backend: Backend,
    fmax: float = FMAX_EV_A,
    max_steps: int = 400,
    eos_points: int = 7,
    device: str | None = None,
) -> list[AlloyResult]:
    """:func:`measure_alloy` of every spec. With ``backend="warp"`` every cell relaxes in one
    batched FIRE relaxation and every strained cell of the equations of state is evaluated in
    one batch (a cell's result does not depend on its batch); with ``"asap3"`` or ``"ase"``
    one ASE relaxation after another."""
    starts = [spec.build() for spec in specs]
    relaxed_all = relax_many(starts, backend, fmax=fmax, max_steps=max_steps, device=device)
    fitted = iter(
        fit_equations_of_state(
            [r.structure for r in relaxed_all if r.converged], backend, n_points=eos_points
        )
    )
    out = []
    for spec, start, relaxed in zip(specs, starts, relaxed_all, strict=True):
        n = len(start)
        base = dict(
            n_atoms=n,
            fraction_solute=start.composition().get(spec.solute, 0) / n,
            relax_steps=relaxed.n_steps,
            force_evaluations=relaxed.force_evaluations,
        )
        if not relaxed.converged:
            out.append(AlloyResult("failed", relaxed.reason, **base))
            continue
        eos = next(fitted)
        if isinstance(eos, str):
            out.append(AlloyResult("failed", eos, **base))
            continue
        base["force_evaluations"] = relaxed.force_evaluations + eos_points
        composition = relaxed.structure.composition()
        per_atom = relaxed.energy_per_atom_eV
        references = hull_vertices(spec.host, spec.solute)
        out.append(
            AlloyResult(
                "ok",
                energy_per_atom_eV=per_atom,
                formation_energy_eV_atom=formation_energy_per_atom(
                    per_atom, composition, backend, fmax
                ),
                e_above_hull_eV_atom=e_above_hull(references, composition, per_atom),
                volume_per_atom_A3=relaxed.structure.volume_per_atom,
                lattice_constant_A=fcc_equivalent_lattice_constant(
                    relaxed.structure.volume_per_atom
                ),
                bulk_modulus_GPa=eos.bulk_modulus_GPa,
                structure=relaxed.structure,
                **base,
            )
        )
    return out
