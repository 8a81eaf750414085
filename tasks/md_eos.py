"""Lennard-Jones equation-of-state lab: pressure and energy of the LJ fluid from batched MD.

An experiment is one NVT Langevin run of the LJ fluid at a chosen reduced temperature and
density, in reduced units (epsilon = sigma = mass = k_B = 1), made of ``replicas`` (4)
independent periodic boxes of ``n_atoms`` atoms (108 by default), each started from its own
jittered lattice. The potential is truncated at ``cutoff`` (the largest multiple of 0.05
sigma up to 2.5 that fits half the densest box: 2.45 for 108 atoms) with the standard tail
corrections (g(r) = 1 beyond the cutoff) added to pressure and energy. Each box equilibrates
for ``equilibration_steps`` (800) and then samples every 5 steps for ``production_steps``
(the knob, 200 to 2000); the observables are means over all replicas' samples.

Error bars: the standard error of each mean is the larger of
(:func:`~labtwin.simulators.md.observables.replica_estimate`)

- pymbar's estimate from the replicas' pooled autocorrelation function
  (``sqrt(var g / n)``), and
- the spread of the replica means over ``sqrt(replicas)``, divided by c4(replicas) (0.921
  for 4: the mean sample standard deviation of normal values over the true one).

Each is too small on its own in a short run: the autocorrelation function of 40 to 400
samples is cut off before its slow tail (measured: spread / error bar 0.9-1.4 over 64 runs),
and the spread of 4 replica means is an estimate with 3 degrees of freedom (0.84-1.26),
whose mean is c4(4) = 0.921 of the true spread (unbiased here, which the shortest runs need:
there it is the larger estimate in 9 runs of 10, and without the factor their error bars
read 10-12 % low over 256 seeds). The larger of the two is 0.89-1.03 over 96-256 seeds at
200, 500 and 2000 steps; the lab's calibration points are in ``docs/validation.md``. The
kinetic temperature is read from the
integrator's mid-step velocities, which agree with the thermostat (the full-step ones read
0.4 % cool in the dense liquid at dt = 0.005).

Validity: the JZG equation of state describes one fluid phase. Below the critical
temperature (T_c ~ 1.31) the lab's box can sit in the liquid-vapour coexistence region, and
at high density and low temperature beyond freezing, where a lattice start may stay
crystalline. The lab keeps such runs but says so: a measurement whose state could be there
for some well depth of the campaign range (the coldest, T* / 1.2) carries a note
(:func:`phase_note`). Campaign targets and answers are only ever on supercritical isotherms.

All experiments of a step are one :func:`~labtwin.simulators.md.lj_warp.run_lj` call (one
Warp kernel launch per stage for all boxes of all experiments, CUDA where present). The batch
runs as long as its longest experiment; each box is read out over its own run length only.
The engine's counter-based noise makes a box's trajectory independent of the rest of the
batch, so a result never depends on what else was measured with it.

Campaign: on an isotherm T_iso (1.8 to 2.4) find the density where the pressure equals a
target P_target. Each measurement scores its expected closeness to the target (see
:func:`~labtwin.tasks.md_common.target_closeness`, tolerance 0.05 + 5 % of P_target), times
a Gaussian factor of width 0.05 in the distance of the run's temperature from the
isotherm. A campaign may end with the density as a final answer, scored against the
Johnson-Zollweg-Gubbins (1993) equation of state of the campaign's fluid.

Hidden well depth: each campaign's fluid has its own well depth epsilon' = lambda epsilon
(lambda drawn uniformly in ``WELL_DEPTH_RANGE``, a hidden condition); knobs and observables
stay in units of the reference epsilon. By corresponding states a run at (T, rho) of that
fluid is a run of the reference fluid at (T / lambda, rho) with pressure, energies and
temperature multiplied by lambda (exact for the truncated, tail-corrected potential; the
integrator's dt and friction are in the fluid's own time unit). So the lab simulates the
reference fluid at T / lambda and scales the observables back, and the answer's truth is
the JZG density at (T_iso / lambda, P_target / lambda). Without lambda the published EOS
does not give the answer: it has to be measured. T_iso / lambda stays in [1.5, 3.0]:
supercritical (T_c ~ 1.31, so P rises monotonically with rho) and inside the JZG fit range.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from scipy.optimize import brentq

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, knob, register_task
from labtwin.calibration import CalibrationPoint, Reference
from labtwin.frames import structure_panel
from labtwin.simulators.md import eos
from labtwin.simulators.md.build import lj_fluid
from labtwin.simulators.md.observables import replica_estimate
from labtwin.simulators.md.state import MDState
from labtwin.structures import structure_artifacts
from labtwin.task import AnalysisTool
from labtwin.tasks.md_common import engine_versions, target_closeness

TEMPERATURE_RANGE = (0.8, 3.0)  # T*, inside the JZG fit range 0.7 < T* < 6
DENSITY_RANGE = (0.05, 0.9)  # rho*, fluid states
ISOTHERMS = (1.8, 2.4)  # campaign isotherms: supercritical, pressure monotonic in density
WELL_DEPTH_RANGE = (0.8, 1.2)  # hidden lambda = epsilon' / epsilon: T_iso / lambda in [1.5, 3]
TARGET_DENSITIES = (0.4, 0.75)  # densities whose (scaled) JZG pressure is a campaign's target
#: impossible variant: P_target is this factor above the isotherm's pressure at the densest
#: knob (rho* = 0.9), so no run in the box reaches it (many tolerances away)
IMPOSSIBLE_PRESSURE_FACTOR = (1.3, 1.6)
SAMPLE_EVERY = 5  # MD steps between samples
PRODUCTION_STEPS = (200, 2000)  # knob range of the production run of each replica
REPLICAS = 4  # independent boxes per experiment (their spread is half of the error bar)
#: a state gets a phase note when it could be two-phase or frozen for the coldest fluid of
#: the campaign range, T* / max(lambda)
COLDEST_SCALE = 1.0 / max(WELL_DEPTH_RANGE)
T_CRITICAL = 1.313  # JZG (1993) critical temperature
RHO_CRITICAL = 0.31
#: liquid density at freezing: triple point (Mastny & de Pablo, J. Chem. Phys. 127, 104504
#: (2007)) and Hansen & Verlet, Phys. Rev. 184, 151 (1969), interpolated linearly in T*
FREEZING_LIQUID_DENSITY = ((0.694, 0.845), (0.75, 0.875), (1.15, 0.936), (1.35, 0.964))
TEMPERATURE_TOLERANCE = 0.05  # width of the isotherm factor of the score (T*)
ANSWER_TOLERANCE = 0.02  # width of the Gaussian answer score (rho*)
MAX_ARTIFACT_ROWS = 200
#: frames of replica 0 a measurement keeps, evenly spaced over its production (the last is
#: its final configuration)
STRUCTURE_FRAMES = 8
WELL_DEPTH_SPREAD = (WELL_DEPTH_RANGE[1] - WELL_DEPTH_RANGE[0]) / 2  # told in the brief
SUCCESS_THRESHOLD = 0.75  # a run's score that counts as having measured the target
#: finite-size (108 atoms) and truncation bias of P* against JZG, measured (docs/validation.md)
FINITE_SIZE_TEXT = "up to about 4 % below"


class EOSRun(Experiment):
    """One NVT run of the LJ fluid."""

    temperature: float = knob(
        *TEMPERATURE_RANGE, unit="epsilon/k_B", description="reduced temperature T* of the run"
    )
    density: float = knob(
        *DENSITY_RANGE, unit="sigma^-3", description="reduced number density rho* = N sigma^3 / V"
    )
    production_steps: int = knob(
        *PRODUCTION_STEPS,
        unit="steps",
        log=True,
        description="production MD steps (dt = 0.005 tau) of each of the run's independent "
        "boxes, after their equilibration; longer runs cost more and give smaller error bars",
    )


class IsothermDensity(BaseModel):
    """Final answer: the density at which the isotherm reaches the target pressure."""

    density: float = Field(
        ge=0.0,
        le=1.5,
        allow_inf_nan=False,
        description="reduced density rho* where P*(rho*, T_iso) = P_target [sigma^-3]",
    )


def jzg_density_at_pressure(pressure: float, temperature: float) -> float:
    """Density rho* of the JZG fluid with pressure P* at temperature T* (supercritical)."""
    return float(brentq(lambda rho: float(eos.pressure(rho, temperature)) - pressure, 1e-6, 1.25))


def scaled_jzg_pressure(density: float, temperature: float, well_depth: float) -> float:
    """JZG pressure of a fluid of well depth ``well_depth`` * epsilon, in reference units.

    Corresponding states: P(T, rho; lambda epsilon) = lambda P_JZG(T / lambda, rho).

    >>> round(scaled_jzg_pressure(0.6, 2.0, 1.0), 6) == round(float(eos.pressure(0.6, 2.0)), 6)
    True
    """
    return well_depth * float(eos.pressure(density, temperature / well_depth))


def scaled_jzg_density(pressure: float, temperature: float, well_depth: float) -> float:
    """Density at which the fluid of well depth ``well_depth`` * epsilon has pressure P*
    at temperature T* (reference units): the JZG density at (T / lambda, P / lambda)."""
    return jzg_density_at_pressure(pressure / well_depth, temperature / well_depth)


@functools.cache
def _coexistence_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """T*, rho_vapour and rho_liquid of the JZG liquid-vapour coexistence curve from
    T* = 0.66 up to 1.30 (continuation from the cold end: near T_c a default guess
    collapses), computed once."""
    table, guess = [], (0.001, 0.86)
    for t in np.arange(0.66, 1.3001, 0.02):
        with warnings.catch_warnings():  # fsolve's xtol of 1e-12 is stricter than needed here
            warnings.simplefilter("ignore", RuntimeWarning)
            rv, rl, _ = eos.coexistence(float(t), guess=guess)
        table.append((float(t), rv, rl))
        guess = (rv, rl)
    t_table, rv_table, rl_table = (np.array(c) for c in zip(*table))
    return t_table, rv_table, rl_table


def phase_note(temperature: float, density: float) -> str | None:
    """Why a run at (T*, rho*) of the reference fluid may not be one fluid phase, or None.

    Inside the JZG liquid-vapour dome (closed linearly from T* = 1.30 to the critical point),
    or denser than the liquid at freezing, or colder than the triple point.

    >>> phase_note(2.0, 0.5) is None
    True
    >>> phase_note(1.0, 0.3).startswith("in the liquid-vapour")
    True
    """
    t_table, rv_table, rl_table = _coexistence_table()
    if temperature < FREEZING_LIQUID_DENSITY[0][0]:
        return "below the triple-point temperature (T* = 0.694): a solid or a two-phase box"
    t_f, rho_f = (np.array(c) for c in zip(*FREEZING_LIQUID_DENSITY))
    freezing = float(np.interp(temperature, t_f, rho_f, right=np.inf))
    if temperature <= t_f[-1] and density > freezing:
        return (
            f"beyond freezing (liquid at freezing: rho* = {freezing:.3f} at T* = {temperature:.3g})"
        )
    if temperature < T_CRITICAL:
        if temperature <= t_table[-1]:
            low = float(np.interp(temperature, t_table, rv_table))
            high = float(np.interp(temperature, t_table, rl_table))
        else:  # close the dome linearly to the critical point
            w = (temperature - t_table[-1]) / (T_CRITICAL - t_table[-1])
            low = (1 - w) * rv_table[-1] + w * RHO_CRITICAL
            high = (1 - w) * rl_table[-1] + w * RHO_CRITICAL
        if low < density < high:
            return (
                f"in the liquid-vapour coexistence region (rho* {low:.3f} to {high:.3f} at "
                f"T* = {temperature:.3g}): the box may separate into liquid and vapour"
            )
    return None


def structure_samples(n_samples: int) -> np.ndarray:
    """Indices of the samples whose positions a run of ``n_samples`` keeps: evenly spaced,
    the last one included (they depend on the run alone, not on its batch).

    >>> structure_samples(40).tolist()
    [0, 6, 11, 17, 22, 28, 33, 39]
    """
    return np.unique(np.linspace(0, n_samples - 1, STRUCTURE_FRAMES).round().astype(int))


def campaign_phase_note(temperature: float, density: float) -> str | None:
    """The note a run at (T*, rho*) carries: :func:`phase_note` of the coldest fluid in the
    campaign range (T* / 1.2), so the note depends on the experiment only, not on the
    campaign's hidden well depth."""
    why = phase_note(temperature * COLDEST_SCALE, density)
    if why is None:
        return None
    return (
        f"for some well depths in this lab's range this state lies {why}; the run reports "
        "what such a box gives, which the one-phase equation of state does not describe"
    )


