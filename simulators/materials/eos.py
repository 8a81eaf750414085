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
    """EMT energies (eV) of several cells."""
    out = []
    for s in structures:
        atoms = s.to_ase()
        atoms.calc = make_calculator(backend)
        out.append(float(atoms.get_potential_energy()))
    return out


def fit_equation_of_state(
    structure: Structure, backend: Backend, strain: float = 0.02, n_points: int = 7
) -> EOSResult:
    """Fit E(V) around ``structure`` (relaxed); raises ``ValueError`` when the fit fails."""
    from ase.eos import EquationOfState

    factors = np.linspace(1.0 - strain, 1.0 + strain, n_points)
    cells = [structure.scaled(float(f)) for f in factors]
    volumes = [c.volume for c in cells]
    energies = cell_energies(cells, backend)
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
