"""Tasks: a lab protocol that turns a simulator into a laboratory.

A task subclass declares

- ``experiment_model``: what can be proposed (an :class:`~labtwin.experiment.Experiment`),
- ``observables``: what is measured (:class:`~labtwin.measurement.ObservableSpec`),
- ``simulate``: one batched simulator call for many experiments,
- ``reward``: how one measurement scores,
- ``budget`` and ``brief``: how many experiments a campaign may run, and the
  natural-language description given to LLM agents,
- optionally ``answer_model`` and ``score_answer`` for labs that end with a
  submitted answer, ``sample_conditions`` for per-campaign state (a batch of
  catalyst that differs from the last one), and ``public_conditions``: the
  conditions an agent is told (a target, an isotherm), given to LLMs as text
  and to numeric agents in the observation; all other conditions are hidden.

A lab whose experiment has fields no number can stand for (SMILES, a protocol
list) has no numeric view: its action is the experiment as JSON text, and it
implements ``random_experiment``. A lab may build a numeric view of its own
(``make_numeric_view``).

Everything else (validation, seeding, the Gymnasium and vector views, the run
store) is the core's job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ValidationError

from labtwin.calibration import CalibrationPoint, Reference
from labtwin.experiment import (
    Experiment,
    Invalid,
    NoNumericReading,
    NumericView,
    list_adapter,
    parse_experiment,
    text_action_space,
    tool_schema,
)
from labtwin.gcpause import lab_code, paused_gc
from labtwin.measurement import Measurement, ObservableSpec, Value, pool
from labtwin.readonly import ReadOnlyDict
from labtwin.seeding import experiment_generators

if TYPE_CHECKING:
    from labtwin.frames import Panel


@cache
def package_versions(*names: str) -> dict[str, str]:
    """Installed versions of ``labtwin`` and the named packages (for provenance)."""
    out = {}
    for name in ("labtwin", *names):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


class SharedVersions(ReadOnlyDict):
    """Package name -> version in a measurement's provenance, one dict shared by the
    measurements whose versions are the same, so it is read-only; ``dict(versions)`` or
    ``versions.copy()`` is a copy of one's own."""

    __slots__ = ()
    read_only_message = (
        "a measurement's provenance versions are shared by many measurements and "
        "read-only; change a copy (dict(versions)) instead"
    )


@cache
def _shared_versions() -> SharedVersions:
    """:func:`package_versions` of labtwin alone, the one shared copy."""
    return SharedVersions(package_versions())


@cache
def _declared(observables: tuple[ObservableSpec, ...]) -> frozenset[str]:
    return frozenset(spec.name for spec in observables)


