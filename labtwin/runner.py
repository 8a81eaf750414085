"""Running campaigns with an optimiser agent, all campaigns in lockstep.

An agent here is anything with ``reset(space, seed)``, ``propose() -> vector``
and ``observe(vector, score)``: random search, CMA-ES, Bayesian optimisation
(see :mod:`labtwin.agents.baselines`). Agents are found by name through the
``labtwin.agents`` entry-point group. ``run_campaigns`` runs ``n`` campaigns
as one :class:`~labtwin.vector.VectorLabEnv`, so each round of proposals is a
single batched simulator call, and records everything in a run directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from rich.progress import Progress

from labtwin.registry import make_vec, short_id
from labtwin.runs import RunStore


class Agent(Protocol):
    def reset(self, space: gym.spaces.Box, seed: int) -> None: ...

    def propose(self) -> np.ndarray: ...

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
    **task_kwargs: Any,
) -> tuple[list[CampaignSummary], Path]:
    """Run ``n_campaigns`` campaigns of a lab with one agent per campaign.

    Campaign ``i`` is seeded with ``seed + i`` and its agent with the same
    seed. Returns the per-campaign summaries and the run directory.
    """
    env = make_vec(task_id, n_campaigns, **task_kwargs)
    task = env.task
    agents = [load_agent(agent, **(agent_kwargs or {})) for _ in range(n_campaigns)]
    for i, a in enumerate(agents):
        a.reset(env.single_action_space, seed + i)
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
    env.reset(seed=seed)
    with RunStore(run_dir, config) as store, Progress(disable=not progress) as bar:
        job = bar.add_task(f"{task.id} · {agent}", total=task.budget * n_campaigns)
        for step in range(task.budget):
            actions = np.stack([a.propose() for a in agents]).astype(np.float32)
            _, rewards, _, _, info = env.step(actions)
            for i, a in enumerate(agents):
                a.observe(actions[i], float(info["score"][i]))
                store.log_experiment(
                    i,
                    step,
                    info["measurement"][i],
                    float(info["score"][i]),
                    float(rewards[i]),
                    agent=agent,
                )
            bar.advance(job, n_campaigns)
        summaries = [_summarise(i, c.history, task.cost_unit) for i, c in enumerate(env.campaigns)]
        for s in summaries:
            store.log_campaign(**s.__dict__)
    return summaries, run_dir


def _summarise(index: int, history: list[Any], cost_unit: str) -> CampaignSummary:
    best = max(history, key=lambda r: r.score)
    m = best.measurement
    return CampaignSummary(
        campaign=index,
        best_score=float(best.score),
        best_experiment=m.experiment,
        best_observables={k: str(v) for k, v in m.observables.items()},
        experiments=len(history),
        invalid=sum(r.measurement.status == "invalid" for r in history),
        cost=float(sum(r.measurement.cost for r in history)),
        cost_unit=cost_unit,
    )
