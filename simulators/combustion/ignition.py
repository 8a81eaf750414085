"""Homogeneous ignition of a premixed gas in an adiabatic, constant-pressure ideal-gas reactor.

The physics is Cantera's: GRI-Mech 3.0 (``gri30.yaml``, shipped with Cantera; 53 species,
325 reactions) in an ``IdealGasConstPressureReactor`` integrated by CVODES (BDF, rtol 1e-9,
atol 1e-15). Constant pressure, not constant volume, because the lab models the test gas
behind a reflected shock whose pressure is held by the shock tube's driver over the test
time, and because the end state is then Cantera's ``equilibrate("HP")`` state, a check the
tests make.

Ignition delay is the time of the maximum of dT/dt. It needs the temperature only (so it
is the same definition for every fuel and diluent, and for the independent integration of
:mod:`~labtwin.simulators.combustion.reference`) and it is what a pressure trace of a
shock tube marks as the onset. The OH peak, the other common marker, lies about 1 % after
it for the hydrocarbons, but for hydrogen OH keeps rising through the heat release and
peaks more than twice as late, so an OH-peak delay would mean different things for
different fuels. dT/dt is evaluated exactly from
the state at every CVODES step (``-sum(h_k wdot_k) / (rho c_p)``), and the time of its
maximum is refined by the vertex of the parabola through the largest sample and its two
neighbours, so the delay does not depend on where the steps happen to fall.

The run ends ``settle_factor`` delays after ignition, once the remaining temperature rise
is negligible (the rate dT/dt times the time since ignition is below ``settle_K``) or the
temperature falls (slow, endothermic NO formation after the peak in N2 mixtures); or at
``window_s`` without ignition. A run that takes more than ``max_steps`` integrator steps
or ``max_cpu_s`` seconds is stopped as stalled; a Cantera error becomes a failed result
with its message. Nothing here is random: a case's result is a function of the case and
the settings.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

MECHANISM = "gri30.yaml"
#: fuels of GRI-Mech 3.0 the lab offers (GRI-Mech 3.0 is optimised for natural gas, i.e.
#: methane with ethane and propane as minor components, and for hydrogen)
FUELS = ("CH4", "C2H6", "C3H8", "H2")
#: diluents: molecular nitrogen, or argon (``AR`` in GRI-Mech)
DILUENTS = ("N2", "AR")
ONE_ATM_PA = 101325.0

Status = Literal["ignited", "no_ignition", "failed"]


@dataclass(frozen=True)
class IgnitionCase:
    """One premixed mixture at its initial state.

    The unburnt gas is fuel + O2 in the ratio given by ``equivalence_ratio`` (1 is
    stoichiometric: all C to CO2, all H to H2O), diluted by ``diluent`` to a mole fraction
    of ``diluent_fraction`` (methane in air is N2 at 0.75 to 0.70 over phi 0.5-1.5).
    """

    fuel: str
    equivalence_ratio: float
    temperature_K: float
    pressure_atm: float
    diluent: str = "N2"
    diluent_fraction: float = 0.73

    def __post_init__(self) -> None:
        if self.fuel not in FUELS:
            raise ValueError(f"fuel must be one of {FUELS}, got {self.fuel!r}")
        if self.diluent not in DILUENTS:
            raise ValueError(f"diluent must be one of {DILUENTS}, got {self.diluent!r}")
        values = (self.equivalence_ratio, self.temperature_K, self.pressure_atm)
        if not all(math.isfinite(v) and v > 0 for v in values):
            raise ValueError(f"equivalence ratio, temperature and pressure must be > 0: {self}")
        if not 0.0 <= self.diluent_fraction < 1.0:
            raise ValueError(f"diluent_fraction must lie in [0, 1), got {self.diluent_fraction}")

    @property
    def pressure_Pa(self) -> float:
        return self.pressure_atm * ONE_ATM_PA


@dataclass(frozen=True)
class SolverSettings:
    """How a case is integrated (part of a result's identity: the cache keys on it)."""

    #: observation window: no ignition by then is reported as ``no_ignition`` [s]
    window_s: float = 0.1
    rtol: float = 1e-9
    atol: float = 1e-15
    #: after ignition, run at least this many delays ...
    settle_factor: float = 2.0
    #: ... and until dT/dt * (t - delay) falls below this [K] (or T falls)
    settle_K: float = 0.5
    #: a run integrated to at least this time (0: stop when settled) [s]
    end_s: float = 0.0
    max_steps: int = 50_000
    max_cpu_s: float = 60.0


DEFAULT_SETTINGS = SolverSettings()


@dataclass(frozen=True)
class IgnitionResult:
    """What one run of the reactor gives (noise-free)."""

    status: Status
    reason: str = ""
    #: time of maximum dT/dt [s] (nan unless ignited)
    delay_s: float = math.nan
    #: highest temperature reached [K]
    peak_temperature_K: float = math.nan
    #: temperature at the end of the run [K]
    final_temperature_K: float = math.nan
    #: simulated time at the end of the run [s]
    end_time_s: float = math.nan
    #: CVODES steps taken (the run's deterministic compute cost)
    n_steps: int = 0

    @classmethod
    def failed(cls, reason: str) -> IgnitionResult:
        return cls("failed", reason)


_GAS = None  # one ct.Solution per process (loading GRI-Mech takes ~0.1 s)


def gas():
    """This process's GRI-Mech 3.0 ``ct.Solution`` (Cantera is imported on first use)."""
    global _GAS
    if _GAS is None:
        import cantera as ct

        _GAS = ct.Solution(MECHANISM)
    return _GAS


def cantera_version() -> str:
    import cantera as ct

    return ct.__version__


def set_mixture(solution, case: IgnitionCase) -> None:
    """Put ``solution`` in the case's unburnt state (T, p and composition)."""
    solution.set_equivalence_ratio(case.equivalence_ratio, case.fuel, {"O2": 1.0})
    reactive = solution.X
    diluent = np.zeros(solution.n_species)
    diluent[solution.species_index(case.diluent)] = 1.0
    x = (1.0 - case.diluent_fraction) * reactive + case.diluent_fraction * diluent
    solution.TPX = case.temperature_K, case.pressure_Pa, x


def adiabatic_flame_temperature(case: IgnitionCase) -> float:
    """Cantera's ``equilibrate("HP")`` temperature of the case's mixture [K]."""
    import cantera as ct

    solution = ct.Solution(MECHANISM)
    set_mixture(solution, case)
    solution.equilibrate("HP")
    return float(solution.T)


def heating_rate(solution) -> float:
    """dT/dt [K/s] of an adiabatic constant-pressure gas: -sum(h_k wdot_k) / (rho c_p)."""
    release = float(np.dot(solution.partial_molar_enthalpies, solution.net_production_rates))
    return -release / (solution.density * solution.cp_mass)


def peak_time(times: np.ndarray, rates: np.ndarray, i: int) -> float:
    """Time of the maximum of a sampled rate: the vertex of the parabola through sample ``i``
    (the largest) and its neighbours, or ``times[i]`` at an end or for a degenerate fit."""
    if i == 0 or i == len(times) - 1:
        return float(times[i])
    t, r = times[i - 1 : i + 2], rates[i - 1 : i + 2]
    a, b, _ = np.polyfit(t - t[1], r, 2)
    if not a < 0:
        return float(times[i])
    vertex = t[1] - b / (2 * a)
    return float(min(max(vertex, t[0]), t[2]))


def ignite(case: IgnitionCase, settings: SolverSettings = DEFAULT_SETTINGS) -> IgnitionResult:
    """Integrate one case in the constant-pressure reactor (see the module docstring)."""
    import cantera as ct

    solution = gas()
    try:
        set_mixture(solution, case)
        reactor = ct.IdealGasConstPressureReactor(solution, clone=True)
        net = ct.ReactorNet([reactor])
        net.rtol, net.atol = settings.rtol, settings.atol
        return _integrate(case, settings, net, reactor)
    except ct.CanteraError as err:
        first = str(err).strip().splitlines()
        detail = next((line for line in first if line.strip() and "***" not in line), "")
        return IgnitionResult.failed(f"Cantera could not integrate the mixture: {detail[:300]}")


def _integrate(case: IgnitionCase, settings: SolverSettings, net, reactor) -> IgnitionResult:
    thermo = reactor.phase
    start = time.process_time()
    times, temperatures, rates = [0.0], [case.temperature_K], [heating_rate(thermo)]
    peak_rate, delay = rates[0], math.nan
    for step in range(1, settings.max_steps + 1):
        t = net.step()
        times.append(t)
        temperatures.append(thermo.T)
        rates.append(heating_rate(thermo))
        if rates[-1] > peak_rate:
            peak_rate = rates[-1]
        ignited = temperatures[-1] > case.temperature_K + 50.0 and rates[-1] < 0.1 * peak_rate
        if ignited and math.isnan(delay):
            i = int(np.argmax(rates))
            delay = peak_time(np.array(times), np.array(rates), i)
        if not math.isnan(delay):
            settled = t >= settings.settle_factor * delay and (
                rates[-1] < 0 or rates[-1] * (t - delay) < settings.settle_K
            )
            if settled and t >= settings.end_s:
                return IgnitionResult(
                    "ignited",
                    delay_s=delay,
                    peak_temperature_K=float(max(temperatures)),
                    final_temperature_K=float(thermo.T),
                    end_time_s=float(t),
                    n_steps=step,
                )
        elif t >= settings.window_s:
            rise = max(temperatures) - case.temperature_K
            return IgnitionResult(
                "no_ignition",
                f"no ignition within {settings.window_s * 1e3:g} ms (the temperature rose by "
                f"{rise:.3g} K)",
                peak_temperature_K=float(max(temperatures)),
                final_temperature_K=float(thermo.T),
                end_time_s=float(t),
                n_steps=step,
            )
        if time.process_time() - start > settings.max_cpu_s:
            return IgnitionResult.failed(
                f"the integration stalled: {settings.max_cpu_s:g} CPU s for {step} steps "
                f"reached t = {t:.3g} s"
            )
    return IgnitionResult.failed(
        f"the integration stalled: {settings.max_steps} steps reached t = {net.time:.3g} s"
    )
