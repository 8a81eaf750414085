"""The run store: a directory that records campaigns and training append-only.

Layout of a run directory::

    config.json          what was run (task, agent, seeds, versions), written once
    experiments.jsonl    one line per experiment: campaign, step, measurement, score, reward
    campaigns.jsonl      one line per finished campaign: best score, cost, best experiment
    metrics.jsonl        one line per training step or evaluation
    artifacts/           arrays (trajectories, time courses) as .npy files

Every line is flushed (and, unless ``durable=False``, fsynced) as it is written, so a crash loses at most
the line being written; :func:`load` skips a torn last line. Opening an
existing run with ``resume=True`` appends to it.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labtwin.measurement import Measurement, to_jsonable

_STREAMS = ("experiments", "campaigns", "metrics")


class RunStore:
    """Writer for a run directory."""

    def __init__(
        self,
        path: str | os.PathLike,
        config: dict[str, Any] | None = None,
        resume: bool = False,
        durable: bool = True,
    ) -> None:
        self.path = Path(path)
        self.durable = durable
        config_file = self.path / "config.json"
        if config_file.exists() and not resume:
            raise FileExistsError(f"{self.path} already holds a run; pass resume=True to append")
        (self.path / "artifacts").mkdir(parents=True, exist_ok=True)
        if not config_file.exists():
            config = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(config or {})}
            tmp = config_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(to_jsonable(config), indent=2))
            tmp.replace(config_file)
        self._files = {name: open(self.path / f"{name}.jsonl", "a") for name in _STREAMS}

    def _append(self, stream: str, record: dict[str, Any]) -> None:
        f = self._files[stream]
        f.write(json.dumps(to_jsonable(record), allow_nan=False) + "\n")
        f.flush()
        if self.durable:
            os.fsync(f.fileno())

    def save_artifact(self, name: str, array: np.ndarray) -> str:
        """Write an array under ``artifacts/``; returns its path relative to the run."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        rel = f"artifacts/{safe}.npy"
        np.save(self.path / rel, np.asarray(array))
        return rel

    def log_experiment(
        self,
        campaign: int,
        step: int,
        measurement: Measurement,
        score: float,
        reward: float,
        **extra: Any,
    ) -> None:
        """Record one experiment; its artifacts go to files named after it."""
        record = measurement.to_dict()
        record["artifacts"] = {
            name: self.save_artifact(f"c{campaign:05d}_s{step:04d}_{name}", array)
            for name, array in measurement.artifacts.items()
        }
        self._append(
            "experiments",
            {
                "campaign": campaign,
                "step": step,
                "score": score,
                "reward": reward,
                "measurement": record,
                "time": time.time(),
                **extra,
            },
        )

    def log_campaign(self, campaign: int, **summary: Any) -> None:
        self._append("campaigns", {"campaign": campaign, **summary})

    def log_metrics(self, step: int, **metrics: Any) -> None:
        self._append("metrics", {"step": step, "time": time.time(), **metrics})

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if n == len(lines) - 1:
                break  # torn last line from a crash
            raise
    return records


@dataclass
class Run:
    """A run read back from disk."""

    path: Path
    config: dict[str, Any]
    experiments: list[dict[str, Any]]
    campaigns: list[dict[str, Any]]
    metrics: list[dict[str, Any]]

    def measurements(self) -> list[Measurement]:
        return [Measurement.from_dict(r["measurement"]) for r in self.experiments]

    def artifact(self, rel_path: str) -> np.ndarray:
        return np.load(self.path / rel_path)

    def campaign_ids(self) -> list[int]:
        return sorted({r["campaign"] for r in self.experiments})

    def best_scores(self) -> dict[int, float]:
        """Best score per campaign, from the experiment records."""
        best: dict[int, float] = {}
        for r in self.experiments:
            c = r["campaign"]
            best[c] = max(best.get(c, -np.inf), r["score"])
        return best


def load(path: str | os.PathLike) -> Run:
    """Read a run directory written by :class:`RunStore`."""
    path = Path(path)
    config_file = path / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{path} is not a labtwin run (no config.json)")
    return Run(
        path=path,
        config=json.loads(config_file.read_text()),
        experiments=_read_jsonl(path / "experiments.jsonl"),
        campaigns=_read_jsonl(path / "campaigns.jsonl"),
        metrics=_read_jsonl(path / "metrics.jsonl"),
    )
