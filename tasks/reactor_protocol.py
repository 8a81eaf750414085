"""A batch reactor run by a temperature programme: a protocol list instead of one temperature.

The chemistry is that of :mod:`labtwin.tasks.reactor` (A -> B wanted, B -> C
over-reaction, 2A -> D dimerisation; each campaign draws its own reagents).
An experiment sets the feed concentration and catalyst loading and a
programme of 1 to 4 stages, each a jacket temperature held for a time. The
reactor runs the stages one after the other, without work-up in between.

The science question: A -> B has the lower activation energy (60 kJ/mol
against 80 kJ/mol for B -> C), so B's selectivity falls as the reactor heats
while its formation speeds up. Hot early, while A is plentiful, and cooler
late, when B is at risk, can give more B in the same time than any single
temperature.

The experiment has no numeric (``Box``) reading, since its length varies; the
Gymnasium view takes it as JSON text. Each run costs its total reaction time
plus the work-up, in hours; the score is the measured yield of B (repeats of
one programme scored from their pooled readings), and a campaign succeeds at
a yield of 0.85, as BatchReactor's. ``impossible=True`` gives the sluggish
reagents of :func:`~labtwin.tasks.reactor.sluggish`, checked against the
longest programme (four stages of 120 min): no programme reaches 26 % yield.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from pydantic import Field

from labtwin import Experiment, Measurement, knob, register_task
from labtwin.calibration import CalibrationPoint, Reference
from labtwin.experiment import field_bounds
from labtwin.simulators.kinetics import default_device, integrate_stages
from labtwin.tasks.reactor import (
    CALIBRATION_TEXT,
    INTEGRATOR,
    NETWORK,
    NOMINAL,
    SUCCESS_YIELD,
    WORKUP_MIN,
    BatchReactor,
    _ReactorBase,
    calibration_point,
    rate_constants,
    reactor_measurements,
    reference_concentrations,
    reference_observables,
)

MIN_STAGES, MAX_STAGES = 1, 4
STAGE_TEMPERATURE_K = _T_LOW, _T_HIGH = (300.0, 380.0)  # jacket range of one stage
STAGE_TIME_MIN = _TIME_LOW, _TIME_HIGH = (1.0, 120.0)  # duration range of one stage
SAMPLES_PER_STAGE = 41  # time-course points per stage, as a BatchReactor run records


class Stage(Experiment):
    """One stage of a temperature programme: hold the jacket at a temperature for a time."""

    temperature_K: float = knob(*STAGE_TEMPERATURE_K, unit="K", description="jacket temperature")
    time_min: float = knob(
        *STAGE_TIME_MIN, unit="min", description="duration of the stage", log=True
    )


class TemperatureProgramme(Experiment):
    """One batch run: feed, catalyst, and the temperature stages run in order."""

    feed_conc_mol_L: float = knob(0.1, 2.0, unit="mol/L", description="initial concentration of A")
    catalyst_mol_pct: float = knob(0.0, 5.0, unit="mol%", description="catalyst loading")
    steps: list[Stage] = Field(
        min_length=MIN_STAGES,
        max_length=MAX_STAGES,
        description=(
            f"the temperature programme: {MIN_STAGES} to {MAX_STAGES} stages run one after "
            "the other, each with temperature_K and time_min"
        ),
    )


def _random_knob(model: type[Experiment], name: str, rng: np.random.Generator) -> float:
    """A value drawn uniformly (log-uniformly for log knobs) within a knob's bounds."""
    field = model.model_fields[name]
    low, high = field_bounds(field)  # type: ignore[misc]
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if extra.get("scale") == "log":
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return float(rng.uniform(low, high))


