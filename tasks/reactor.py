"""Batch-reactor labs: consecutive reactions A -> B -> C with a side reaction 2A -> D.

The chemistry (nominal values, rate constants per minute):

- A -> B, first order, k1 = A1 exp(-Ea1 / RT) (1 + g * loading); a catalyst
  (loading in mol%) speeds up only this step.  A1 = 1e8 /min, Ea1 = 60 kJ/mol, g = 0.5 /mol%.
- B -> C, first order, over-reaction of the product: A2 = 1e10 /min, Ea2 = 80 kJ/mol.
- 2A -> D, second order, dimerisation of the feed: A3 = 2e5 L/(mol min), Ea3 = 45 kJ/mol.

B is wanted. Hot and long runs over-react B to C; concentrated feeds lose A
to D; cold runs are slow within the allowed reaction time. Each campaign draws
its own batch of reagents (log-normal spread of the prefactors, ``kinetics_spread``),
so the best conditions must be found by experiment, not remembered.

Analysis: every concentration is measured by a calibrated HPLC with 2 %
relative plus 2 mmol/L absolute standard error (seeded Gaussian noise); each
run costs its reaction time plus 30 min of work-up and analysis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from pydantic import BaseModel, Field

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value, knob, register_task
from labtwin.simulators.kinetics import (
    GAS_CONSTANT,
    Reaction,
    ReactionNetwork,
    arrhenius,
    default_device,
    integrate,
)

NETWORK = ReactionNetwork(
    species=("A", "B", "C", "D"),
    reactions=(
        Reaction({"A": 1}, {"B": 1}),
        Reaction({"B": 1}, {"C": 1}),
        Reaction({"A": 2}, {"D": 1}),
    ),
)

NOMINAL = {
    "prefactors": (1.0e8, 1.0e10, 2.0e5),  # 1/min, 1/min, L/(mol min)
    "activation_energies": (60.0e3, 80.0e3, 45.0e3),  # J/mol
    "catalyst_gain": 0.5,  # fractional speed-up of A -> B per mol% catalyst
}

RELATIVE_NOISE = 0.02  # HPLC relative standard error
ABSOLUTE_NOISE = 0.002  # mol/L, HPLC detection floor (1 sigma)
WORKUP_MIN = 30.0  # work-up and analysis time per run, minutes
N_STEPS = 1000  # RK4 steps per run; k*dt <= 0.4 over the whole experiment box


def rate_constants(
    conditions: list[dict[str, Any]],
    temperature_K: np.ndarray | torch.Tensor,
    loading_mol_pct: np.ndarray | torch.Tensor | Sequence[float],
    side_reaction: bool = True,
    device: torch.device | None = None,
) -> torch.Tensor:
    """The rate law: rate constants of A -> B, B -> C and 2A -> D for N reactors.

    ``conditions`` are the N reactors' kinetics, ``loading_mol_pct`` their
    catalyst loadings ``(N,)`` and ``temperature_K`` their temperatures, ``(N,)``
    for one temperature per reactor or ``(N, S)`` for S stages each. Returns k,
    float64, ``(N, 3)`` or ``(N, S, 3)``; the catalyst speeds up A -> B only,
    and ``side_reaction=False`` switches 2A -> D off.
    """
    device = device or default_device()
    f64 = dict(dtype=torch.float64, device=device)
    temperature = torch.as_tensor(temperature_K, **f64)
    stages = (1,) * (temperature.dim() - 1)  # broadcast the per-reactor values over stages
    n = len(conditions)
    prefactor = torch.tensor([c["prefactors"] for c in conditions], **f64).view(n, *stages, 3)
    energy = torch.tensor([c["activation_energies"] for c in conditions], **f64).view(n, *stages, 3)
    gain = torch.tensor([c["catalyst_gain"] for c in conditions], **f64)
    k = arrhenius(prefactor, energy, temperature.unsqueeze(-1))
    speed_up = 1.0 + gain * torch.as_tensor(loading_mol_pct, **f64)
    k[..., 0] = k[..., 0] * speed_up.view(n, *stages)
    if not side_reaction:
        k[..., 2] = 0.0
    return k


def run_reactors(
    temperature_K: np.ndarray,
    time_min: np.ndarray,
    feed_mol_L: np.ndarray,
    loading_mol_pct: np.ndarray,
    conditions: list[dict[str, Any]],
    side_reaction: bool = True,
    device: torch.device | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Noise-free batch runs of N reactors in one integration.

    Returns final concentrations ``(N, 4)`` of A, B, C, D in mol/L and time
    courses ``(N, n_samples, 5)`` with columns t [min], A, B, C, D.
    """
    device = device or default_device()
    f64 = dict(dtype=torch.float64, device=device)
    k = rate_constants(conditions, temperature_K, loading_mol_pct, side_reaction, device)
    c0 = torch.zeros(len(k), len(NETWORK.species), **f64)
    c0[:, 0] = torch.as_tensor(feed_mol_L, **f64)
    course = integrate(NETWORK, c0, k, torch.as_tensor(time_min, **f64), n_steps=N_STEPS)
    table = torch.cat([course.times.unsqueeze(2), course.concentrations], dim=2)
    return course.final.cpu().numpy(), table.cpu().numpy()


