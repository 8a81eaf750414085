"""Equation of state of a relaxed cell: equilibrium volume and bulk modulus.

The relaxed cell is scaled isotropically to ``n_points`` volumes spanning
``±strain`` in each length (atoms scaled with it, not relaxed again: a clamped-ion fit, which
for a cubic cell with atoms on symmetric sites is the relaxed-ion one), EMT single points are
taken, and ASE's ``EquationOfState`` fits a Birch-Murnaghan form. B is in GPa.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labtwin.simulators.materials.emt import Backend, make_calculator
from labtwin.simulators.materials.structure import Structure

EV_PER_A3_IN_GPA = 160.21766208  # 1 eV/Å^3 in GPa


@dataclass(frozen=True)
class EOSResult:
    """Birch-Murnaghan fit: ``volume_A3`` and ``energy_eV`` of the cell at its minimum."""

    volume_A3: float
    energy_eV: float
    bulk_modulus_GPa: float
    volumes_A3: tuple[float, ...]
    energies_eV: tuple[float, ...]


def cell_energies(structures: list[Structure], backend: Backend) -> list[float]:
    """EMT energies (eV) of several cells (with ``backend="warp"`` in one batch, asap's
    cutoff)."""
    if backend == "warp":
        from labtwin.simulators.materials.emt_warp import emt_evaluate

        return [float(e) for e in emt_evaluate(structures, cutoff="asap").energy]
    out = []
    for s in structures:
        atoms = s.to_ase()
        atoms.calc = make_calculator(backend)
        out.append(float(atoms.get_potential_energy()))
    return out


def strained_cells(
    structure: Structure, strain: float = 0.02, n_points: int = 7
) -> list[Structure]:
    """``structure`` scaled isotropically to ``n_points`` lengths spanning ``±strain``."""
    return [structure.scaled(float(f)) for f in np.linspace(1.0 - strain, 1.0 + strain, n_points)]


def fit_energies(volumes: list[float], energies: list[float]) -> EOSResult:
    """ASE's Birch-Murnaghan fit of E(V); raises ``ValueError`` when the fit fails."""
    from ase.eos import EquationOfState

    try:
        volume, energy, bulk = EquationOfState(volumes, energies, eos="birchmurnaghan").fit()
    except (RuntimeError, ValueError, np.linalg.LinAlgError) as err:
        raise ValueError(f"equation-of-state fit failed: {err}") from err
    bulk_gpa = float(bulk) * EV_PER_A3_IN_GPA
    if not (math.isfinite(volume) and math.isfinite(bulk_gpa) and bulk_gpa > 0):
        raise ValueError(f"equation-of-state fit gave V0 = {volume}, B = {bulk_gpa} GPa")
    if not min(volumes) <= volume <= max(volumes):
        raise ValueError("equation-of-state minimum lies outside the strained volumes")
    return EOSResult(float(volume), float(energy), bulk_gpa, tuple(volumes), tuple(energies))


def fit_equation_of_state(
    structure: Structure, backend: Backend, strain: float = 0.02, n_points: int = 7
) -> EOSResult:
    """Fit E(V) around ``structure`` (relaxed); raises ``ValueError`` when the fit fails."""
    cells = strained_cells(structure, strain, n_points)
    return fit_energies([c.volume for c in cells], cell_energies(cells, backend))


def fit_equations_of_state(
    structures: list[Structure], backend: Backend, strain: float = 0.02, n_points: int = 7
) -> list[EOSResult | str]:
    """:func:`fit_equation_of_state` of every structure, every strained cell evaluated in one
    call of :func:`cell_energies`; a fit that fails is its reason (a string)."""
    cells = [c for s in structures for c in strained_cells(s, strain, n_points)]
    energies = cell_energies(cells, backend) if cells else []
    out: list[EOSResult | str] = []
    for k in range(len(structures)):
        block = slice(k * n_points, (k + 1) * n_points)
        try:
            out.append(fit_energies([c.volume for c in cells[block]], energies[block]))
        except ValueError as err:
            out.append(str(err))
    return out
