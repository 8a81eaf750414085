"""Relaxation of atomic positions and cell under EMT.

FIRE (ASE) on a cell filter: ``UnitCellFilter`` by default, ``FrechetCellFilter`` on request
(``cell_filter="frechet"``). Both have the same fixed point (zero forces, zero stress) and the
same convergence test; they differ in how the cell is parameterised on the way, and the
Frechet filter's matrix exponentials and logarithms (scipy) cost 10-20 times the EMT call on
cells of a few atoms, so the lab uses the unit-cell filter (``tests/materials`` checks that
both reach the same energy and volume). The filter's generalised forces are the atomic forces
and the virial over the number of atoms (``-stress * V / N``), so one tolerance ``fmax``
(eV/Å) bounds both: every atomic force component vector below ``fmax`` and every stress
component below ``fmax * N / V`` (0.01 eV/Å on a cell of 11.8 Å^3 per atom: 8.5e-4 eV/Å^3,
0.14 GPa). A relaxation that uses up ``max_steps`` without reaching ``fmax`` is not
converged; one whose energy turns non-finite, whose volume per atom leaves
[1/3, 3] times its start, or whose atoms come closer than ``MIN_DISTANCE_A`` has blown up.
Both are reported, never raised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labtwin.simulators.materials.emt import Backend, make_calculator
from labtwin.simulators.materials.structure import Structure

#: atoms closer than this (Å) mean the relaxation collapsed (nearest neighbours of these
#: metals sit at 2.45-2.9 Å)
MIN_DISTANCE_A = 1.5
#: default force tolerance, eV/Å (and stress via the filter, see the module doc)
FMAX_EV_A = 0.01


@dataclass(frozen=True)
class RelaxResult:
    """The relaxed structure, its energy, and how the relaxation went."""

    structure: Structure
    energy_eV: float
    n_steps: int
    converged: bool
    max_force_eV_A: float
    max_stress_eV_A3: float
    reason: str = ""  # why it did not converge or blew up; empty when converged

    @property
    def energy_per_atom_eV(self) -> float:
        return self.energy_eV / len(self.structure)

    @property
    def force_evaluations(self) -> int:
        """Energy-and-force calls the relaxation made (one per step, plus the first)."""
        return self.n_steps + 1


def relax(
    structure: Structure,
    backend: Backend,
    fmax: float = FMAX_EV_A,
    max_steps: int = 400,
    cell: bool = True,
    cell_filter: str = "unit",
) -> RelaxResult:
    """Relax positions (and, with ``cell``, the cell) of ``structure`` with EMT and FIRE."""
    from ase.filters import FrechetCellFilter, UnitCellFilter
    from ase.optimize import FIRE

    filters = {"unit": UnitCellFilter, "frechet": FrechetCellFilter}
    if cell_filter not in filters:
        raise ValueError(f"unknown cell filter {cell_filter!r}; one of {sorted(filters)}")

    atoms = structure.to_ase()
    atoms.calc = make_calculator(backend)
    start_volume = structure.volume_per_atom
    target = filters[cell_filter](atoms) if cell else atoms
    optimizer = FIRE(target, logfile=None)
    reason = ""
    with np.errstate(all="ignore"):
        try:
            converged = bool(optimizer.run(fmax=fmax, steps=max_steps))
        except (ValueError, FloatingPointError, np.linalg.LinAlgError) as err:
            converged, reason = False, f"relaxation broke down: {type(err).__name__}: {err}"
        energy = float(atoms.get_potential_energy())
        forces = atoms.get_forces()
        stress = atoms.get_stress() if cell else np.zeros(6)
    relaxed = Structure.from_ase(atoms, structure.sublattice)
    n_steps = int(optimizer.nsteps)
    max_force = float(np.linalg.norm(forces, axis=1).max()) if len(forces) else 0.0
    max_stress = float(np.abs(stress).max())
    volume_ratio = relaxed.volume_per_atom / start_volume
    if not reason:
        if not (math.isfinite(energy) and np.all(np.isfinite(forces))):
            reason = "relaxation blew up: the energy or forces became non-finite"
        elif not 1 / 3 <= volume_ratio <= 3:
            reason = (
                f"relaxation blew up: the volume per atom changed by a factor {volume_ratio:.3g}"
            )
        elif relaxed.min_distance() < MIN_DISTANCE_A:
            reason = (
                f"relaxation blew up: atoms {relaxed.min_distance():.2f} Å apart "
                f"(below {MIN_DISTANCE_A} Å)"
            )
        elif not converged:
            reason = (
                f"relaxation did not converge in {max_steps} steps (largest force "
                f"{max_force:.3g} eV/Å, stress {max_stress:.3g} eV/Å^3; tolerance {fmax} eV/Å)"
            )
    if reason:
        converged = False
    return RelaxResult(relaxed, energy, n_steps, converged, max_force, max_stress, reason)
