"""Sample-efficiency curves: the mean best measured score against experiments and cost spent.

A campaign's *best so far* after ``j`` budgeted steps (experiments, answers and invalid
calls; analysis calls spend nothing) is the highest score any of them earned, starting from
the lab's ``baseline_score`` before the first; a campaign that ended early (an answer, the
turn cap) keeps its last best. Averaged over campaigns this is the curve that
lab-optimisation benchmarks report, and its area is one number per agent:

- against experiments, the area is the curve's mean over ``j = 1..budget`` (in score units:
  1 would be a perfect score from the first experiment on);
- against cost, each campaign's best is a step function of the cost it has spent (a score
  counts once its experiment's cost is paid); the area is that function integrated exactly
  from 0 to a *horizon* and divided by it, averaged over campaigns. Compare agents on one
  horizon (``labtwin eval`` takes the largest total cost of any evaluated campaign): an
  agent that reaches a score for less cost then has the larger area.

The closing confirmation of a campaign is not an experiment the agent chose and is not on
these curves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from labtwin.campaign import Record


def best_so_far(records: Sequence[Record], start: float, budget: int) -> np.ndarray:
    """The campaign's best score after each of ``budget`` budgeted steps (padded with the
    last best where the campaign ended early)."""
    best, out = float(start), []
    for r in records:
        if not r.budgeted:
            continue
        if r.score is not None:
            best = max(best, float(r.score))
        out.append(best)
    out = out[:budget]
    return np.array(out + [best] * (budget - len(out)), dtype=np.float64)


def _cost_steps(records: Sequence[Record], start: float) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative cost after each budgeted step, best score from then on)."""
    spent, best, costs, bests = 0.0, float(start), [], []
    for r in records:
        if not r.budgeted:
            continue
        spent += float(r.measurement.cost)
        if r.score is not None:
            best = max(best, float(r.score))
        costs.append(spent)
        bests.append(best)
    return np.array(costs), np.array(bests)


@dataclass
class ExperimentCurve:
    """Mean best score after ``experiments[j]`` experiments (0 = before the first)."""

    experiments: np.ndarray
    best_mean: np.ndarray
    best_sem: np.ndarray
    #: mean of ``best_mean`` over experiments 1..budget
    area: float

    def to_dict(self) -> dict:
        return {
            "experiments": self.experiments.tolist(),
            "best_mean": self.best_mean.tolist(),
            "best_sem": self.best_sem.tolist(),
            "area": self.area,
        }


@dataclass
class CostCurve:
    """Mean best score once ``cost[j]`` has been spent, on a grid from 0 to ``horizon``."""

    cost: np.ndarray
    best_mean: np.ndarray
    #: exact area under the mean step function over [0, horizon], divided by the horizon
    area: float
    horizon: float
    unit: str = ""

    def to_dict(self) -> dict:
        return {
            "cost": self.cost.tolist(),
            "best_mean": self.best_mean.tolist(),
            "area": self.area,
            "horizon": self.horizon,
            "unit": self.unit,
        }


def _sem(table: np.ndarray) -> np.ndarray:
    if len(table) < 2:
        return np.zeros(table.shape[1])
    return table.std(axis=0, ddof=1) / np.sqrt(len(table))


def experiment_curve(
    campaigns: Sequence[Sequence[Record]], budget: int, start: float = 0.0
) -> ExperimentCurve:
    """The mean best score against experiments spent, over ``campaigns`` (records each)."""
    if not campaigns:
        raise ValueError("no campaigns to average over")
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    table = np.array([best_so_far(records, start, budget) for records in campaigns])
    mean = table.mean(axis=0)
    return ExperimentCurve(
        experiments=np.arange(budget + 1),
        best_mean=np.concatenate([[start], mean]),
        best_sem=np.concatenate([[0.0], _sem(table)]),
        area=float(mean.mean()),
    )


def total_cost(records: Sequence[Record]) -> float:
    """What a campaign's budgeted steps cost (the confirmation not included)."""
    return float(sum(r.measurement.cost for r in records if r.budgeted))


def cost_curve(
    campaigns: Sequence[Sequence[Record]],
    horizon: float | None = None,
    start: float = 0.0,
    points: int = 200,
    unit: str = "",
) -> CostCurve:
    """The mean best score against cost spent, up to ``horizon`` (default: the largest total
    cost of these campaigns)."""
    if not campaigns:
        raise ValueError("no campaigns to average over")
    steps = [_cost_steps(records, start) for records in campaigns]
    if horizon is None:
        horizon = max((c[-1] for c, _ in steps if len(c)), default=0.0)
    horizon = float(horizon)
    grid = np.linspace(0.0, horizon, points) if horizon > 0 else np.zeros(1)
    curves, areas = [], []
    for costs, bests in steps:
        # the best at cost x: that of the last step whose cumulative cost is <= x
        index = np.searchsorted(costs, grid, side="right") - 1
        if len(bests):
            values = np.where(index >= 0, bests[np.maximum(index, 0)], start)
        else:
            values = np.full(grid.shape, float(start))
        curves.append(values)
        areas.append(_step_area(costs, bests, start, horizon))
    return CostCurve(
        cost=grid,
        best_mean=np.mean(curves, axis=0),
        area=float(np.mean(areas)),
        horizon=horizon,
        unit=unit,
    )


def _step_area(costs: np.ndarray, bests: np.ndarray, start: float, horizon: float) -> float:
    """(1 / horizon) * integral over [0, horizon] of the campaign's best-so-far step function."""
    if horizon <= 0:  # nothing cost anything: the curve is its final best throughout
        return float(bests[-1]) if len(bests) else float(start)
    edges = np.concatenate([[0.0], np.minimum(costs, horizon), [horizon]])
    values = np.concatenate([[start], bests])
    return float(np.sum(values * np.diff(edges)) / horizon)
