"""Tasks: a lab protocol that turns a simulator into a laboratory.

A task subclass declares

- ``experiment_model``: what can be proposed (an :class:`~labtwin.experiment.Experiment`),
- ``observables``: what is measured (:class:`~labtwin.measurement.ObservableSpec`),
- ``simulate``: one batched simulator call for many experiments,
- ``reward``: how one measurement scores,
- ``budget`` and ``brief``: how many experiments a campaign may run, and the
  natural-language description given to LLM agents,
- optionally ``answer_model`` and ``score_answer`` for labs that end with a
  submitted answer, and ``sample_conditions`` for hidden per-campaign state
  (a batch of catalyst that differs from the last one).

Everything else (validation, seeding, the Gymnasium and vector views, the run
store) is the core's job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ValidationError

from labtwin.experiment import Experiment, Invalid, NumericView, parse_experiment, tool_schema
from labtwin.measurement import Measurement, ObservableSpec


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

    #: registry name with version, e.g. ``"BatchReactor-v0"``
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
    default_budget: ClassVar[int] = 20

    def __init__(self, budget: int | None = None) -> None:
        self.budget = int(budget if budget is not None else self.default_budget)
        if self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        self.numeric_view = NumericView(self.experiment_model)

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

    def nominal_conditions(self) -> dict[str, Any]:
        """The lab as a scientist uses it outside a campaign."""
        return {}

    def score_answer(
        self, answer: BaseModel, conditions: dict[str, Any], history: list[Measurement]
    ) -> float:
        """Score a submitted final answer (labs with an ``answer_model``)."""
        raise NotImplementedError(f"{self.id} takes no final answer")

    def analysis_tools(self) -> list[AnalysisTool]:
        """Tools an LLM agent may call that cost no experiment (none by default)."""
        return []

    def describe_conditions(self, conditions: dict[str, Any]) -> str:
        """What may be told about a campaign's conditions (nothing by default)."""
        return ""

    # ---- provided by the core ----------------------------------------------------

    def parse(self, proposal: Any) -> Experiment | Invalid:
        """Validate one proposal: model, dict, JSON text, or numeric vector."""
        if isinstance(proposal, Invalid):
            return proposal
        if isinstance(proposal, (np.ndarray, list, tuple)) and not isinstance(proposal, str):
            return self.numeric_view.to_experiment(np.asarray(proposal, dtype=np.float64))
        return parse_experiment(self.experiment_model, proposal)

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
        proposals: list[Any],
        conditions: list[dict[str, Any]],
        seeds: list[int],
    ) -> list[Measurement]:
        """Validate proposals, simulate the valid ones in one call, and check results.

        Invalid proposals become ``invalid`` measurements; ``ok`` results with
        non-finite values become ``failed``. Order is preserved.
        """
        if not len(proposals) == len(conditions) == len(seeds):
            raise ValueError("proposals, conditions and seeds must have equal lengths")
        parsed = [self.parse(p) for p in proposals]
        valid = [i for i, p in enumerate(parsed) if not isinstance(p, Invalid)]
        results: list[Measurement | None] = [None] * len(proposals)
        for i, p in enumerate(parsed):
            if isinstance(p, Invalid):
                results[i] = Measurement.invalid(p.reason, p.raw, task=self.id, seed=int(seeds[i]))
        if valid:
            measured = self.simulate(
                [parsed[i] for i in valid],
                [conditions[i] for i in valid],
                [np.random.default_rng(seeds[i]) for i in valid],
            )
            if len(measured) != len(valid):
                raise RuntimeError(
                    f"{type(self).__name__}.simulate returned {len(measured)} "
                    f"measurements for {len(valid)} experiments"
                )
            for i, m in zip(valid, measured):
                results[i] = self._finish(m, parsed[i], int(seeds[i]))
        return results  # type: ignore[return-value]

    def _finish(self, m: Measurement, experiment: Experiment, seed: int) -> Measurement:
        m.experiment = experiment.model_dump()
        m.cost_unit = m.cost_unit or self.cost_unit
        m.provenance = {"task": self.id, "seed": seed, **m.provenance}
        m.provenance["versions"] = {**package_versions(), **m.provenance.get("versions", {})}
        if m.ok:
            bad = [
                k
                for k, v in m.observables.items()
                if not (math.isfinite(v.value) and math.isfinite(v.uncertainty))
            ]
            if bad:
                m.status, m.reason = "failed", f"simulation produced non-finite values for {bad}"
        return m

    def score(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        """Reward of a measurement, with the invalid score for non-``ok`` ones."""
        if not measurement.ok:
            return float(self.invalid_score)
        return float(self.reward(measurement, conditions))

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
            "answer_schema": cls.answer_model.model_json_schema() if cls.answer_model else None,
        }