def run_programmes(
    programmes: list[TemperatureProgramme],
    conditions: list[dict[str, Any]],
    device: torch.device | None = None,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Noise-free runs of N temperature programmes in one staged integration.

    Stage s of every programme is one adaptive integration (as a
    :func:`~labtwin.tasks.reactor.run_reactors` run); shorter programmes get
    zero-length stages. Returns final concentrations ``(N, 4)`` of A, B, C, D
    in mol/L and each programme's time course, ``(1 + (SAMPLES_PER_STAGE - 1) *
    n_stages, 5)`` with columns t [min], A, B, C, D (the stages joined end to end).
    """
    device = device or default_device()
    f64 = dict(dtype=torch.float64, device=device)
    n_stages = max(len(p.steps) for p in programmes)
    # missing stages last zero minutes, at the last real temperature (any value would do)
    pad = [n_stages - len(p.steps) for p in programmes]
    temperature = torch.tensor(
        [[s.temperature_K for s in p.steps] + [p.steps[-1].temperature_K] * n
         for p, n in zip(programmes, pad)],
        **f64,
    )  # fmt: skip
    durations = torch.tensor(
        [[s.time_min for s in p.steps] + [0.0] * n for p, n in zip(programmes, pad)], **f64
    )
    loading = [p.catalyst_mol_pct for p in programmes]
    # k (N, n_stages, 3), the rate law of run_reactors at each stage's temperature
    k = rate_constants(conditions, temperature, loading, side_reaction=True, device=device)
    c0 = torch.zeros(len(programmes), len(NETWORK.species), **f64)
    c0[:, 0] = torch.tensor([p.feed_conc_mol_L for p in programmes], **f64)
    course = integrate_stages(NETWORK, c0, k, durations, n_samples=SAMPLES_PER_STAGE)
    table = torch.cat([course.times.unsqueeze(2), course.concentrations], dim=2).cpu().numpy()
    rows = [1 + (SAMPLES_PER_STAGE - 1) * len(p.steps) for p in programmes]
    courses = [table[i, :n].copy() for i, n in enumerate(rows)]
    return course.final.cpu().numpy(), courses


@register_task
class ReactorProtocol(_ReactorBase):
    """Maximise the yield of B from a batch reactor run by a temperature programme.

    Success: a measured yield of at least 0.85 (``success_threshold``, the batch
    reactor's). Random search (the lab's random programmes, 12 per campaign)
    reaches it in 31 % of 64 campaigns; the nominal lab's best one-stage run
    (313 K for 120 min, 0.1 mol/L, 5 mol%) followed by a local search, in all
    16 campaigns of the red-team test. ``impossible=True``: no programme can
    exceed a true yield of 0.26; the best found is below 0.01.

    Error bars are calibrated where a species' true concentration is 6.4 mmol/L or
    more; below that readings are clipped at zero, biased high and scatter less than
    their error bar (:mod:`labtwin.tasks.reactor`).
    """

    id = "ReactorProtocol-v1"
    experiment_model = TemperatureProgramme
    observables = BatchReactor.observables
    default_budget = 12
    success_threshold = SUCCESS_YIELD
    reward_description = BatchReactor.reward_description
    brief = f"""