def fit_isotherm(arguments: dict[str, Any], history: list[Measurement]) -> str:
    """Analysis tool: fit P*(rho*) on one isotherm and solve it for a target pressure.

    Uses the campaign's ``ok`` runs within 0.05 of ``temperature``; a weighted
    (1/sigma^2) polynomial of degree min(2, n - 1) in the density; the density
    error comes from the fit's covariance propagated through the root.
    """
    temperature = float(arguments["temperature"])
    target = float(arguments["target_pressure"])
    points = [
        (m.experiment["density"], m["pressure"], max(m.observables["pressure"].uncertainty, 1e-6))
        for m in history
        if m.ok and abs(m.experiment["temperature"] - temperature) <= TEMPERATURE_TOLERANCE
    ]
    if len(points) < 2:
        return f"need at least 2 runs within 0.05 of T* = {temperature:g}; have {len(points)}"
    rho, pressure, sigma = (np.array(v, dtype=float) for v in zip(*points))
    degree = min(2, len(points) - 1)
    coef, cov = np.polyfit(rho, pressure, degree, w=1 / sigma, cov="unscaled")
    roots = [
        r.real
        for r in np.roots(coef - np.eye(degree + 1)[-1] * target)
        if abs(r.imag) < 1e-12 and DENSITY_RANGE[0] - 0.1 <= r.real <= DENSITY_RANGE[1] + 0.1
    ]
    terms = " + ".join(f"{c:.4g} rho^{degree - k}" for k, c in enumerate(coef))
    if not roots:
        return f"fit P* = {terms}; it does not reach P* = {target:g} in the fluid range"
    root = min(roots, key=lambda r: abs(r - rho.mean()))
    slope = np.polyval(np.polyder(coef), root)
    gradient = np.array([root ** (degree - k) for k in range(degree + 1)]) / slope
    error = float(np.sqrt(max(gradient @ cov @ gradient, 0.0)))
    return (
        f"fit of {len(points)} runs at T* = {temperature:g}: P* = {terms}; "
        f"P* = {target:g} at rho* = {root:.4f} ± {error:.4f}"
    )


