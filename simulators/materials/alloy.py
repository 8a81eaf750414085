"""One measurement of a binary alloy: build, relax, fit, place on the hull.

:func:`measure_alloy` builds the alloy's supercell with pymatgen (a conventional fcc, bcc
or hcp cell repeated ``repeats`` times along each axis, ``n_solute = round(fraction * N)``
sites substituted, ordered by sublattice or at random with a seed of the experiment's own),
relaxes positions and cell with EMT (:mod:`~labtwin.simulators.materials.relax`; many
specs in one batched relaxation on the Warp engine with :func:`measure_alloys`), fits the
equation of state of the relaxed cell (:mod:`~labtwin.simulators.materials.eos`) and
computes the formation energy and energy above the pair's reference hull
(:mod:`~labtwin.simulators.materials.hull`). Everything is deterministic: the same spec
gives the same numbers, to the last bit, on one machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from labtwin.simulators.materials.emt import Backend
from labtwin.simulators.materials.eos import fit_equations_of_state
from labtwin.simulators.materials.hull import (
    e_above_hull,
    formation_energy_per_atom,
    parameter_volume_per_atom,
    reference_hull,
)
from labtwin.simulators.materials.relax import FMAX_EV_A, relax_many
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
        references = reference_hull(spec.host, spec.solute, backend, fmax)
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
