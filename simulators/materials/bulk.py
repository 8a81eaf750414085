"""Cubic crystals on the batched Warp EMT engine: energy and pressure against lattice constant.

The crystals are the fcc EMT metals and L1_2 ordered alloys A3B (the fcc conventional cell,
B on the corner site): 4-atom cubic cells whose atoms sit on sites fixed by symmetry, so an
isotropic strain leaves every force zero and the energy at a lattice constant is the
relaxed one (no relaxation is needed, or done). :func:`evaluate_lattice_constants`
evaluates many cells in one launch of :mod:`~labtwin.simulators.materials.emt_warp`;
:func:`zero_pressure_lattice_constant` solves P(a) = 0; :func:`reference_equation_of_state`
is a Birch-Murnaghan fit (ASE's ``EquationOfState``) on a dense grid about that root, the
converged reference of a lab.

EMT's cutoff convention is asap3's (``cutoff="asap"``, the one of
:mod:`~labtwin.simulators.materials.emt`), unless a caller asks for ASE's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from labtwin.simulators.materials.emt_warp import Cutoff, emt_evaluate
from labtwin.simulators.materials.eos import EV_PER_A3_IN_GPA
from labtwin.simulators.materials.structure import Structure, decorate, prototype

#: cubic crystals offered: name -> (host, solute or None); an L1_2 A3B puts B on the corners
CUBIC_CRYSTALS: dict[str, tuple[str, str | None]] = {
    "Al": ("Al", None),
    "Cu": ("Cu", None),
    "Ag": ("Ag", None),
    "Au": ("Au", None),
    "Ni": ("Ni", None),
    "Pd": ("Pd", None),
    "Pt": ("Pt", None),
    "Cu3Au": ("Cu", "Au"),
    "Ni3Al": ("Ni", "Al"),
    "Cu3Pt": ("Cu", "Pt"),
    "Ni3Pt": ("Ni", "Pt"),
}


def crystal_description(name: str) -> str:
    """``"fcc Cu"`` or ``"L1_2 Cu3Au"``."""
    return f"L1_2 {name}" if CUBIC_CRYSTALS[name][1] else f"fcc {name}"


def cubic_cell(name: str, lattice_constant: float) -> Structure:
    """The 4-atom conventional cell of crystal ``name`` at ``lattice_constant`` (Å)."""
    if name not in CUBIC_CRYSTALS:
        raise ValueError(f"unknown crystal {name!r}; one of {', '.join(CUBIC_CRYSTALS)}")
    host, solute = CUBIC_CRYSTALS[name]
    cell = prototype("fcc", host, lattice_constant**3 / 4.0)
    if solute is not None:
        cell = decorate(cell, solute, 1, "ordered")  # sublattice 0: the corner site
    return cell


@dataclass(frozen=True)
class LatticePoints:
    """Energies and pressures of cells at given lattice constants (one entry per cell)."""

    lattice_constant_A: np.ndarray
    energy_per_atom_eV: np.ndarray
    pressure_GPa: np.ndarray
    volume_per_atom_A3: np.ndarray
    max_force_eV_A: np.ndarray
    n_atoms: np.ndarray


def evaluate_lattice_constants(
    names: Sequence[str],
    lattice_constants: Sequence[float],
    cutoff: Cutoff = "asap",
    device: str | None = None,
) -> LatticePoints:
    """Energy per atom (eV), pressure (GPa, positive under compression) and volume per atom of
    each crystal at each lattice constant, all cells in one batch (float64)."""
    a = np.asarray(lattice_constants, dtype=np.float64).reshape(-1)
    cells = [cubic_cell(n, float(x)) for n, x in zip(names, a, strict=True)]
    result = emt_evaluate(cells, device=device, cutoff=cutoff)
    n_atoms = np.array([len(c) for c in cells])
    forces = [np.linalg.norm(result.forces_of(i), axis=1).max() for i in range(len(cells))]
    return LatticePoints(
        lattice_constant_A=a,
        energy_per_atom_eV=result.energy / n_atoms,
        pressure_GPa=-result.stress[:, :3].mean(axis=1) * EV_PER_A3_IN_GPA,
        volume_per_atom_A3=a**3 / 4.0,
        max_force_eV_A=np.array(forces),
        n_atoms=n_atoms,
    )


@cache
def zero_pressure_lattice_constant(name: str, cutoff: Cutoff = "asap") -> float:
    """The lattice constant (Å) at which the crystal's pressure vanishes (Brent's method on
    the analytic pressure, to 1e-12 Å), cached per process: the computation is
    deterministic."""
    from scipy.optimize import brentq

    def pressure(a: float) -> float:
        return float(evaluate_lattice_constants([name], [a], cutoff).pressure_GPa[0])

    return float(brentq(pressure, 3.0, 4.6, xtol=1e-12, rtol=1e-15))


@dataclass(frozen=True)
class BirchMurnaghan:
    """A Birch-Murnaghan fit per atom: V0 (Å^3/atom), E0 (eV/atom), B (GPa), B' and the
    lattice constant (4 V0)^(1/3) of the 4-atom cubic cell."""

    volume_per_atom_A3: float
    energy_per_atom_eV: float
    bulk_modulus_GPa: float
    bulk_modulus_derivative: float
    n_points: int
    rms_residual_eV: float

    @property
    def lattice_constant_A(self) -> float:
        return (4.0 * self.volume_per_atom_A3) ** (1.0 / 3.0)


def fit_birch_murnaghan(volumes: Sequence[float], energies: Sequence[float]) -> BirchMurnaghan:
    """ASE's ``EquationOfState(..., eos="birchmurnaghan")`` on energies per atom against
    volumes per atom; raises ``ValueError`` (with the reason) when it cannot fit: fewer
    than 4 distinct volumes, no minimum inside the volumes, a fit that does not converge."""
    import warnings

    from ase.eos import EquationOfState, birchmurnaghan

    v = np.asarray(volumes, dtype=np.float64)
    e = np.asarray(energies, dtype=np.float64)
    if len(np.unique(np.round(v, 10))) < 4:
        raise ValueError(f"a Birch-Murnaghan fit needs 4 or more distinct volumes, got {len(v)}")
    eos = EquationOfState(v, e, eos="birchmurnaghan")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            v0, e0, b = eos.fit(warn=False)
    except (RuntimeError, ValueError, TypeError, np.linalg.LinAlgError) as err:
        raise ValueError(f"the Birch-Murnaghan fit failed: {err}") from err
    bp = float(eos.eos_parameters[2])
    b_gpa = float(b) * EV_PER_A3_IN_GPA
    if not (math.isfinite(v0) and math.isfinite(b_gpa) and b_gpa > 0):
        raise ValueError(f"the Birch-Murnaghan fit gave V0 = {v0:.4g}, B = {b_gpa:.4g} GPa")
    if not v.min() <= v0 <= v.max():
        raise ValueError(
            f"the fitted minimum (V0 = {v0:.3f} Å^3/atom) lies outside the measured volumes "
            f"({v.min():.3f}-{v.max():.3f}): measure on both sides of it"
        )
    residual = e - birchmurnaghan(v, *eos.eos_parameters)
    return BirchMurnaghan(
        float(v0), float(e0), b_gpa, bp, len(v), float(np.sqrt(np.mean(residual**2)))
    )


#: the reference grid: this many lattice constants within +-REFERENCE_STRAIN of the P = 0 root
#: (E(V) of Al and the L1_2 alloys departs from the Birch-Murnaghan form beyond about
#: +-0.5 %: over +-1 % Al's fitted minimum moves by 2e-4 Å and its B by 1 %)
REFERENCE_POINTS = 41
REFERENCE_STRAIN = 0.0025


@cache
def reference_equation_of_state(name: str, cutoff: Cutoff = "asap") -> BirchMurnaghan:
    """The converged equation of state of crystal ``name``: a Birch-Murnaghan fit on
    :data:`REFERENCE_POINTS` lattice constants evenly spread over +-:data:`REFERENCE_STRAIN`
    (in length) about the zero-pressure lattice constant, cached per process."""
    a0 = zero_pressure_lattice_constant(name, cutoff)
    grid = a0 * np.linspace(1 - REFERENCE_STRAIN, 1 + REFERENCE_STRAIN, REFERENCE_POINTS)
    points = evaluate_lattice_constants([name] * len(grid), grid, cutoff)
    return fit_birch_murnaghan(points.volume_per_atom_A3, points.energy_per_atom_eV)