def default_cutoff(n_atoms: int, max_density: float = DENSITY_RANGE[1]) -> float:
    """Largest multiple of 0.05 sigma, at most 2.5, within half the edge of the densest box."""
    half_edge = 0.5 * (n_atoms / max_density) ** (1 / 3)
    return min(2.5, math.floor(half_edge * 20 + 1e-9) / 20)


@register_task
class LJEquationOfState(Task):
    """Find the density at which an LJ isotherm reaches a target pressure.

    Success: a run on the isotherm scores at least 0.75 (``success_threshold``,
    :meth:`success`): with a small error bar, a pressure measured within 0.76 tolerances
    (tolerance 0.05 + 5 % of P_target) of the target at the isotherm's temperature (within
    0.05 of it). A submitted density is scored but is no success by itself.
    """

    id = "LJEquationOfState-v2"
    experiment_model = EOSRun
    answer_model = IsothermDensity
    observables = (
        ObservableSpec("pressure", "epsilon/sigma^3", "virial pressure P*, tail-corrected"),
        ObservableSpec(
            "potential_energy", "epsilon", "potential energy per particle U*/N, tail-corrected"
        ),
        ObservableSpec("temperature", "epsilon/k_B", "kinetic temperature of the run"),
    )
    public_conditions = (
        ObservableSpec("temperature", "epsilon/k_B", "isotherm T_iso"),
        ObservableSpec("target_pressure", "epsilon/sigma^3", "target pressure P_target"),
    )
    cost_unit = "atom-steps"
    default_budget = 12
    #: closeness times the isotherm factor, and the Gaussian answer score: both in [0, 1]
    score_range = (0.0, 1.0)
    #: a run on the isotherm that measured the target pressure (see :meth:`success`)
    success_threshold = SUCCESS_THRESHOLD
    reward_description = (
        "each run scores its expected closeness to the target pressure given its error bar "
        "(Gaussian kernel, tolerance 0.05 + 5% of P_target), times exp(-dT^2 / (2 * 0.05^2)) "
        "for a run off the isotherm; an optional final density answer scores "
        "exp(-(rho - rho_true)^2 / (2 * 0.02^2)) against the Johnson-Zollweg-Gubbins EOS of "
        "the campaign's fluid (its hidden well depth)"
    )
    brief = f"""
You run molecular dynamics of a Lennard-Jones fluid in the reduced units of a reference LJ
fluid (epsilon = sigma = mass = k_B = 1). Each experiment simulates 4 independent periodic
boxes of 108 atoms at the temperature T* and density rho* you choose (Langevin thermostat,
dt = 0.005 tau, potential truncated near 2.5 sigma with long-range tail corrections), each
equilibrated for 800 steps, and reports the pressure P*, the potential energy per particle
and the kinetic temperature, each with its standard error (from the correlation of the
boxes' time series and their spread; calibrated over 64 repeats). production_steps sets the
run length: longer runs cost more atom-steps and give smaller error bars (halving the error
bar takes about four times the production). The boxes are small: beyond statistical error
P* reads {FINITE_SIZE_TEXT} the equation of state of the infinite fluid (measured).
Below the critical temperature (about 1.3) a state can lie in the liquid-vapour
coexistence region, and a cold dense one beyond freezing; runs there say so in a note.

The well depth of the fluid differs from campaign to campaign (by up to {WELL_DEPTH_SPREAD:.0%} either way) and
is not told: temperatures, pressures and energies are given in units of a fixed reference
epsilon, not of this fluid's own. The published reference equation of state of the LJ fluid
(Johnson, Zollweg and Gubbins 1993) holds only in the fluid's own reduced units, so it cannot
give the answer on its own: measure.

Goal: on the isotherm T_iso stated at the start of the campaign, find the density at which
the pressure equals the target pressure P_target. A run scores its expected closeness to
the target given its error bar (tolerance 0.05 + 5 % of P_target), reduced when its
temperature is off the isotherm (width 0.05). You may end the campaign by submitting the
density as a final answer; it scores exp(-(error / 0.02)^2 / 2) against the reference
equation of state evaluated for this campaign's fluid.
"""

    def __init__(
        self,
        budget: int | None = None,
        n_atoms: int = 108,
        replicas: int = REPLICAS,
        equilibration_steps: int = 800,
        dt: float = 0.005,
        friction: float = 1.0,
        cutoff: float | None = None,
        device: str | None = None,
        impossible: bool = False,
    ) -> None:
        super().__init__(budget)
        if n_atoms < 32:
            raise ValueError(f"n_atoms must be at least 32, got {n_atoms}")
        if replicas < 2:
            raise ValueError(
                f"replicas must be at least 2 (their spread is an error bar), got {replicas}"
            )
        if equilibration_steps < 0 or dt <= 0 or friction <= 0:
            raise ValueError("equilibration_steps >= 0, dt > 0 and friction > 0 are required")
        self.n_atoms = int(n_atoms)
        self.replicas = int(replicas)
        self.equilibration_steps = int(equilibration_steps)
        self.dt = float(dt)
        self.friction = float(friction)
        self.cutoff = float(cutoff) if cutoff is not None else default_cutoff(self.n_atoms)
        self._device = device
        self.impossible = bool(impossible)

    @property
    def device(self) -> str:
        if self._device is None:
            from labtwin.simulators.md.lj_warp import default_device

            self._device = default_device()
        return self._device

    # ---- campaign conditions -------------------------------------------------------

    @staticmethod
    def conditions_for(temperature: float, density: float, well_depth: float) -> dict[str, Any]:
        """Conditions whose target is the pressure of the campaign's fluid at ``density``."""
        target_pressure = round(scaled_jzg_pressure(density, temperature, well_depth), 3)
        return {
            "temperature": temperature,
            "target_pressure": target_pressure,
            "well_depth": well_depth,
            "target_density": scaled_jzg_density(target_pressure, temperature, well_depth),
        }

    @staticmethod
    def impossible_conditions_for(
        temperature: float, factor: float, well_depth: float
    ) -> dict[str, Any]:
        """A target pressure ``factor`` times the isotherm's pressure at the densest knob:
        no run in the box reaches it, and no answer is right (``target_density`` None)."""
        densest = scaled_jzg_pressure(DENSITY_RANGE[1], temperature, well_depth)
        return {
            "temperature": temperature,
            "target_pressure": round(factor * densest, 3),
            "well_depth": well_depth,
            "target_density": None,
        }

    def nominal_conditions(self) -> dict[str, Any]:
        if self.impossible:
            return self.impossible_conditions_for(2.0, IMPOSSIBLE_PRESSURE_FACTOR[0], 1.0)
        return self.conditions_for(2.0, 0.6, 1.0)

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        temperature = round(float(rng.uniform(*ISOTHERMS)), 2)
        well_depth = round(float(rng.uniform(*WELL_DEPTH_RANGE)), 4)
        if self.impossible:
            factor = float(rng.uniform(*IMPOSSIBLE_PRESSURE_FACTOR))
            return self.impossible_conditions_for(temperature, factor, well_depth)
        density = float(rng.uniform(*TARGET_DENSITIES))
        return self.conditions_for(temperature, density, well_depth)

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        return (
            f"Isotherm T_iso = {conditions['temperature']:.2f}; "
            f"target pressure P_target = {conditions['target_pressure']:.3f}."
        )

    # ---- simulation ----------------------------------------------------------------

    def experiment_cost(self, production_steps: int) -> float:
        """Atom-steps of one experiment: every replica's equilibration and production."""
        return float(self.replicas * self.n_atoms * (self.equilibration_steps + production_steps))

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        from labtwin.simulators.md.lj_warp import run_lj

        r = self.replicas
        # per experiment: one lattice seed and one thermostat seed per replica
        seeds = np.array([rng.integers(0, 2**31, size=(r, 2)) for rng in rngs])
        # corresponding states: the campaign's fluid at T is the reference fluid at T / lambda
        well_depth = np.array([float(c["well_depth"]) for c in conditions])
        reference_t = np.array([e.temperature for e in experiments]) / well_depth
        state = MDState.concatenate(
            [
                lj_fluid(self.n_atoms, e.density, t, seed=int(seed[0]))
                for e, t, pair in zip(experiments, reference_t, seeds)
                for seed in pair
            ]
        )
        steps = np.array([e.production_steps for e in experiments])
        frame_samples = [structure_samples(int(n) // SAMPLE_EVERY) for n in steps]
        kept = sorted(set(np.concatenate(frame_samples).tolist()))  # the run's frames, in order
        result = run_lj(
            state,
            int(steps.max()),
            dt=self.dt,
            temperature=np.repeat(reference_t, r),
            friction=self.friction,
            seed=seeds[:, :, 1].ravel(),
            sample_every=SAMPLE_EVERY,
            n_equilibration=self.equilibration_steps,
            cutoff=self.cutoff,
            trajectory_samples=kept,
            device=self.device,
        )
        frame_of = {k: f for f, k in enumerate(kept)}
        provenance = {
            "simulator": "labtwin.simulators.md.lj_warp (BAOAB Langevin, float32)",
            "device": result.device,
            "n_atoms": self.n_atoms,
            "replicas": r,
            "cutoff": self.cutoff,
            "dt": self.dt,
            "versions": engine_versions("warp-lang"),
        }
        out = []
        for i, e in enumerate(experiments):
            n = int(e.production_steps) // SAMPLE_EVERY
            boxes = slice(i * r, (i + 1) * r)
            # (replica, sample) series; P*, U*/N and T* scale with epsilon: back to the
            # reference epsilon's units
            series = {
                name: result.series[name][:n, boxes].T.astype(np.float64) * well_depth[i]
                for name in ("pressure", "potential_energy", "temperature")
            }
            cost = self.experiment_cost(int(e.production_steps))
            if not all(np.all(np.isfinite(v)) for v in series.values()):
                out.append(
                    Measurement.failed(
                        "the simulation blew up (non-finite energies or positions)",
                        cost=cost,
                        provenance=dict(provenance),
                    )
                )
                continue
            observables, inefficiency = {}, {}
            for spec in self.observables:
                estimate = replica_estimate(series[spec.name])
                observables[spec.name] = Value(estimate.mean, spec.unit, estimate.stderr)
                inefficiency[spec.name] = round(estimate.inefficiency, 2)
            stride = max(1, -(-n // MAX_ARTIFACT_ROWS))
            time = result.time[:n:stride]
            table = np.stack(
                [time]
                + [
                    series[k].mean(axis=0)[::stride]
                    for k in ("temperature", "pressure", "potential_energy")
                ],
                axis=1,
            )
            note = campaign_phase_note(e.temperature, e.density)
            out.append(
                Measurement(
                    "ok",
                    observables,
                    cost=cost,
                    provenance={**provenance, "statistical_inefficiency": inefficiency},
                    artifacts={
                        "series_t_T_P_U": table,
                        **self._structure(result, i * r, [frame_of[k] for k in frame_samples[i]]),
                    },
                    notes=[note] if note else [],
                )
            )
        return out

    def _structure(self, result, box: int, frames: list[int]) -> dict[str, np.ndarray]:
        """Box ``box``'s kept frames, wrapped into its cubic cell (pseudo-atoms, sigma)."""
        atoms = slice(box * self.n_atoms, (box + 1) * self.n_atoms)
        edge = result.state.box[box].astype(np.float64)
        positions = result.trajectory[frames][:, atoms].astype(np.float64) % edge
        return structure_artifacts(np.zeros(self.n_atoms), positions, np.diag(edge))

    def frame_panel(self, records, conditions):  # noqa: D102 (documented on Task)
        return structure_panel(records, "no box simulated yet")

    # ---- calibration ---------------------------------------------------------------

    #: (label, T*, rho*, production steps, well depth): supercritical, compressed liquid,
    #: hot and dense, near-critical, and a campaign fluid of another well depth
    CALIBRATION_STATES = (
        ("supercritical", 2.0, 0.5, 2000, 1.0),
        ("compressed liquid", 1.2, 0.8, 2000, 1.0),
        ("hot dense, short run", 3.0, 0.9, 200, 1.0),
        ("near critical", 1.5, 0.3, 500, 1.0),
        ("well depth 0.8, short run", 1.6, 0.6, 200, 0.8),
    )
    #: length of the OpenMM reference: replicas x production steps per calibration point
    REFERENCE_RUN = (8, 15000)

    def calibration_points(self) -> list[CalibrationPoint]:
        return [
            CalibrationPoint(
                label=f"{label} (T*={t:g}, rho*={rho:g}, {steps} steps, lambda={lam:g})",
                experiment={"temperature": t, "density": rho, "production_steps": steps},
                conditions={**self.nominal_conditions(), "well_depth": lam},
            )
            for label, t, rho, steps, lam in self.CALIBRATION_STATES
        ]

    def calibration_reference(self, point: CalibrationPoint) -> dict[str, Reference]:
        """A second engine: the same boxes (atoms, cutoff, tail corrections, thermostat) run
        in OpenMM with observables summed in NumPy
        (:func:`~labtwin.simulators.md.lj_reference.openmm_lj_reference`), its error from
        its own replicas (the larger of pymbar's and the replica spread); the kinetic
        temperature's reference is the thermostat set point."""
        from labtwin.simulators.md.lj_reference import openmm_lj_reference

        well_depth = float(point.conditions["well_depth"])
        temperature = float(point.experiment["temperature"])
        replicas, steps = self.REFERENCE_RUN
        run = openmm_lj_reference(
            self.n_atoms,
            float(point.experiment["density"]),
            temperature / well_depth,
            self.cutoff,
            steps,
            replicas=replicas,
            n_equilibration=max(self.equilibration_steps, 2000),
            dt=self.dt,
            friction=self.friction,
            seed=7,
        )
        out = {"temperature": Reference(temperature, 0.0, "thermostat set point")}
        for name in ("pressure", "potential_energy"):
            estimate = getattr(run, name)
            out[name] = Reference(
                estimate.mean * well_depth,
                estimate.stderr * well_depth,
                "OpenMM run of the same boxes",
            )
        return out

    def analysis_tools(self) -> list[AnalysisTool]:
        parameters = {
            "type": "object",
            "properties": {
                "temperature": {"type": "number", "description": "isotherm T*"},
                "target_pressure": {"type": "number", "description": "pressure P* to solve for"},
            },
            "required": ["temperature", "target_pressure"],
            "additionalProperties": False,
        }
        return [
            AnalysisTool(
                "fit_isotherm",
                "Fit the measured pressures on an isotherm and "
                "solve for the density at a target pressure (costs no experiment).",
                parameters,
                fit_isotherm,
            )
        ]

    # ---- scores --------------------------------------------------------------------

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        pressure = measurement.observables["pressure"]
        target = conditions["target_pressure"]
        closeness = target_closeness(
            pressure.value, pressure.uncertainty, target, 0.05 + 0.05 * abs(target)
        )
        off = (measurement.experiment["temperature"] - conditions["temperature"]) / (
            TEMPERATURE_TOLERANCE
        )
        return closeness * math.exp(-0.5 * off**2)

    def score_answer(self, answer: IsothermDensity, conditions, history) -> float:
        if conditions["target_density"] is None:  # impossible variant: no density is right
            return 0.0
        error = answer.density - conditions["target_density"]
        return math.exp(-0.5 * (error / ANSWER_TOLERANCE) ** 2)

    def success(self, records: list[Any], conditions: dict[str, Any]) -> bool:
        """A run on the isotherm measured the target pressure: some ``ok`` experiment scored
        at least ``success_threshold``. Answers are paid but do not count: a density guessed
        from the published EOS without measuring is right in some campaigns by luck (dense
        fluids barely feel the well depth), and success is what the lab measured."""
        scores = [
            r.score
            for r in records
            if r.kind == "experiment" and r.score is not None and r.measurement.ok
        ]
        return bool(scores) and max(scores) >= self.success_threshold
