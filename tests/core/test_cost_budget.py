"""A cost budget beside the experiment budget: where experiments differ in cost, a
campaign ends once its measurements' costs reach the lab's allowance, and every view
shows what is left of it."""

from __future__ import annotations

import json
from typing import ClassVar, Literal

import numpy as np
import pytest
from pydantic import Field

from labtwin import Experiment, Measurement, ObservableSpec, Task, Value
from labtwin.campaign import CampaignBatch, observation, observation_space
from labtwin.env import LabEnv
from labtwin.testing import check_lab
from labtwin.tools import ChatLabEnv
from labtwin.vector import VectorLabEnv

COSTS = {"survey": 1.0, "assay": 5.0}


class Probe(Experiment):
    x: float = Field(ge=-1.0, le=1.0, description="where to probe")
    kind: Literal["survey", "assay"] = Field("survey", description="survey: cheap; assay: costly")


class ProbeLab(Task):
    """A lab of a third party with a cheap and a costly kind of experiment: the assay reads
    the true value, the survey a coarse one."""

    id = "Probe-v0"
    experiment_model = Probe
    observables = (ObservableSpec("reading", "", "the value read at x"),)
    cost_unit = "CPU-s"
    default_budget = 10
    default_cost_budget = 7.0
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    brief = "Find the x where the reading peaks."

    def simulate(self, experiments, conditions, rngs):
        out = []
        for e in experiments:
            value = 1.0 - e.x**2 if e.kind == "assay" else round(1.0 - e.x**2, 1)
            out.append(Measurement("ok", {"reading": Value(value, "")}, cost=COSTS[e.kind]))
        return out

    def reward(self, measurement, conditions):
        return measurement["reading"]


def test_a_campaign_ends_when_its_cost_budget_is_spent() -> None:
    """7 CPU-s: a survey (1) and an assay (5) leave 1; the next assay crosses the budget, is
    measured and paid in full, and ends the campaign with experiments left."""
    env = LabEnv(ProbeLab())
    obs, _ = env.reset(seed=0)
    cost_column = 1 + len(ProbeLab.public_conditions)
    assert obs[0, 0] == 1.0 and obs[0, cost_column] == 1.0
    steps = [{"x": 0.5, "kind": "survey"}, {"x": 0.1, "kind": "assay"}, {"x": 0.0, "kind": "assay"}]
    done = []
    for proposal in steps:
        obs, _, terminated, truncated, info = env.step(json.dumps(proposal))
        done.append(terminated or truncated)
    campaign = env.unwrapped.campaign
    assert done == [False, False, True]
    assert campaign.end_reason == "cost budget spent" and campaign.remaining == 7
    assert campaign.cost == 11.0 and campaign.cost_left == -4.0
    assert campaign.history[-1].measurement.ok and campaign.history[-1].score == 1.0
    assert obs[0, cost_column] == 0.0 and obs in observation_space(env.unwrapped.task)


def test_without_a_cost_budget_nothing_changes() -> None:
    task = ProbeLab()
    task.cost_budget = None
    env = LabEnv(task)
    obs, _ = env.reset(seed=0)
    assert obs[0, 0] == 1.0 and not obs[0, 1:].any()  # no header column for a cost budget
    for _ in range(3):
        *_, terminated, truncated, _ = env.step(json.dumps({"x": 0.0, "kind": "assay"}))
        assert not (terminated or truncated)
    assert env.unwrapped.campaign.cost_left is None


def test_the_vector_env_shows_the_cost_left_as_the_full_observation_does() -> None:
    """The vector env writes only what changed in each observation (the header's budget
    columns, new rows); it must equal :func:`observation` drawn afresh."""
    task = ProbeLab()
    venv = VectorLabEnv(task, 3)
    venv.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(12):
        actions = [
            json.dumps({"x": float(rng.uniform(-1, 1)), "kind": str(rng.choice(list(COSTS)))})
            for _ in range(3)
        ]
        obs, *_ = venv.step(actions)
        batch: CampaignBatch = venv.batch
        for slot, campaign in enumerate(batch.campaigns):
            np.testing.assert_array_equal(obs[slot], observation(task, campaign))


def test_the_chat_view_tells_the_cost_budget_and_what_is_left() -> None:
    chat = ChatLabEnv(ProbeLab())
    (messages,) = chat.reset([0])
    assert (
        "7 CPU-s of cost" in messages[0]["content"] and "7 CPU-s of cost" in messages[1]["content"]
    )

    def call(kind: str) -> str:
        arguments = {"x": 0.0, "kind": kind}
        return f'<tool_call>{{"name": "propose_experiment", "arguments": {json.dumps(arguments)}}}</tool_call>'

    chat.step([call("assay")])
    assert (
        "9 experiments left and 2 CPU-s of the cost budget"
        in chat.conversations[0].messages[-1]["content"]
    )
    chat.step([call("assay")])
    text = chat.conversations[0].messages[-1]["content"]
    assert "The campaign is over: cost budget spent" in text, text


def test_a_lab_with_a_cost_budget_passes_check_lab() -> None:
    check_lab(ProbeLab())


class FreeProbeLab(ProbeLab):
    """A cost budget on experiments that cost nothing: a budget that can never end a
    campaign, which ``check_lab`` refuses."""

    id = "FreeProbe-v0"

    def simulate(self, experiments, conditions, rngs):
        return [
            Measurement("ok", dict(m.observables), cost=0.0)
            for m in super().simulate(experiments, conditions, rngs)
        ]


def test_check_lab_refuses_a_cost_budget_that_nothing_spends() -> None:
    with pytest.raises(AssertionError, match="has a cost budget, but three experiments cost"):
        check_lab(FreeProbeLab())
