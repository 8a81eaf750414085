"""Vacancy formation energies of the fcc EMT metals, many protocols in one batched relaxation.

E_v = E(N - 1, relaxed) - (N - 1) e_bulk, with e_bulk the energy per atom of the perfect
crystal at its zero-pressure lattice constant (:mod:`~labtwin.simulators.materials.bulk`;
equal to (N - 1)/N E(N) for the N-site supercell). A protocol chooses the supercell (the
4-atom conventional cell repeated ``repeats`` times along each axis, one atom removed), the
force tolerance and step limit of the FIRE relaxation, and whether the cell relaxes too
(zero pressure) or keeps the bulk lattice constant (fixed volume). Every protocol of a call
is relaxed in one :func:`~labtwin.simulators.materials.emt_warp.relax_emt` batch (per-cell
tolerances and step limits), float64, asap's cutoff convention; a cell's result does not
depend on its batch.

The result reports how the relaxation went (residual largest generalised force, steps,
whether it converged, the residual pressure), so a caller can judge it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

from labtwin.simulators.materials.bulk import (
    cubic_cell,
    evaluate_lattice_constants,
    zero_pressure_lattice_constant,
)
from labtwin.simulators.materials.emt import EMT_ELEMENTS
from labtwin.simulators.materials.emt_warp import Cutoff, emt_evaluate, relax_emt
from labtwin.simulators.materials.eos import EV_PER_A3_IN_GPA
from labtwin.simulators.materials.structure import Structure, remove_sites, supercell

CellMode = Literal["fixed", "relaxed"]


@dataclass(frozen=True)
class VacancyProtocol:
    """How to measure one vacancy: ``element``'s fcc supercell of ``repeats``^3 conventional
    cells, FIRE to ``fmax`` (eV/Å) in at most ``max_steps`` steps, the cell ``"fixed"`` at
    the bulk lattice constant or ``"relaxed"`` to zero pressure."""

    element: str
    repeats: int
    fmax: float
    max_steps: int
    cell: CellMode = "fixed"


@dataclass(frozen=True)
class VacancyResult:
    """One measured vacancy.

    ``max_force_eV_A`` is the largest generalised force at the end (atomic forces, and with a
    relaxed cell the virial per atom), the quantity ``fmax`` bounds; ``relax_steps`` the FIRE
    steps taken (convergence is checked every 10 steps and at the step limit);
    ``force_evaluations`` = ``relax_steps`` + 1.
    """

    protocol: VacancyProtocol
    formation_energy_eV: float
    unrelaxed_formation_energy_eV: float
    n_atoms: int
    relax_steps: int
    max_force_eV_A: float
    converged: bool
    pressure_GPa: float
    structure: Structure

    @property
    def force_evaluations(self) -> int:
        return self.relax_steps + 1


@cache
def bulk_reference(element: str, cutoff: Cutoff = "asap") -> tuple[float, float]:
    """(lattice constant Å, energy per atom eV) of the perfect fcc crystal at zero pressure."""
    if element not in EMT_ELEMENTS:
        raise ValueError(f"no EMT parameters for {element!r}; one of {', '.join(EMT_ELEMENTS)}")
    a0 = zero_pressure_lattice_constant(element, cutoff)
    energy = float(evaluate_lattice_constants([element], [a0], cutoff).energy_per_atom_eV[0])
    return a0, energy


def vacancy_cell(element: str, repeats: int, cutoff: Cutoff = "asap") -> Structure:
    """The ``repeats``^3 fcc supercell at the zero-pressure lattice constant, atom 0 removed."""
    a0, _ = bulk_reference(element, cutoff)
    return remove_sites(supercell(cubic_cell(element, a0), int(repeats)), [0])


def measure_vacancies(
    protocols: Sequence[VacancyProtocol], cutoff: Cutoff = "asap", device: str | None = None
) -> list[VacancyResult]:
    """Relax every protocol's vacancy cell in one batch and return its formation energy."""
    if not protocols:
        return []
    cells = [vacancy_cell(p.element, p.repeats, cutoff) for p in protocols]
    bulk = np.array([bulk_reference(p.element, cutoff)[1] for p in protocols])
    n_atoms = np.array([len(c) for c in cells])
    unrelaxed = emt_evaluate(cells, device=device, cutoff=cutoff).energy
    relaxed = relax_emt(
        cells,
        fmax=[p.fmax for p in protocols],
        max_steps=[p.max_steps for p in protocols],
        cell=[p.cell == "relaxed" for p in protocols],
        device=device,
        cutoff=cutoff,
    )
    structures = relaxed.structures()
    pressure = -relaxed.stress[:, :3].mean(axis=1) * EV_PER_A3_IN_GPA
    return [
        VacancyResult(
            protocol=p,
            formation_energy_eV=float(relaxed.energy[i] - n_atoms[i] * bulk[i]),
            unrelaxed_formation_energy_eV=float(unrelaxed[i] - n_atoms[i] * bulk[i]),
            n_atoms=int(n_atoms[i]),
            relax_steps=int(relaxed.n_steps[i]),
            max_force_eV_A=float(relaxed.max_force[i]),
            converged=bool(relaxed.converged[i]),
            pressure_GPa=float(pressure[i]),
            structure=structures[i],
        )
        for i, p in enumerate(protocols)
    ]


#: the converged reference: fixed-volume cells of 6^3 and 7^3 conventional cells (863 and
#: 1371 atoms) relaxed to this force tolerance, extrapolated linearly in 1/N
REFERENCE_REPEATS = (6, 7)
REFERENCE_FMAX = 1e-4


def converged_formation_energy(
    element: str, cell: CellMode = "fixed", cutoff: Cutoff = "asap"
) -> float:
    """E_v at infinite dilution (eV): :data:`REFERENCE_REPEATS` supercells relaxed to
    :data:`REFERENCE_FMAX`, E_v(N) extrapolated linearly in 1/N (a few seconds per element
    on a CPU; both cell modes extrapolate to the same value within 2e-5 eV)."""
    protocols = [
        VacancyProtocol(element, n, REFERENCE_FMAX, 20_000, cell) for n in REFERENCE_REPEATS
    ]
    (small, large) = measure_vacancies(protocols, cutoff)
    if not (small.converged and large.converged):
        raise RuntimeError(f"the {element} reference relaxations did not converge")
    x_small, x_large = 1.0 / (small.n_atoms + 1), 1.0 / (large.n_atoms + 1)
    slope = (small.formation_energy_eV - large.formation_energy_eV) / (x_small - x_large)
    return large.formation_energy_eV - slope * x_large
