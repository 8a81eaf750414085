"""Baseline agents: random search, CMA-ES and Bayesian optimisation.

They work on any lab through its numeric view (a box ``[-1, 1]^d``) and give
every lab a reference score for a given experiment budget. Each has
``reset(space, seed, task=None)``, ``propose() -> vector`` and ``observe(vector, score)``.
Random search also runs text labs (no numeric view), drawing ``task.random_experiment``.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np


def _box(space: gym.Space, name: str) -> gym.spaces.Box:
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"{name} needs a lab with a numeric view (a Box action space)")
    return space


class RandomSearch:
    """Uniform random proposals in the action box; on a text lab, the lab's random experiments."""

    def reset(self, space: gym.Space, seed: int, task: Any = None) -> None:
        self.space = space
        self.task = task
        self.rng = np.random.default_rng(seed)
        if not isinstance(space, gym.spaces.Box) and task is None:
            raise ValueError("random search on a text lab needs the task (task=...)")

    def propose(self) -> np.ndarray | str:
        if isinstance(self.space, gym.spaces.Box):
            return self.rng.uniform(self.space.low, self.space.high).astype(np.float32)
        return json.dumps(self.task.random_experiment(self.rng).model_dump(mode="json"))

    def observe(self, action: np.ndarray, score: float) -> None:
        pass


class CMAES:
    """CMA-ES (the ``cma`` package) maximising the score, with a small population.

    Proposals are served from one generation at a time; the generation is told
    back to CMA-ES when all its scores are in.
    """

    def __init__(self, sigma0: float = 0.5, popsize: int = 4) -> None:
        self.sigma0 = sigma0
        self.popsize = popsize

    def reset(self, space: gym.spaces.Box, seed: int, task: Any = None) -> None:
        import cma

        space = _box(space, "CMA-ES")
        dim = space.shape[0]
        options = {
            "bounds": [list(space.low.astype(float)), list(space.high.astype(float))],
            "popsize": self.popsize,
            "seed": int(seed) + 1,  # cma treats seed 0 as "random"
            "verbose": -9,
        }
        x0 = np.zeros(dim) if dim > 1 else np.zeros(2)
        self.dim = dim
        self.es = cma.CMAEvolutionStrategy(x0, self.sigma0, options)
        self.pending: deque[np.ndarray] = deque()
        self.asked: list[np.ndarray] = []
        self.scores: list[float] = []

    def propose(self) -> np.ndarray:
        if not self.pending:
            generation = self.es.ask()
            self.asked, self.scores = list(generation), []
            self.pending.extend(generation)
        x = self.pending.popleft()
        return np.clip(np.asarray(x[: self.dim]), -1.0, 1.0).astype(np.float32)

    def observe(self, action: np.ndarray, score: float) -> None:
        self.scores.append(-float(score))  # cma minimises
        if len(self.scores) == len(self.asked):
            self.es.tell(self.asked, self.scores)


class BayesOpt:
    """Gaussian-process Bayesian optimisation (optuna's ``GPSampler``).

    The first ``n_startup`` proposals are uniform random; after that
    each proposal maximises the log expected improvement of a GP fitted to
    all scores so far.
    """

    def __init__(self, n_startup: int = 5) -> None:
        self.n_startup = n_startup

    def reset(self, space: gym.spaces.Box, seed: int, task: Any = None) -> None:
        import optuna

        space = _box(space, "Bayesian optimisation")
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.names = [f"x{i}" for i in range(space.shape[0])]
        self.distributions = {
            name: optuna.distributions.FloatDistribution(float(lo), float(hi))
            for name, lo, hi in zip(self.names, space.low, space.high)
        }
        sampler = optuna.samplers.GPSampler(seed=seed, n_startup_trials=self.n_startup)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.trials: deque = deque()

    def propose(self) -> np.ndarray:
        trial = self.study.ask(self.distributions)
        self.trials.append(trial)
        return np.array([trial.params[n] for n in self.names], dtype=np.float32)

    def observe(self, action: np.ndarray, score: float) -> None:
        self.study.tell(self.trials.popleft(), float(score))
