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
from collections.abc import Sequence
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
    if backend == "warp":
        return relax_many([structure], backend, fmax, max_steps, cell)[0]
    from ase.filters import FrechetCellFilter, UnitCellFilter
    from ase.optimize import FIRE

    filters = {"unit": UnitCellFilter, "frechet": FrechetCellFilter}
    if cell_filter not in filters:
        raise ValueError(f"unknown cell filter {cell_filter!r}; one of {sorted(filters)}")

    atoms = structure.to_ase()
    atoms.calc = make_calculator(backend)
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
    finite = math.isfinite(energy) and bool(np.all(np.isfinite(forces)))
    return _judged(structure, relaxed, energy, n_steps, converged, max_force, max_stress,
                   finite, reason, fmax, max_steps)  # fmt: skip


def _judged(
    start: Structure,
    relaxed: Structure,
    energy: float,
    n_steps: int,
    converged: bool,
    max_force: float,
    max_stress: float,
    finite: bool,
    reason: str,
    fmax: float,
    max_steps: int,
) -> RelaxResult:
    """The result with its verdict: blown up (non-finite, volume or distances collapsed),
    not converged, or converged (module doc)."""
    volume_ratio = relaxed.volume_per_atom / start.volume_per_atom
    if not reason:
        if not finite:
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


def relax_many(
    structures: Sequence[Structure],
    backend: Backend,
    fmax: float = FMAX_EV_A,
    max_steps: int = 400,
    cell: bool = True,
    device: str | None = None,
    check_every: int = 1,
) -> list[RelaxResult]:
    """:func:`relax` of every structure: with ``backend="warp"`` all of them in one batched
    FIRE relaxation (:func:`~labtwin.simulators.materials.emt_warp.relax_emt`, float64,
    asap's cutoff, the same generalised coordinates as the unit-cell filter; convergence
    checked every ``check_every`` steps, as ASE's FIRE does at every step by default, and at
    ``max_steps``), else one ASE relaxation after another."""
    if backend != "warp":
        return [relax(s, backend, fmax=fmax, max_steps=max_steps, cell=cell) for s in structures]
    if not structures:
        return []
    from labtwin.simulators.materials.emt_warp import relax_emt

    with np.errstate(all="ignore"):
        result = relax_emt(
            list(structures), fmax=fmax, max_steps=max_steps, cell=cell, cutoff="asap",
            device=device, check_every=check_every,
        )  # fmt: skip
        relaxed = result.structures([s.sublattice for s in structures])
    out = []
    for i, start in enumerate(structures):
        max_stress = float(np.abs(result.stress[i]).max()) if cell else 0.0
        finite = bool(np.isfinite(result.energy[i]) and np.isfinite(result.max_force[i]))
        finite = finite and bool(np.all(np.isfinite(relaxed[i].positions)))
        out.append(
            _judged(
                start,
                relaxed[i],
                float(result.energy[i]),
                int(result.n_steps[i]),
                bool(result.converged[i]),
                float(result.max_force[i]),
                max_stress,
                finite,
                "",
                fmax,
                max_steps,
            )
        )
    return out