You run a batch reactor. Feed A converts to the wanted product B (A -> B, sped
up by a catalyst); B over-reacts to C (B -> C) and two molecules of A can
dimerise to D (2A -> D). For each run choose the feed concentration of A, the
catalyst loading and a temperature programme: a list of {MIN_STAGES} to {MAX_STAGES} stages,
run one after the other, each holding the jacket at a temperature
({_T_LOW:g}-{_T_HIGH:g} K) for a time ({_TIME_LOW:g}-{_TIME_HIGH:g} min). After each run the HPLC
reports the concentrations of A, B, C and D with their uncertainties (its
calibration: {CALIBRATION_TEXT}), and the yield of B. A run
costs its total reaction time plus {WORKUP_MIN:g} min of work-up. Find the programme
that gives the highest yield of B within the experiment budget, and whether
changing the temperature during a run beats holding it constant; a yield of
{SUCCESS_YIELD:g} or more counts as a success. Repeating a programme exactly scores the
pooled mean of its readings. The kinetics of this batch of reagents are not
known in advance.
"""

    def box_extremes(self) -> tuple[float, float, float]:
        """Hottest stage (K), highest loading (mol%) and longest programme (all stages, min)."""
        loading = field_bounds(TemperatureProgramme.model_fields["catalyst_mol_pct"])[1]
        return _T_HIGH, loading, MAX_STAGES * _TIME_HIGH

    def random_experiment(self, rng: np.random.Generator) -> TemperatureProgramme:
        """A valid programme: 1-4 stages, every knob uniform (log-uniform for times) in bounds."""
        n_stages = int(rng.integers(MIN_STAGES, MAX_STAGES + 1))
        steps = [
            Stage(**{name: _random_knob(Stage, name, rng) for name in Stage.model_fields})
            for _ in range(n_stages)
        ]
        knobs = {
            name: _random_knob(TemperatureProgramme, name, rng)
            for name in ("feed_conc_mol_L", "catalyst_mol_pct")
        }
        return TemperatureProgramme(**knobs, steps=steps)

    def simulate(self, experiments, conditions, rngs):  # noqa: D102 (documented on Task)
        final, courses = run_programmes(experiments, conditions, device=self.device)
        return reactor_measurements(
            final,
            courses,
            [p.feed_conc_mol_L for p in experiments],
            [sum(stage.time_min for stage in p.steps) for p in experiments],
            rngs,
            noise=self.noise,
            simulator=f"labtwin.simulators.kinetics (staged, {INTEGRATOR})",
            device=self.device,
        )

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return measurement["yield_B"]

    def calibration_points(self) -> list[CalibrationPoint]:
        """Six programmes of the nominal reagents, of one to four stages, rising, falling
        and see-saw, over 300-380 K, 1-120 min a stage, 0.1-2 mol/L and 0-5 mol%; a species
        named below range reads under 6.4 mmol/L there
        (:data:`~labtwin.tasks.reactor.CALIBRATED_FROM_MOL_L`) and is not checked."""
        names = [spec.name for spec in self.observables]

        def point(
            label: str,
            feed: float,
            loading: float,
            stages: list[tuple[float, float]],
            below: str = "",
        ) -> CalibrationPoint:
            steps = [{"temperature_K": t, "time_min": m} for t, m in stages]
            experiment = {"feed_conc_mol_L": feed, "catalyst_mol_pct": loading, "steps": steps}
            return calibration_point(label, experiment, names, below, dict(NOMINAL))

        return [
            point("one stage, dilute: best one-stage run", 0.1, 5, [(313, 120)], "ACD"),
            point("hot, then cool", 1.0, 2, [(370, 5), (330, 60)], "A"),
            point(
                "four-stage ramp up, concentrated",
                2.0,
                0,
                [(300, 30), (320, 20), (340, 10), (360, 5)],
            ),
            point("cool, then hot", 0.5, 1, [(310, 60), (360, 10)]),
            point("see-saw of 1-min stages", 0.3, 0, [(380, 1), (300, 1), (380, 1)]),
            point("longest, hottest: 4 x 120 min at 380 K", 2.0, 5, [(380, 120)] * 4, "AB"),
        ]

    def calibration_reference(self, point: CalibrationPoint) -> dict[str, Reference]:
        """The programme integrated stage by stage by scipy's LSODA
        (:func:`~labtwin.tasks.reactor.reference_concentrations`)."""
        programme = TemperatureProgramme.model_validate(point.experiment)
        conditions = self.nominal_conditions() if point.conditions is None else point.conditions
        final = reference_concentrations(
            conditions,
            [stage.temperature_K for stage in programme.steps],
            [stage.time_min for stage in programme.steps],
            programme.feed_conc_mol_L,
            programme.catalyst_mol_pct,
        )
        return reference_observables(final, programme.feed_conc_mol_L)
