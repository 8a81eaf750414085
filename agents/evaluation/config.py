"""The settings of an evaluation: one dataclass, a line of help per field, checked in one
place; ``labtwin eval`` builds its options from it (defaults and help). It imports neither
torch nor transformers, so the command line can read it cheaply.

>>> EvalConfig(samples=0).validate()
Traceback (most recent call last):
...
ValueError: samples must be at least 1, got 0
"""

from __future__ import annotations

from dataclasses import dataclass

import labtwin
from labtwin.agents.train_config import field_help


@dataclass
class EvalConfig:
    """What an evaluation runs (the generation settings come from :class:`TrainConfig`)."""

    task: str = "BatchReactor-v1"
    """lab id"""
    budget: int | None = None
    """experiments per campaign (default: the run's training budget, else the lab's)"""
    campaigns: int = 16
    """held-out campaign seeds"""
    samples: int = 16
    """campaigns per seed and agent: pass@k and pass^k for k = 1..samples"""
    hack_samples: int = 4
    """campaigns per seed on the lab's impossible variant (0: no hack rate)"""
    seed: int = 0
    """root of the held-out seeds, the policies' sampling and the baselines' seeds"""
    batch_campaigns: int = 64
    """policy campaigns per batched rollout"""
    threads: int = 1
    """torch CPU threads"""
    records: bool = True
    """keep every evaluation campaign under campaigns/<agent>/"""

    def validate(self) -> EvalConfig:
        for name in ("campaigns", "samples", "batch_campaigns", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.hack_samples < 0 or self.seed < 0:
            raise ValueError("hack_samples and seed must be >= 0")
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"budget must be at least 1, got {self.budget}")
        labtwin.load_task(self.task)  # KeyError naming the registered labs
        return self


def eval_field_help() -> dict[str, str]:
    """The docstring line under each :class:`EvalConfig` field (the command line's help)."""
    return field_help(EvalConfig)