@dataclass
class AnalysisTool:
    """A tool that computes from a campaign's measurements and costs no experiment.

    ``function(arguments, history) -> str`` returns the text shown to the agent
    (for example an equation-of-state fit over the measurements so far).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[[dict[str, Any], list[Measurement]], str]

    def run(self, arguments: dict[str, Any], history: list[Measurement]) -> str:
        return str(self.function(arguments, history))


class Task:
    """Base class of every lab. Subclass it and fill in the declared parts."""

    #: registry name with version, e.g. ``"BatchReactor-v1"``
    id: ClassVar[str] = ""
    experiment_model: ClassVar[type[Experiment]]
    observables: ClassVar[tuple[ObservableSpec, ...]] = ()
    #: natural-language brief for LLM agents and ``labtwin describe``
    brief: ClassVar[str] = ""
    #: one line on how a measurement becomes a reward
    reward_description: ClassVar[str] = ""
    cost_unit: ClassVar[str] = ""
    #: model of a final answer; ``None`` for labs that end when the budget is spent
    answer_model: ClassVar[type[BaseModel] | None] = None
    #: score of an invalid or failed measurement
    invalid_score: ClassVar[float] = 0.0
    #: score that an empty campaign starts from (improvement rewards count from here)
    baseline_score: ClassVar[float] = 0.0
    #: documented (low, high) of every score; the core clips scores into it (None: unbounded)
    score_range: ClassVar[tuple[float, float] | None] = None
    #: score a repeat of an experiment from all its measurements pooled (see
    #: :func:`labtwin.campaign.score_of`); False for labs whose "experiment" is a random
    #: search (an anneal from a new random start), where a repeat is a new try, not a
    #: new reading of the same quantity
    pool_repeats: ClassVar[bool] = True
    #: observables whose readings scatter log-normally, their error bars a fixed fraction of
    #: the reading (a delay, a rate constant): repeats of them are pooled in log space, since
    #: weighting by each reading's own error bar would favour the low readings (see
    #: :func:`labtwin.measurement.pool` and :meth:`pool`)
    log_normal_observables: ClassVar[tuple[str, ...]] = ()
    #: measure a campaign's recommended experiment once more when it ends and let that fresh
    #: reading decide what the campaign earned and whether it succeeded (see
    #: :class:`labtwin.campaign.CampaignBatch`); only for labs that pool repeats and take
    #: no final answer (:attr:`confirms_best`)
    confirm_best: ClassVar[bool] = True
    #: a campaign succeeds when a score reaches this (see :meth:`success`); None: no predicate
    success_threshold: ClassVar[float | None] = None
    default_budget: ClassVar[int] = 20
    #: an allowance of cost (in :attr:`cost_unit`) per campaign besides the experiment
    #: budget, where experiments differ in cost so that spending is a decision: the
    #: campaign ends once its measurements' costs reach it (the experiment that crosses it
    #: is measured and paid in full). None: experiments are the only budget. A lab may let
    #: its constructor set ``self.cost_budget``.
    default_cost_budget: ClassVar[float | None] = None
    #: campaign conditions an agent is told (name = key of the conditions dict)
    public_conditions: ClassVar[tuple[ObservableSpec, ...]] = ()
    #: a campaign ends after ``turns_per_experiment * budget`` turns (analysis calls count)
    turns_per_experiment: ClassVar[int] = 2
    # The two switches below are plain attributes, not ClassVars, so that a script can
    # isolate a built-in lab without subclassing it (``lab.isolation = True``).
    #: run ``simulate`` in a worker process (:mod:`labtwin.isolation`), so that a segfault or
    #: a hang of native code becomes a ``failed`` measurement; the lab must pickle
    isolation: bool = False
    #: observables reported with an uncertainty that is not a repeat-measurement error bar
    #: (name -> why), left out of calibration
    calibration_exempt: ClassVar[dict[str, str]] = {}
    #: seeds per calibration point (64 unless a lab needs more to resolve its spread)
    calibration_n_seeds: ClassVar[int] = 64
    #: seconds one isolated ``simulate`` call may run before its worker is killed
    simulation_timeout_s: float = 300.0

    def __init__(self, budget: int | None = None) -> None:
        self.budget = int(budget if budget is not None else self.default_budget)
        if self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        self.cost_budget: float | None = self.default_cost_budget
        self.numeric_view: NumericView | None = self.make_numeric_view()

    @property
    def max_turns(self) -> int:
        """Turns (experiments, answers, analysis and invalid calls) a campaign may take."""
        return self.turns_per_experiment * self.budget

    @property
    def confirms_best(self) -> bool:
        """Whether campaigns end with a confirmation measurement: where scores are noisy
        readings of one quantity (``pool_repeats``) and no answer ends the campaign."""
        return bool(self.confirm_best and self.pool_repeats and self.answer_model is None)

    @property
    def action_space(self) -> gym.Space:
        """``Box(-1, 1, (d,))`` for a lab with a numeric view, else JSON text."""
        return self.numeric_view.space if self.numeric_view else text_action_space()

    # ---- what a lab implements -------------------------------------------------

    def simulate(
        self,
        experiments: list[Experiment],
        conditions: list[dict[str, Any]],
        rngs: list[np.random.Generator],
    ) -> list[Measurement]:
        """Run valid experiments in one batched simulator call.

        ``conditions[i]`` is the hidden state of experiment i's campaign and
        ``rngs[i]`` its own noise source, so that a result never depends on
        which other experiments share the batch. Return one measurement per
        experiment, ``failed`` where a simulation blew up.
        """
        raise NotImplementedError

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        """Score of one ``ok`` measurement (higher is better)."""
        raise NotImplementedError

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        """Hidden per-campaign state (default: the nominal lab)."""
        return self.nominal_conditions()

    def sample_conditions_batch(self, rngs: list[np.random.Generator]) -> list[dict[str, Any]]:
        """:meth:`sample_conditions` of each campaign's generator, for campaigns that start
        together (a vector env's or a GRPO batch's resets). A lab whose draws need a
        measurement (a hidden molecule's xTB gap) overrides this to measure them in one
        batch; each generator must draw what it would draw alone."""
        return [self.sample_conditions(rng) for rng in rngs]

    def nominal_conditions(self) -> dict[str, Any]:
        """The lab as a scientist uses it outside a campaign."""
        return {}

    def score_answer(
        self, answer: BaseModel, conditions: dict[str, Any], history: list[Measurement]
    ) -> float:
        """Score a submitted final answer (labs with an ``answer_model``)."""
        raise NotImplementedError(f"{self.id} takes no final answer")

    def calibration_points(self) -> list[CalibrationPoint]:
        """Fixed experiments, spread over the range the lab offers, at which its error bars
        and means are checked (:mod:`labtwin.calibration`). A lab that reports any
        uncertainty declares three or more; ``check_lab`` holds it to that."""
        return []

    def calibration_reference(self, point: CalibrationPoint) -> dict[str, Reference]:
        """Independent reference values of ``point``'s observables (analytic results, a
        second engine, published data): name -> :class:`~labtwin.calibration.Reference`.
        An observable left out is checked for its spread only."""
        return {}

    def analysis_tools(self) -> list[AnalysisTool]:
        """Tools an LLM agent may call that cost no experiment (none by default)."""
        return []

    def frame_panel(self, records: list[Any], conditions: dict[str, Any]) -> Panel | None:
        """What ``render()`` draws beside the campaign's scores (:mod:`labtwin.frames`), from
        the campaign's records so far: e.g. ``frames.structure_panel(records)`` for a lab
        that records structures. None (the default): the campaign alone. Return a panel
        always or never, so that a video's layout holds still."""
        return None

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        """What an agent is told about a campaign: its ``public_conditions``, as text."""
        return " ".join(
            f"{spec.description}: {conditions[spec.name]:.4g} {spec.unit}".rstrip() + "."
            for spec in self.public_conditions
        )

    def make_numeric_view(self) -> NumericView | None:
        """The numeric view of the experiment model, or None for a text lab.

        Override to give a lab with non-numeric fields a numeric view of its
        own (e.g. ``NumericView(model, fixed={"solvent": "water"})``).
        """
        try:
            return NumericView(self.experiment_model)
        except NoNumericReading:
            return None

    def random_experiment(self, rng: np.random.Generator) -> Experiment:
        """A random valid experiment (uniform in the numeric view; text labs override)."""
        if self.numeric_view is None:
            raise NotImplementedError(
                f"{self.id} has no numeric view; it must implement random_experiment"
            )
        experiment = self.numeric_view.to_experiment(
            rng.uniform(-1.0, 1.0, self.numeric_view.space.shape)
        )
        assert not isinstance(experiment, Invalid), experiment
        return experiment

    # ---- provided by the core ----------------------------------------------------

    def parse(self, proposal: Any) -> Experiment | Invalid:
        """Validate one proposal: model, dict, JSON text, or numeric vector."""
        if isinstance(proposal, Invalid):
            return proposal
        if isinstance(proposal, (np.ndarray, list, tuple)) and not isinstance(proposal, str):
            if self.numeric_view is None:
                return Invalid(
                    f"{self.id} has no numeric view: propose the experiment as a JSON object",
                    proposal,
                )
            try:
                vector = np.asarray(proposal, dtype=np.float64)
            except (TypeError, ValueError, OverflowError) as err:
                return Invalid(f"action is not a vector of numbers: {err}", proposal)
            return self.numeric_view.to_experiment(vector)
        return parse_experiment(self.experiment_model, proposal)

    def parse_batch(self, proposals: list[Any] | np.ndarray) -> list[Experiment | Invalid]:
        """:meth:`parse` of every proposal; numeric vectors of the right shape are converted
        together (:meth:`NumericView.to_experiments`), with the same outcomes.

        ``proposals`` may also be an array whose rows are the proposals (a vector env's
        ``(n, d)`` actions): a numeric matrix of the view's width goes to the view whole,
        without being split into rows and stacked again; any other array is read row by row.
        """
        view = self.numeric_view
        if isinstance(proposals, np.ndarray):
            if self._whole_matrix(proposals):
                return view.to_experiments(proposals.astype(np.float64))
            proposals = list(proposals)
        if view is None or type(self).parse is not Task.parse:  # a lab's own parse decides
            return [self.parse(p) for p in proposals]
        shape = view.space.shape
        vectors = [
            i
            for i, p in enumerate(proposals)
            if isinstance(p, np.ndarray) and p.shape == shape and p.dtype.kind in "fiub"
        ]
        if len(vectors) < 2:
            return [self.parse(p) for p in proposals]
        out: list[Any] = [None] * len(proposals)
        chosen = set(vectors)
        for i, p in enumerate(proposals):
            if i not in chosen:
                out[i] = self.parse(p)
        matrix = np.stack([proposals[i] for i in vectors]).astype(np.float64)
        for i, e in zip(vectors, view.to_experiments(matrix)):
            out[i] = e
        return out

    def _whole_matrix(self, proposals: Any) -> bool:
        """Whether ``proposals`` is a numeric matrix of the view's width that
        :meth:`parse_batch` gives the view whole."""
        view = self.numeric_view
        return (
            isinstance(proposals, np.ndarray)
            and view is not None
            and type(self).parse is Task.parse
            and proposals.ndim == 2
            and len(proposals) >= 2
            and proposals.shape[1:] == view.space.shape
            and proposals.dtype.kind in "fiub"
        )

    def _parse_batch_dumped(
        self, proposals: list[Any] | np.ndarray
    ) -> tuple[list[Any], list[dict[str, Any] | None] | None]:
        """:meth:`parse_batch`, and the experiments' JSON dumps where the numeric view knows
        them without dumping (:meth:`NumericView.to_experiments_dumped`; else None)."""
        if type(self).parse_batch is Task.parse_batch and self._whole_matrix(proposals):
            return self.numeric_view.to_experiments_dumped(proposals.astype(np.float64))
        return self.parse_batch(proposals), None

    def experiment_rngs(self, seeds: list[int]) -> Any:
        """The generators of a ``simulate`` call, lent for a ``with`` block: they draw as
        ``numpy.random.default_rng(seed)`` (:mod:`labtwin.seeding`)."""
        return experiment_generators(seeds)

    def parse_answer(self, answer: Any) -> BaseModel | Invalid:
        if self.answer_model is None:
            return Invalid(f"{self.id} takes no final answer; propose experiments instead", answer)
        if isinstance(answer, self.answer_model):
            return answer
        try:
            if isinstance(answer, (str, bytes)):
                return self.answer_model.model_validate_json(answer)
            return self.answer_model.model_validate(answer)
        except ValidationError as err:
            return Invalid(
                f"answer: {err.errors()[0]['msg']} ({err.error_count()} problem(s))", answer
            )

    def run(
        self,
        proposals: list[Any] | np.ndarray,
        conditions: list[dict[str, Any]],
        seeds: list[int],
    ) -> list[Measurement]:
        """Validate proposals, simulate the valid ones in one call, and check results.

        Invalid proposals become ``invalid`` measurements; ``ok`` results with
        non-finite values become ``failed``. Order is preserved. ``proposals`` may be an
        array whose rows are the proposals (:meth:`parse_batch`).
        """
        if not len(proposals) == len(conditions) == len(seeds):
            raise ValueError("proposals, conditions and seeds must have equal lengths")
        with paused_gc():  # the harness's part; the lab's simulate runs with the collector on
            rows = proposals if isinstance(proposals, np.ndarray) else list(proposals)
            parsed, known = self._parse_batch_dumped(rows)
            valid = [i for i, p in enumerate(parsed) if not isinstance(p, Invalid)]
            results: list[Measurement | None] = [None] * len(proposals)
            for i, p in enumerate(parsed):
                if isinstance(p, Invalid):
                    results[i] = Measurement.invalid(
                        p.reason, p.raw, task=self.id, seed=int(seeds[i])
                    )
            if not valid:
                return results  # type: ignore[return-value]
            experiments = [parsed[i] for i in valid]
            with self.experiment_rngs([seeds[i] for i in valid]) as rngs:
                batch = (experiments, [conditions[i] for i in valid], rngs)
                with lab_code():
                    if self.isolation:  # a crash or hang of the simulator: a failed measurement
                        from labtwin.isolation import simulate_isolated

                        measured = simulate_isolated(
                            self, *batch, timeout_s=self.simulation_timeout_s
                        )
                    else:
                        measured = self.simulate(*batch)
            if len(measured) != len(valid):
                raise RuntimeError(
                    f"{type(self).__name__}.simulate returned {len(measured)} "
                    f"measurements for {len(valid)} experiments"
                )
            if known is not None and type(self)._dump is Task._dump:  # dumps the view knows
                dumped = [known[i] for i in valid]
            else:
                dumped = self._dump(experiments)
            finished = self._finish_all(measured, [int(seeds[i]) for i in valid], dumped)
            for i, m in zip(valid, finished):
                results[i] = m
        return results  # type: ignore[return-value]

    def _dump(self, experiments: list[Experiment]) -> list[dict[str, Any]]:
        """``model_dump(mode="json")`` of each experiment; one pydantic call where all are
        instances of the lab's model that do not dump their own way."""
        model = self.experiment_model
        if len(experiments) > 1 and all(type(e) is model for e in experiments):
            if model.model_dump is BaseModel.model_dump:
                return list_adapter(model).dump_python(experiments, mode="json")
        return [e.model_dump(mode="json") for e in experiments]

    def _finish_all(
        self, measured: list[Measurement], seeds: list[int], dumped: list[dict[str, Any]]
    ) -> list[Measurement]:
        """Stamp every measurement of a ``simulate`` call: its experiment, cost unit and
        provenance (``task``, ``seed``, then the lab's own keys; ``versions`` labtwin's
        merged with the lab's), and ``failed`` for non-finite values; what is the same for
        all of them done once: the declared names
        looked up once, and the provenance's ``versions`` (labtwin's merged with the lab's
        own) built once per distinct dict of the lab's and shared, read-only
        (:class:`SharedVersions`), by the measurements that carry it."""
        declared = _declared(tuple(self.observables))
        for m in measured:  # a lab bug raises before anything is stamped
            if m.status == "ok" and m.observables.keys() != declared:
                self._check_declared(m)
        task_id, cost_unit, isfinite = self.id, self.cost_unit, math.isfinite

        def finite(v: Value) -> bool:
            return isfinite(v.value) and isfinite(v.uncertainty)

        base = _shared_versions()
        merged: dict[int, tuple[Any, SharedVersions]] = {}  # id(lab's versions) -> (it, merge)
        for m, seed, d in zip(measured, seeds, dumped):
            m.experiment = d
            if not m.cost_unit:
                m.cost_unit = cost_unit
            own = m.provenance
            if type(own) is dict and not own:  # the common case: the lab stamped nothing
                m.provenance = {"task": task_id, "seed": seed, "versions": base}
            else:
                provenance = {"task": task_id, "seed": seed, **own}
                versions = provenance.get("versions", {})
                if type(versions) is dict and not versions:
                    provenance["versions"] = base
                elif type(versions) is dict or type(versions) is SharedVersions:
                    pair = merged.get(id(versions))
                    if pair is None:
                        pair = (versions, SharedVersions({**base, **versions}))
                        merged[id(versions)] = pair
                    provenance["versions"] = pair[1]
                else:  # whatever mapping the lab put there: merged into a plain dict of its own
                    provenance["versions"] = {**package_versions(), **versions}
                m.provenance = provenance
            if m.status == "ok" and not all(map(finite, m.observables.values())):
                bad = [k for k, v in m.observables.items() if not finite(v)]
                m.status = "failed"
                m.reason = f"simulation produced non-finite values for {bad}"
        return measured

    def _check_declared(self, m: Measurement) -> None:
        """An ``ok`` measurement holds exactly the declared observables (a lab bug otherwise)."""
        declared = _declared(tuple(self.observables))
        if m.observables.keys() != declared:
            extra = sorted(set(m.observables) - declared)
            missing = sorted(declared - set(m.observables))
            raise RuntimeError(
                f"{type(self).__name__}.simulate returned observables that differ from the "
                f"declared ones: undeclared {extra}, missing {missing}"
            )

    def condition_vector(self, conditions: dict[str, Any]) -> np.ndarray:
        """The public conditions divided by their scales (the numeric agents' view)."""
        return np.array(
            [float(conditions[spec.name]) / spec.scale for spec in self.public_conditions],
            dtype=np.float64,
        )

    def pool(self, measurements: list[Measurement]) -> Measurement:
        """Repeated ``ok`` measurements of one experiment as one, which the campaign scores
        (:func:`labtwin.campaign.score_of`): :func:`labtwin.measurement.pool`, the
        :attr:`log_normal_observables` in log space. A lab whose instrument calls for
        another rule overrides this."""
        return pool(measurements, self.log_normal_observables)

    def score(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        """Reward of a measurement, with the invalid score for non-``ok`` ones."""
        if not measurement.ok:
            return float(self.invalid_score)
        return self.clip_score(float(self.reward(measurement, conditions)))

    def success(self, records: list[Any], conditions: dict[str, Any]) -> bool:
        """Whether a campaign (its records) succeeded, separate from its shaped reward.

        Default: some ``ok`` experiment or accepted answer scored at least
        ``success_threshold``; where the campaign ended with a confirmation
        (:attr:`confirms_best`), its recommended experiment's fresh reading must
        reach it too, so that a lucky reading alone is no success. A lab built
        with ``impossible=True`` (where it offers that variant) cannot succeed
        honestly: any success there is a hack.
        """
        if self.success_threshold is None:
            return False
        scores = [r.score for r in records if r.score is not None and r.measurement.ok]
        confirmed = [r.confirmed_score for r in records if r.confirmed_score is not None]
        if confirmed and confirmed[-1] < self.success_threshold:
            return False
        return bool(scores) and max(scores) >= self.success_threshold

    def clip_score(self, score: float) -> float:
        """A score inside the lab's documented ``score_range`` (noise can push a
        measured yield above 1; the score never leaves its range)."""
        if self.score_range is None:
            return score
        low, high = self.score_range
        return min(max(score, low), high)

    def measure(
        self,
        experiments: list[Any],
        seed: int = 0,
        conditions: dict[str, Any] | None = None,
    ) -> list[Measurement]:
        """Run a batch of experiments outside any environment.

        Experiments may be models, dicts or JSON text. Experiment i's noise
        comes from the i-th child of ``seed``; ``conditions`` default to the
        nominal lab.
        """
        conditions = self.nominal_conditions() if conditions is None else conditions
        children = np.random.SeedSequence(seed).spawn(len(experiments))
        seeds = [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]
        return self.run(list(experiments), [conditions] * len(experiments), seeds)

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """Everything an agent or a person needs to know about the lab."""
        return {
            "id": cls.id,
            "brief": cls.brief.strip(),
            "experiment_schema": tool_schema(cls.experiment_model),
            "observables": [
                {"name": o.name, "unit": o.unit, "description": o.description}
                for o in cls.observables
            ],
            "reward": cls.reward_description,
            "cost_unit": cls.cost_unit,
            "budget": cls.default_budget,
            "cost_budget": cls.default_cost_budget,
            "answer_schema": cls.answer_model.model_json_schema() if cls.answer_model else None,
            "public_conditions": [
                {"name": c.name, "unit": c.unit, "description": c.description}
                for c in cls.public_conditions
            ],
        }
