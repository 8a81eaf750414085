"""Sample-efficiency curves on campaigns run through the real campaign engine."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
from labtwin.agents.evaluation.efficiency import (
    best_so_far,
    cost_curve,
    experiment_curve,
    total_cost,
)
from labtwin.campaign import CampaignBatch, Record
from labtwin.experiment import Answer, Invalid
from labtwin.measurement import Measurement

HOT = {"temperature_K": 340, "time_min": 60, "feed_conc_mol_L": 0.5, "catalyst_mol_pct": 4}
COLD = {"temperature_K": 305, "time_min": 5, "feed_conc_mol_L": 0.5, "catalyst_mol_pct": 0}
MILD = {"temperature_K": 325, "time_min": 90, "feed_conc_mol_L": 0.3, "catalyst_mol_pct": 3}


@pytest.fixture(scope="module")
def campaigns() -> tuple[labtwin.Task, list[list[Record]]]:
    """Two reactor campaigns of four steps: one with an invalid reply in the middle."""
    task = labtwin.load_task("BatchReactor-v1", budget=4)
    batch = CampaignBatch(task, 2, invalid_penalty=0.1)
    batch.reset([0, 1], [11, 12])
    plan = [(COLD, HOT), ("not an experiment", COLD), (MILD, COLD), (HOT, MILD)]
    for first, second in plan:
        batch.step([0, 1], [first, second])
    return task, [list(c.history) for c in batch.campaigns]


def test_best_so_far_is_the_running_maximum_of_the_scores(campaigns) -> None:
    task, records = campaigns
    first = records[0]
    assert first[1].measurement.status == "invalid" and first[1].score == task.invalid_score
    scores = [r.score for r in first]
    expected = np.maximum.accumulate([task.baseline_score, *scores])[1:]
    assert best_so_far(first, task.baseline_score, 4).tolist() == expected.tolist()
    # a campaign that ended early keeps its last best over the rest of the budget
    assert best_so_far(first[:2], 0.0, 4).tolist() == [scores[0]] * 2 + [max(scores[:2])] * 2


def test_analysis_calls_spend_no_experiment() -> None:
    analysis = Record(0, 0, "analysis", Measurement("ok"), None, 0.0)
    scored = Record(0, 1, "experiment", Measurement("ok", cost=2.0), 0.5, 0.5)
    assert best_so_far([analysis, scored], 0.1, 2).tolist() == [0.5, 0.5]
    assert total_cost([analysis, scored]) == 2.0


def test_experiment_curve_and_its_area(campaigns) -> None:
    task, records = campaigns
    curve = experiment_curve(records, task.budget, task.baseline_score)
    table = np.array([best_so_far(r, task.baseline_score, task.budget) for r in records])
    assert curve.experiments.tolist() == [0, 1, 2, 3, 4]
    assert curve.best_mean[0] == task.baseline_score
    assert np.allclose(curve.best_mean[1:], table.mean(axis=0))
    assert np.all(np.diff(curve.best_mean) >= 0)
    assert curve.area == pytest.approx(table.mean())
    assert np.allclose(curve.best_sem[1:], table.std(axis=0, ddof=1) / np.sqrt(2))


def test_cost_area_is_the_integral_of_the_step_function(campaigns) -> None:
    """Against a dense numerical integration of each campaign's best-vs-cost step function."""
    task, records = campaigns
    horizon = 1.5 * max(total_cost(r) for r in records)  # past every campaign's end
    curve = cost_curve(records, horizon, task.baseline_score, points=50, unit=task.cost_unit)
    x = np.linspace(0.0, horizon, 400_001)
    dense = []
    for campaign in records:
        spent = np.cumsum([r.measurement.cost for r in campaign])
        best = np.maximum.accumulate([r.score for r in campaign])
        index = np.searchsorted(spent, x, side="right") - 1
        dense.append(np.where(index >= 0, best[np.maximum(index, 0)], task.baseline_score))
    dense = np.mean(dense, axis=0)
    # a Riemann sum on 400,001 points: error below (largest score) x (steps) / points
    assert curve.area == pytest.approx(dense.mean(), abs=1e-4)
    assert curve.unit == "h" and curve.horizon == horizon
    assert curve.best_mean[0] == task.baseline_score  # nothing measured before any cost
    assert curve.best_mean[-1] == pytest.approx(np.mean([max(r.score for r in c) for c in records]))
    # a longer horizon, past every campaign's end, only adds its final best: the area rises
    # towards the mean final best
    longer = cost_curve(records, 10 * horizon, task.baseline_score)
    assert curve.area < longer.area < curve.best_mean[-1]


def test_an_answer_ends_the_curve_early() -> None:
    """An accepted answer ends the campaign; the curve holds its best for the unspent budget."""
    task = labtwin.load_task("ArrheniusFit-v1", budget=3)
    batch = CampaignBatch(task, 1)
    batch.reset([0], [5])
    batch.step([0], [{"temperature_K": 340, "time_min": 30}])
    batch.step([0], [Answer({"activation_energy_kJ_mol": 70.0})])
    records = list(batch.campaigns[0].history)
    assert batch.campaigns[0].done and len(records) == 2
    answer_score = records[1].score
    assert best_so_far(records, 0.0, 3).tolist() == [0.0, answer_score, answer_score]


def test_invalid_calls_and_bad_input(campaigns) -> None:
    task, _ = campaigns
    batch = CampaignBatch(task, 1)
    batch.reset([0], [3])
    batch.step([0], [Invalid("no tool call in the reply", "hello")])
    records = list(batch.campaigns[0].history)
    assert records[0].kind == "invalid" and best_so_far(records, 0.0, 1).tolist() == [0.0]
    with pytest.raises(ValueError, match="no campaigns"):
        experiment_curve([], 3)
    with pytest.raises(ValueError, match="no campaigns"):
        cost_curve([])
