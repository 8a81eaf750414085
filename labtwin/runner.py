"""Running campaigns with an optimiser agent, all campaigns in lockstep.

An agent here is anything with ``reset(space, seed)``, ``propose() -> vector``
and ``observe(vector, score)``: random search, CMA-ES, Bayesian optimisation
(see :mod:`labtwin.agents.baselines`). Agents are found by name through the
``labtwin.agents`` entry-point group. ``run_campaigns`` runs ``n`` campaigns
as one :class:`~labtwin.vector.VectorLabEnv`, so each round of proposals is a
single batched simulator call, and the run store records every campaign's
conditions and every record as the engine makes them.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from rich.progress import Progress

from labtwin.campaign import Campaign
from labtwin.gcpause import paused_gc
from labtwin.registry import load_task, short_id
from labtwin.runs import RunStore
from labtwin.vector import VectorLabEnv


class Agent(Protocol):
    def reset(self, space: gym.Space, seed: int, task: Any = None) -> None: ...

    def propose(self) -> np.ndarray | str: ...

    def observe(self, action: np.ndarray, score: float) -> None: ...


def list_agents() -> list[str]:
    return sorted(ep.name for ep in entry_points(group="labtwin.agents"))


def load_agent(name: str, **kwargs: Any) -> Agent:
    """An agent by its registered name (``random``, ``cmaes``, ``bo``)."""
    for ep in entry_points(group="labtwin.agents"):
        if ep.name == name:
            return ep.load()(**kwargs)
    raise KeyError(f"unknown agent {name!r}; available: {', '.join(list_agents())}")


@dataclass
class CampaignSummary:
    campaign: int
    best_score: float
    #: the closing confirmation of the best experiment (None where the lab does not confirm)
    confirmed_score: float | None
    #: what the campaign earned: ``min(best, confirmed)`` (:attr:`Campaign.result_score`)
    result_score: float
    best_experiment: dict[str, Any] | None
    best_observables: dict[str, str]
    experiments: int
    invalid: int
    cost: float
    cost_unit: str


def default_run_dir(task_id: str, agent: str, root: str | Path = "runs") -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) / f"{short_id(task_id)}-{agent}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def run_campaigns(
    task_id: str,
    agent: str,
    n_campaigns: int = 4,
    seed: int = 0,
    run_dir: str | Path | None = None,
    progress: bool = True,
    agent_kwargs: dict[str, Any] | None = None,
    ray: str | None = None,
    lab_workers: int | None = None,
    **task_kwargs: Any,
) -> tuple[list[CampaignSummary], Path]:
    """Run ``n_campaigns`` campaigns of a lab with one agent per campaign.

    Campaign ``i`` is seeded with ``seed + i`` and its agent with the same
    seed. Returns the per-campaign summaries and the run directory.
    ``ray`` (``"auto"`` or a cluster address) or ``lab_workers`` step the campaigns
    on that many Ray lab workers (:mod:`labtwin.distributed`), with the same records;
    without them everything runs in this process and Ray is not imported.
    """
    task = load_task(task_id, **task_kwargs)
    agents = [load_agent(agent, **(agent_kwargs or {})) for _ in range(n_campaigns)]
    for i, a in enumerate(agents):  # a ValueError here: the agent cannot run this lab
        a.reset(task.action_space, seed + i, task=task)
    run_dir = Path(run_dir) if run_dir else default_run_dir(task_id, agent)
    config = {
        "kind": "campaigns",
        "task": f"labtwin/{short_id(task_id)}",
        "agent": agent,
        "agent_kwargs": agent_kwargs or {},
        "task_kwargs": task_kwargs,
        "n_campaigns": n_campaigns,
        "seed": seed,
        "budget": task.budget,
    }
    if ray is not None or lab_workers is not None:
        config["lab_workers"] = lab_workers
    with ExitStack() as stack:
        store = stack.enter_context(RunStore(run_dir, config))
        bar = stack.enter_context(Progress(disable=not progress))
        env = VectorLabEnv(task, n_campaigns, recorder=store)
        if ray is not None or lab_workers is not None:
            from labtwin.distributed import on_ray

            stack.enter_context(on_ray(env, ray, lab_workers, (task_id, task_kwargs)))
        store.context = {"agent": agent}
        env.reset(seed=seed)
        job = bar.add_task(f"{task.id} · {agent}", total=task.budget * n_campaigns)
        campaigns = list(env.campaigns)
        while live := [i for i, c in enumerate(campaigns) if not c.done]:
            # only live campaigns step: one that ended early (its cost budget spent) is not
            # reset into another, which would be run and recorded but never summarised
            actions = [agents[i].propose() for i in live]
            with paused_gc():
                records = env.batch.step(live, actions)
            for i, action, record in zip(live, actions, records):
                score = float(record.score) if record.score is not None else float("nan")
                agents[i].observe(action, score)
            bar.advance(job, len(live))
        bar.update(job, completed=task.budget * n_campaigns)
        summaries = [_summarise(c, task.cost_unit) for c in campaigns]
        for s in summaries:
            store.log_campaign_end(**s.__dict__)
    return summaries, run_dir


def _summarise(campaign: Campaign, cost_unit: str) -> CampaignSummary:
    history = [r for r in campaign.history if r.kind == "experiment"]
    best = max(history, key=lambda r: r.score)
    m = best.measurement
    return CampaignSummary(
        campaign=campaign.id,
        best_score=float(best.score),
        confirmed_score=campaign.confirmed_score,
        result_score=float(campaign.result_score),
        best_experiment=m.experiment,
        best_observables={k: str(v) for k, v in m.observables.items()},
        experiments=len(history),
        invalid=sum(r.measurement.status == "invalid" for r in history),
        cost=float(sum(r.measurement.cost for r in history)),
        cost_unit=cost_unit,
    )
