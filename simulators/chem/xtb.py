"""GFN2-xTB single points with tblite.

:func:`gfn2_single_point` runs ``tblite.interface.Calculator("GFN2-xTB", numbers,
positions_bohr)`` on one geometry (a neutral closed-shell molecule) and returns

- ``xtb_energy`` — the total energy [Hartree];
- ``xtb_gap`` — the HOMO-LUMO gap [eV]: the lowest orbital with occupation below one
  electron minus the highest with occupation above one (at tblite's default electronic
  temperature, 300 K, occupations are 2 or 0 for a molecule with a gap);
- ``xtb_dipole`` — the norm of the dipole moment [Debye].
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

BOHR_PER_ANGSTROM = 1.0 / 0.529177210903  # CODATA 2018 Bohr radius in Angstrom
EV_PER_HARTREE = 27.211386245988  # CODATA 2018
DEBYE_PER_AU = 2.541746473  # e * bohr in Debye (CODATA 2018)


@dataclass(frozen=True)
class XtbSettings:
    """Calculator settings (part of the cache key of every xTB result)."""

    method: str = "GFN2-xTB"
    accuracy: float = 1.0
    max_iterations: int = 250
    electronic_temperature_K: float = 300.0


class XtbError(Exception):
    """The SCF did not converge or tblite refused the input."""


def gfn2_single_point(
    numbers: np.ndarray, positions_angstrom: np.ndarray, settings: XtbSettings = XtbSettings()
) -> dict[str, float]:
    """``xtb_energy`` [Eh], ``xtb_gap`` [eV] and ``xtb_dipole`` [D] of one geometry."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # reproducible sums (before tblite loads)
    from tblite.exceptions import TBLiteRuntimeError, TBLiteValueError
    from tblite.interface import Calculator

    positions_bohr = np.asarray(positions_angstrom, dtype=np.float64) * BOHR_PER_ANGSTROM
    try:
        calc = Calculator(settings.method, np.asarray(numbers, dtype=np.int32), positions_bohr)
        calc.set("verbosity", 0)
        calc.set("accuracy", settings.accuracy)
        calc.set("max-iter", settings.max_iterations)
        calc.set("temperature", settings.electronic_temperature_K * 3.166808578545117e-06)
        result = calc.singlepoint()
    except (TBLiteRuntimeError, TBLiteValueError) as err:
        raise XtbError(f"tblite: {str(err).strip()[:200]}") from err
    orbital_energies = np.asarray(result.get("orbital-energies"))  # Hartree
    occupations = np.asarray(result.get("orbital-occupations"))
    if orbital_energies.ndim > 1:  # spin-resolved arrays: add up the channels
        orbital_energies, occupations = orbital_energies[0], occupations.sum(axis=0)
    occupied = np.flatnonzero(occupations > 1.0)
    empty = np.flatnonzero(occupations < 1.0)
    if occupied.size == 0 or empty.size == 0:
        raise XtbError("no HOMO-LUMO pair (no occupied or no empty orbital)")
    gap_hartree = orbital_energies[empty[0]] - orbital_energies[occupied[-1]]
    return {
        "xtb_energy": float(result.get("energy")),
        "xtb_gap": float(gap_hartree * EV_PER_HARTREE),
        "xtb_dipole": float(np.linalg.norm(result.get("dipole")) * DEBYE_PER_AU),
    }
