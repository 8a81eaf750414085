"""The run store: a directory that records campaigns and training append-only.

Layout of a run directory::

    config.json          what was run (task, agent, seeds, versions), written once
    campaigns.jsonl      per campaign: a "start" line (seed, conditions, which of them are
                         hidden from the agent) and, where a runner summarises, an "end" line
    records.jsonl        one line per record (campaign, step, kind, proposal, measurement,
                         score, reward), plus the run's context (e.g. the training step)
    metrics.jsonl        one line per training step or evaluation
    transcripts.jsonl    per LLM campaign, where a trainer logs them: the conversation (system
                         brief, replies, parsed tool calls, tool results) and each turn's reward
    artifacts/           arrays (trajectories, time courses) as .npy files

A :class:`RunStore` is an observer of the campaign engine
(:class:`~labtwin.campaign.CampaignBatch` ``recorder=``): it writes each
campaign's conditions once, when the campaign starts, and every record as it
is made. So a run can be re-scored offline (:meth:`Run.rescore`), audited,
and any campaign replayed from its seed and proposals.

Every line is flushed (and, unless ``durable=False``, fsynced) as it is
written, so a crash loses at most the line being written. :func:`load` skips a
torn or undecodable last line; opening a run with ``resume=True`` cuts such a
torn tail off before appending (a complete last line only gets its newline),
so the run stays readable. A resumed run that runs a campaign id again (a
trainer repeating the steps after its last checkpoint) supersedes the earlier
attempt: :func:`load` keeps the records of each id's latest start.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from labtwin.campaign import Campaign, Record, replay, score_of
from labtwin.measurement import Measurement, to_jsonable
from labtwin.task import Task

_STREAMS = ("campaigns", "records", "metrics")
#: written only by runs that have conversations (opened on the first line)
_LAZY_STREAMS = ("transcripts",)


def _mend_tail(path: Path) -> None:
    """Before appending: end a complete last line with its newline, or cut a torn one."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        start = data.rfind(b"\n") + 1
        try:
            json.loads(data[start:].decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            f.truncate(start)  # torn by a crash mid-write: load() never counted it
        else:
            f.write(b"\n")  # complete, only its newline was lost: keep it


class RunStore:
    """Writer for a run directory; also the campaign engine's recorder."""

    def __init__(
        self,
        path: str | os.PathLike,
        config: dict[str, Any] | None = None,
        resume: bool = False,
        durable: bool = True,
    ) -> None:
        self.path = Path(path)
        self.durable = durable
        #: merged into every record line (e.g. ``{"train_step": 3}``)
        self.context: dict[str, Any] = {}
        # campaign id -> uid of its latest start; a resumed run that runs a campaign id
        # again supersedes the earlier attempt (load() keeps the latest)
        self._uids: dict[int, str] = {}
        config_file = self.path / "config.json"
        if config_file.exists() and not resume:
            raise FileExistsError(f"{self.path} already holds a run; pass resume=True to append")
        (self.path / "artifacts").mkdir(parents=True, exist_ok=True)
        if not config_file.exists():
            config = {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **(config or {})}
            tmp = config_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(to_jsonable(config), indent=2))
            tmp.replace(config_file)
        self._files = {}
        for name in _STREAMS:
            _mend_tail(self.path / f"{name}.jsonl")
            self._files[name] = open(self.path / f"{name}.jsonl", "a", encoding="utf-8")

    def _append(self, stream: str, line: dict[str, Any]) -> None:
        if stream not in self._files:  # a lazy stream's first line
            _mend_tail(self.path / f"{stream}.jsonl")
            self._files[stream] = open(self.path / f"{stream}.jsonl", "a", encoding="utf-8")
        f = self._files[stream]
        f.write(json.dumps(to_jsonable(line), allow_nan=False) + "\n")
        f.flush()
        if self.durable:
            os.fsync(f.fileno())

    def save_artifact(self, name: str, array: np.ndarray) -> str:
        """Write an array under ``artifacts/``; returns its path relative to the run."""
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".")
        rel = f"artifacts/{safe}.npy"
        np.save(self.path / rel, np.asarray(array))
        return rel

    # ---- the engine's recorder -------------------------------------------------------

    def campaign_started(self, campaign: Campaign) -> None:
        """Write a campaign's seed and conditions once, marking those the agent is not told."""
        public = [spec.name for spec in campaign.task.public_conditions]
        self._uids[campaign.id] = uuid.uuid4().hex
        self._append(
            "campaigns",
            {
                "event": "start",
                "campaign": campaign.id,
                "uid": self._uids[campaign.id],
                "task": campaign.task.id,
                "seed": campaign.seed,
                "budget": campaign.task.budget,
                "max_turns": campaign.max_turns,
                "reward_mode": campaign.reward_mode,
                "invalid_penalty": campaign.invalid_penalty,
                "conditions": campaign.conditions,
                "hidden": sorted(k for k in campaign.conditions if k not in public),
                **self.context,
            },
        )

    def record(self, record: Record) -> None:
        """Write one record; its measurement's artifacts go to files named after it."""
        line = record.to_dict()
        line["measurement"]["artifacts"] = {
            name: self.save_artifact(f"c{record.campaign:06d}_s{record.step:04d}_{name}", array)
            for name, array in record.measurement.artifacts.items()
        }
        uid = self._uids.get(record.campaign)
        self._append("records", {**line, "uid": uid, "time": time.time(), **self.context})

    # ---- summaries ------------------------------------------------------------------------

    def log_campaign_end(self, campaign: int, **summary: Any) -> None:
        self._append("campaigns", {"event": "end", "campaign": campaign, **summary})

    def log_metrics(self, step: int, **metrics: Any) -> None:
        self._append("metrics", {"step": step, "time": time.time(), **metrics})

    def log_transcript(
        self, campaign: int, messages: list[dict[str, Any]], rewards: list[float], **extra: Any
    ) -> None:
        """One LLM campaign's conversation: OpenAI-format ``messages`` (system brief, user turn,
        then per reply an assistant message, with its parsed ``tool_calls``, and the tool
        result) and ``rewards``, one per reply; ``extra`` and the context are merged in."""
        line = {"campaign": campaign, "uid": self._uids.get(campaign), "messages": messages}
        self._append("transcripts", {**line, "rewards": rewards, **extra, **self.context})

    def close(self) -> None:
        for f in self._files.values():
            f.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _read_jsonl(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The lines of a JSONL file and how many unreadable lines were skipped.

    A torn last line (a crash mid-write, possibly binary) is skipped silently;
    an unreadable line elsewhere is skipped with a warning.
    """
    if not path.exists():
        return [], 0
    lines = path.read_bytes().split(b"\n")
    rows, skipped = [], 0
    for n, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            rows.append(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            if n == len(lines) - 1:
                break  # torn last line
            skipped += 1
    if skipped:
        warnings.warn(f"{path}: skipped {skipped} unreadable line(s)", stacklevel=3)
    return rows, skipped


@dataclass
class CampaignInfo:
    """What the run knows about one campaign: its seed, conditions and (if any) summary."""

    campaign: int
    seed: int
    conditions: dict[str, Any]
    hidden: list[str]
    start: dict[str, Any]
    end: dict[str, Any] | None = None

    @property
    def settings(self) -> dict[str, Any]:
        """The engine settings the campaign ran with (what a replay needs)."""
        keys = ("reward_mode", "invalid_penalty", "max_turns")
        return {k: self.start[k] for k in keys if k in self.start}


@dataclass
class Run:
    """A run read back from disk."""

    path: Path
    config: dict[str, Any]
    records: list[Record]
    record_lines: list[dict[str, Any]]
    campaigns: dict[int, CampaignInfo]
    metrics: list[dict[str, Any]]
    skipped_lines: int = 0
    #: records of campaign attempts that a resumed run ran again (not in ``records``)
    superseded: int = 0
    #: campaign id -> its ``transcripts.jsonl`` line (LLM campaigns whose trainer logged them)
    transcripts: dict[int, dict[str, Any]] = field(default_factory=dict)
    _index: dict[int, list[Record]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for record in self.records:
            self._index.setdefault(record.campaign, []).append(record)

    def measurements(self) -> list[Measurement]:
        """Measurements of every experiment record, in order."""
        return [r.measurement for r in self.records if r.kind == "experiment"]

    def campaign_ids(self) -> list[int]:
        return sorted(set(self._index) | set(self.campaigns))

    def records_of(self, campaign: int) -> list[Record]:
        return list(self._index.get(campaign, []))

    def artifact(self, rel_path: str) -> np.ndarray:
        """An array the run saved; paths that leave the run directory are refused."""
        root = self.path.resolve()
        target = (root / rel_path).resolve()
        if not target.is_relative_to(root / "artifacts"):
            raise ValueError(f"{rel_path!r} is not an artifact of this run")
        return np.load(target, allow_pickle=False)

    def replay(self, task: Task, campaign: int) -> list[Record]:
        """Run a recorded campaign again: its seed, conditions, settings and proposals."""
        info = self.campaigns[campaign]
        return replay(task, info.seed, self.records_of(campaign), info.conditions, **info.settings)

    def best_scores(self) -> dict[int, float]:
        """Best experiment score per campaign."""
        best: dict[int, float] = {}
        for r in self.records:
            if r.kind == "experiment" and r.score is not None:
                best[r.campaign] = max(best.get(r.campaign, -np.inf), r.score)
        return best

    def rescore(self, task: Task) -> list[float | None]:
        """Every record's score recomputed with the lab and its campaign's recorded conditions."""
        out = []
        history: dict[int, list[Measurement]] = {}
        for r in self.records:
            info = self.campaigns.get(r.campaign)
            if info is None:
                raise KeyError(f"campaign {r.campaign} has no recorded conditions")
            seen = history.setdefault(r.campaign, [])
            out.append(score_of(task, r.kind, r.measurement, info.conditions, list(seen)))
            if r.kind == "experiment":
                seen.append(r.measurement)
        return out


def load(path: str | os.PathLike) -> Run:
    """Read a run directory written by :class:`RunStore`."""
    path = Path(path)
    config_file = path / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{path} is not a labtwin run (no config.json)")
    lines, skipped = _read_jsonl(path / "records.jsonl")
    campaign_lines, skipped_c = _read_jsonl(path / "campaigns.jsonl")
    metrics, skipped_m = _read_jsonl(path / "metrics.jsonl")
    transcript_lines, skipped_t = _read_jsonl(path / "transcripts.jsonl")
    campaigns: dict[int, CampaignInfo] = {}
    for line in campaign_lines:
        c = int(line["campaign"])
        if line.get("event") == "start":  # a later start of the same id supersedes
            campaigns[c] = CampaignInfo(
                c, int(line["seed"]), line["conditions"], line.get("hidden", []), line
            )
        elif line.get("event") == "end" and c in campaigns:
            campaigns[c].end = line
    current = {c: info.start.get("uid") for c, info in campaigns.items()}
    kept = [r for r in lines if r.get("uid") == current.get(int(r["campaign"]), r.get("uid"))]
    transcripts = {
        int(t["campaign"]): t
        for t in transcript_lines
        if t.get("uid") == current.get(int(t["campaign"]), t.get("uid"))
    }
    return Run(
        path=path,
        config=json.loads(config_file.read_text()),
        records=[Record.from_dict(line) for line in kept],
        record_lines=kept,
        superseded=len(lines) - len(kept),
        campaigns=campaigns,
        metrics=metrics,
        transcripts=transcripts,
        skipped_lines=skipped + skipped_c + skipped_m + skipped_t,
    )
