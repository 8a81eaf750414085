"""An independent integration of the constant-pressure reactor: scipy's ``solve_ivp``.

The lab's engine lets Cantera build and integrate the reactor (CVODES). Here the same
physics is written out and integrated by scipy, with Cantera used only for the
mechanism's rates and thermodynamics at a given state:

    dY_k/dt = wdot_k W_k / rho,        dT/dt = -sum_k h_k wdot_k / (rho c_p),

at constant pressure (Y: mass fractions, W: molar masses, h: molar enthalpies, wdot: net
molar production rates). The ignition delay is the time of maximum dT/dt, found on
the solver's steps and then refined on 401 points of its dense output around the largest
step (not by the engine's parabola). Different integrator (BDF or LSODA, finite-difference
Jacobian), different step control, different peak finder: where this and the engine
agree, neither's numerics made the number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labtwin.simulators.combustion.ignition import MECHANISM, IgnitionCase, set_mixture


@dataclass(frozen=True)
class ReferenceIgnition:
    """Ignition of one case by ``solve_ivp``: delay [s] and peak temperature [K]."""

    delay_s: float
    peak_temperature_K: float
    final_temperature_K: float
    method: str
    rtol: float
    n_steps: int


def ignite_scipy(
    case: IgnitionCase,
    end_s: float,
    method: str = "BDF",
    rtol: float = 1e-8,
    atol: float = 1e-14,
) -> ReferenceIgnition:
    """Integrate ``case`` to ``end_s`` seconds with ``solve_ivp(method)`` (see module doc).

    ``end_s`` must lie past the ignition (about twice the delay is enough for the peak
    temperature of an argon mixture; an N2 mixture peaks earlier and then cools as NO forms).
    """
    import cantera as ct
    from scipy.integrate import solve_ivp

    solution = ct.Solution(MECHANISM)
    set_mixture(solution, case)
    pressure = solution.P
    molar_masses = solution.molecular_weights

    def rates(y: np.ndarray) -> np.ndarray:
        solution.set_unnormalized_mass_fractions(y[1:])
        solution.TP = y[0], pressure
        wdot = solution.net_production_rates
        rho = solution.density
        out = np.empty_like(y)
        out[0] = -np.dot(solution.partial_molar_enthalpies, wdot) / (rho * solution.cp_mass)
        out[1:] = wdot * molar_masses / rho
        return out

    y0 = np.concatenate([[solution.T], solution.Y])
    result = solve_ivp(
        lambda _t, y: rates(y),
        (0.0, end_s),
        y0,
        method=method,
        rtol=rtol,
        atol=atol,
        dense_output=True,
    )
    if not result.success:
        raise RuntimeError(f"solve_ivp({method}) failed: {result.message}")
    heating = np.array([rates(y)[0] for y in result.y.T])
    i = int(np.argmax(heating))
    low, high = result.t[max(i - 1, 0)], result.t[min(i + 1, len(result.t) - 1)]
    fine = np.linspace(low, high, 401)
    fine_heating = [rates(result.sol(t))[0] for t in fine]
    delay = float(fine[int(np.argmax(fine_heating))])
    temperatures = result.y[0]
    peak = float(max(temperatures.max(), max(result.sol(t)[0] for t in fine)))
    if not math.isfinite(delay):
        raise RuntimeError("solve_ivp gave a non-finite delay")
    return ReferenceIgnition(
        delay_s=delay,
        peak_temperature_K=peak,
        final_temperature_K=float(temperatures[-1]),
        method=method,
        rtol=rtol,
        n_steps=len(result.t) - 1,
    )
