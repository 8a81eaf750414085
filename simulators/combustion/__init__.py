"""Gas-phase ignition on Cantera with GRI-Mech 3.0.

- :mod:`~labtwin.simulators.combustion.ignition` — one premixed mixture (:class:`IgnitionCase`)
  in an adiabatic constant-pressure reactor: ignition delay (time of maximum dT/dt), peak
  and final temperature (:func:`ignite`), and the ``equilibrate("HP")`` flame temperature;
- :mod:`~labtwin.simulators.combustion.workers` — batches of cases in spawned worker
  processes (:class:`IgnitionPool`), a crash or a hang becoming a failed result, and a
  cache of results by case and solver settings;
- :mod:`~labtwin.simulators.combustion.reference` — the same reactor integrated by scipy's
  ``solve_ivp`` over Cantera's rates, an independent check of CVODES.

Cantera is imported lazily, inside the functions that need it.
"""

from labtwin.simulators.combustion.ignition import (
    DILUENTS,
    FUELS,
    MECHANISM,
    IgnitionCase,
    IgnitionResult,
    SolverSettings,
    adiabatic_flame_temperature,
    ignite,
)
from labtwin.simulators.combustion.workers import IgnitionPool

__all__ = [
    "DILUENTS",
    "FUELS",
    "MECHANISM",
    "IgnitionCase",
    "IgnitionPool",
    "IgnitionResult",
    "SolverSettings",
    "adiabatic_flame_temperature",
    "ignite",
]