def hplc(
    true_conc: np.ndarray, rng: np.random.Generator, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Measured concentrations (mol/L) and their standard errors for one sample.

    ``scale`` multiplies the instrument's noise (0 gives exact readings).
    """
    sigma = scale * (RELATIVE_NOISE * np.abs(true_conc) + ABSOLUTE_NOISE)
    measured = np.maximum(true_conc + sigma * rng.standard_normal(true_conc.shape), 0.0)
    return measured, sigma


def reactor_measurements(
    final: np.ndarray,
    courses: Sequence[np.ndarray],
    feeds_mol_L: Sequence[float],
    reaction_min: Sequence[float],
    rngs: list[np.random.Generator],
    noise: float,
    simulator: str,
    device: torch.device,
) -> list[Measurement]:
    """What the HPLC reports on N finished runs.

    ``final`` are the true final concentrations ``(N, 4)`` of A, B, C, D,
    ``courses`` the runs' time courses (kept as the ``time_course`` artifact),
    ``reaction_min`` each run's total reaction time (the cost adds the work-up)
    and ``noise`` the HPLC noise scale. A run whose concentrations are not
    finite or clearly negative is reported as a failed measurement.
    """
    provenance = {
        "simulator": simulator,
        "device": str(device),
        "versions": {"torch": torch.__version__},
    }
    out = []
    for conc, course, feed, minutes, rng in zip(final, courses, feeds_mol_L, reaction_min, rngs):
        if not np.all(np.isfinite(conc)) or conc.min() < -1e-6 * feed:
            out.append(Measurement.failed("integration became unstable", provenance=provenance))
            continue
        measured, sigma = hplc(np.clip(conc, 0.0, None), rng, noise)
        observables = {
            "yield_B": Value(float(measured[1] / feed), "", float(sigma[1] / feed)),
            "conversion_A": Value(float(1.0 - measured[0] / feed), "", float(sigma[0] / feed)),
        }
        observables.update(
            {
                f"conc_{s}": Value(float(v), "mol/L", float(e))
                for s, v, e in zip(NETWORK.species, measured, sigma)
            }
        )
        out.append(
            Measurement(
                "ok",
                observables,
                cost=(minutes + WORKUP_MIN) / 60.0,
                provenance=dict(provenance),
                artifacts={"time_course": course},
            )
        )
    return out


def _perturbed(rng: np.random.Generator, spread: float) -> dict[str, Any]:
    jitter = np.exp(spread * rng.standard_normal(4))
    return {
        "prefactors": tuple(float(a * j) for a, j in zip(NOMINAL["prefactors"], jitter[:3])),
        "activation_energies": NOMINAL["activation_energies"],
        "catalyst_gain": float(NOMINAL["catalyst_gain"] * jitter[3]),
    }


class ReactorRun(Experiment):
    """One batch run of the reactor."""

    temperature_K: float = knob(300.0, 380.0, unit="K", description="jacket temperature")
    time_min: float = knob(1.0, 180.0, unit="min", description="reaction time", log=True)
    feed_conc_mol_L: float = knob(0.1, 2.0, unit="mol/L", description="initial concentration of A")
    catalyst_mol_pct: float = knob(0.0, 5.0, unit="mol%", description="catalyst loading")


class _ReactorBase(Task):
    cost_unit: ClassVar[str] = "h"
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)  # yields, and answer scores
    side_reaction: ClassVar[bool] = True

    def __init__(
        self,
        budget: int | None = None,
        kinetics_spread: float = 0.3,
        noise: float = 1.0,
        device: str | None = None,
    ) -> None:
        super().__init__(budget)
        if kinetics_spread < 0 or noise < 0:
            raise ValueError("kinetics_spread and noise must be non-negative")
        self.kinetics_spread = kinetics_spread
        self.noise = noise
        self.device = torch.device(device) if device else default_device()

    def nominal_conditions(self) -> dict[str, Any]:
        return dict(NOMINAL)

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        return _perturbed(rng, self.kinetics_spread)

    def _measure_batch(
        self,
        runs: list[dict[str, float]],
        conditions: list[dict[str, Any]],
        rngs: list[np.random.Generator],
    ) -> list[Measurement]:
        final, courses = run_reactors(
            np.array([r["temperature_K"] for r in runs]),
            np.array([r["time_min"] for r in runs]),
            np.array([r["feed_conc_mol_L"] for r in runs]),
            np.array([r["catalyst_mol_pct"] for r in runs]),
            conditions,
            side_reaction=self.side_reaction,
            device=self.device,
        )
        return reactor_measurements(
            final,
            courses,
            [r["feed_conc_mol_L"] for r in runs],
            [r["time_min"] for r in runs],
            rngs,
            noise=self.noise,
            simulator="labtwin.simulators.kinetics (RK4, float64)",
            device=self.device,
        )


@register_task
class BatchReactor(_ReactorBase):
    """Maximise the yield of B from a batch reactor within an experiment budget."""

    id = "BatchReactor-v0"
    experiment_model = ReactorRun
    observables = (
        ObservableSpec("yield_B", "", "moles of B per mole of A fed"),
        ObservableSpec("conversion_A", "", "fraction of A consumed"),
        ObservableSpec("conc_A", "mol/L", "unreacted A after the run"),
        ObservableSpec("conc_B", "mol/L", "product B after the run"),
        ObservableSpec("conc_C", "mol/L", "over-reaction product C"),
        ObservableSpec("conc_D", "mol/L", "dimer D from the side reaction 2A -> D"),
    )
    default_budget = 20
    reward_description = (
        "measured yield of B (0..1); a campaign's return is its best measured yield"
    )
    brief = """
You run a batch reactor. Feed A converts to the wanted product B (A -> B, sped
up by a catalyst); B over-reacts to C (B -> C) and two molecules of A can
dimerise to D (2A -> D). For each run choose the jacket temperature, the
reaction time, the feed concentration of A and the catalyst loading. After each
run the HPLC reports the concentrations of A, B, C and D with their
uncertainties, and the yield of B. Find conditions that give the highest yield
of B within the experiment budget. The kinetics of this batch of reagents are
not known in advance.
"""

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        return self._measure_batch([e.model_dump() for e in experiments], conditions, rngs)

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return measurement["yield_B"]


class RateRun(Experiment):
    """A kinetics run: fixed feed (0.5 mol/L), no catalyst, no side reaction."""

    temperature_K: float = knob(300.0, 380.0, unit="K", description="jacket temperature")
    time_min: float = knob(1.0, 180.0, unit="min", description="reaction time", log=True)


class ActivationEnergy(BaseModel):
    activation_energy_kJ_mol: float = Field(
        ge=0.0,
        le=500.0,
        allow_inf_nan=False,
        description="estimated activation energy of A -> B [kJ/mol]",
    )


@register_task
class ArrheniusFit(_ReactorBase):
    """Measure conversions at chosen temperatures and report the activation energy of A -> B."""

    id = "ArrheniusFit-v0"
    experiment_model = RateRun
    answer_model = ActivationEnergy
    side_reaction = False
    observables = (
        ObservableSpec("conc_A", "mol/L", "unreacted A after the run"),
        ObservableSpec("conversion_A", "", "fraction of A consumed"),
    )
    default_budget = 8
    answer_tolerance_kJ_mol: ClassVar[float] = 5.0
    reward_description = (
        "runs score 0; the submitted activation energy scores exp(-|error| / 5 kJ/mol)"
    )
    brief = """
A new reagent converts A -> B by a first-order reaction whose activation
energy lies between 50 and 90 kJ/mol. Each run heats a 0.5 mol/L solution of
A at a temperature of your choice for a time of your choice; the HPLC reports
how much A is left. Use the runs to determine the activation energy of
A -> B and submit it in kJ/mol. The answer scores exp(-|error| / 5 kJ/mol).
"""

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        energy = float(rng.uniform(50.0e3, 90.0e3))
        # choose A1 so that k1(340 K) lies between 0.01 and 0.1 per minute
        k_340 = 10 ** rng.uniform(-2.0, -1.0)
        prefactor = k_340 * math.exp(energy / (GAS_CONSTANT * 340.0))
        return {
            **NOMINAL,
            "prefactors": (prefactor, *NOMINAL["prefactors"][1:]),
            "activation_energies": (energy, *NOMINAL["activation_energies"][1:]),
        }

    def simulate(self, experiments, conditions, rngs):  # noqa: D102
        runs = [
            {**e.model_dump(), "feed_conc_mol_L": 0.5, "catalyst_mol_pct": 0.0} for e in experiments
        ]
        measured = self._measure_batch(runs, conditions, rngs)
        for m in measured:
            m.observables = {
                k: v for k, v in m.observables.items() if k in ("conc_A", "conversion_A")
            }
        return measured

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return 0.0

    def score_answer(self, answer: ActivationEnergy, conditions, history) -> float:
        truth = conditions["activation_energies"][0] / 1e3
        error = abs(answer.activation_energy_kJ_mol - truth)
        return math.exp(-error / self.answer_tolerance_kJ_mol)
