"""Reading runs that may still be written: JSONL streams tailed by byte offset, structures.

A :class:`JsonlTail` remembers how far into a file it has read and, on each
:meth:`~JsonlTail.read`, returns the complete lines written since. A last line
without its newline is left for the next read, unless it is already a whole
JSON object (a writer that lost only the newline; :func:`labtwin.runs.load`
keeps such a line too), so a line the writer is still writing is never seen
torn. A :class:`RunReader` tails every stream of one run.

A run that ``labtwin eval`` evaluated holds ``eval/summary.json``;
:class:`EvaluationWatch` reads it again whenever it changes, and its evaluation
campaigns (``eval/campaigns/<agent>/``) are runs of their own, named
``<run>:eval:<agent>`` (:func:`eval_run_name`).

Structures are read with :func:`load_structure` from the artifact paths a
record lists: every path must resolve (symlinks followed) to a ``.npy`` file
inside the run's ``artifacts/`` folder, and arrays load with
``allow_pickle=False``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from labtwin.structures import NAMES, POSITIONS, read_structure

#: the JSONL files of a run directory (docs/runs.md), in the order a reader sends them
STREAMS = ("campaigns", "records", "metrics", "transcripts")

#: largest chunk one read takes from a file (a long run streams in several)
READ_CHUNK = 4 << 20
#: where an evaluation of a run (``labtwin eval``) writes its summary, and its campaigns
EVAL_SUMMARY = Path("eval") / "summary.json"
EVAL_CAMPAIGNS = Path("eval") / "campaigns"
#: largest summary.json read (bytes); a larger one is shown as unreadable
MAX_EVAL_BYTES = 32 << 20


class JsonlTail:
    """The complete lines appended to one JSONL file since the last read."""

    def __init__(self, path: Path, offset: int = 0) -> None:
        self.path = path
        self.offset = offset
        #: complete lines that were not JSON (counted, never raised)
        self.skipped = 0
        #: set when the file shrank below the offset (it was replaced): reading restarted at 0
        self.restarted = False

    def read(self) -> list[dict[str, Any]]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:
            self.offset, self.restarted = 0, True
        if size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(size - self.offset, READ_CHUNK))
            if b"\n" not in data and self.offset + len(data) < size:
                data += f.read(size - self.offset - len(data))  # one line longer than a chunk
        end = data.rfind(b"\n") + 1
        rows = [row for raw in data[:end].split(b"\n") if (row := self._parse(raw)) is not None]
        tail = data[end:]
        if tail and self.offset + len(data) == size:
            row = self._parse(tail, complete=False)
            if row is not None:  # a whole object whose newline is missing
                rows.append(row)
                end = len(data)
        self.offset += end
        return rows

    def _parse(self, raw: bytes, complete: bool = True) -> dict[str, Any] | None:
        if not raw.strip():
            return None
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            row = None
        if isinstance(row, dict):
            return row
        if complete:
            self.skipped += 1
        return None


class RunReader:
    """Tails every stream of one run directory; ``offsets`` says where each one stands."""

    def __init__(self, path: str | os.PathLike, offsets: Mapping[str, int] | None = None) -> None:
        self.path = Path(path)
        offsets = offsets or {}
        self.tails = {s: JsonlTail(self.path / f"{s}.jsonl", offsets.get(s, 0)) for s in STREAMS}

    @property
    def offsets(self) -> dict[str, int]:
        return {s: t.offset for s, t in self.tails.items()}

    def poll(self) -> dict[str, list[dict[str, Any]]]:
        """New lines per stream (streams without new lines are left out)."""
        out = {}
        for stream, tail in self.tails.items():
            rows = tail.read()
            if rows:
                out[stream] = rows
        return out

    def read_all(self) -> dict[str, list[dict[str, Any]]]:
        """Every line of every stream, read to the end (for a report)."""
        lines: dict[str, list[dict[str, Any]]] = {s: [] for s in STREAMS}
        while batch := self.poll():
            for stream, rows in batch.items():
                lines[stream] += rows
        return lines

    def config(self) -> dict[str, Any]:
        return read_config(self.path)


def read_config(run: Path) -> dict[str, Any]:
    try:
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def find_runs(root: str | os.PathLike) -> dict[str, Path]:
    """Run directories by name: ``root`` itself if it is a run, else its subfolders that are;
    after each, the evaluation campaigns it holds (``<run>:eval:<agent>``). The output of a
    ``labtwin eval --task`` (``summary.json`` and ``campaigns/``, no run around it), as
    ``root`` or as one of its subfolders, gives its campaigns as ``<folder>:eval:<agent>``.

    A folder that is a symlink to a directory outside ``root`` is left out.
    """
    root = Path(root).resolve()
    tops: dict[str, Path] = {}
    evaluations: dict[str, Path] = {}  # name -> folder holding campaigns/ (no run)
    if (root / "config.json").is_file():
        tops = {root.name: root}
    elif is_evaluation_output(root):
        evaluations = {root.name: root}
    elif root.is_dir():
        for child in sorted(root.iterdir()):
            target = child.resolve()
            if not target.is_relative_to(root):
                continue
            if (target / "config.json").is_file():
                tops[child.name] = target
            elif is_evaluation_output(target):
                evaluations[child.name] = target
    runs: dict[str, Path] = {}
    for name, path in tops.items():
        runs[name] = path
        for folder, target in eval_campaign_runs(root, path).items():
            nested = eval_run_name(name, folder)
            if nested not in tops:  # a real folder of that name keeps it
                runs.setdefault(nested, target)
    for name, path in evaluations.items():
        for folder, target in eval_campaign_runs(root, path, path / "campaigns").items():
            nested = eval_run_name(name, folder)
            if nested not in tops:
                runs.setdefault(nested, target)
    return runs


def is_evaluation_output(path: Path) -> bool:
    """True for a folder laid out as a ``labtwin eval`` output (``summary.json`` beside a
    ``campaigns/`` folder) that is not itself a run."""
    return (
        (path / "summary.json").is_file()
        and (path / "campaigns").is_dir()
        and not (path / "config.json").is_file()
    )


def eval_run_name(run_name: str, folder: str) -> str:
    """The name the viewer gives the evaluation campaigns ``eval/campaigns/<folder>/`` of a
    run (a name, not a path: it is one segment of the API's URLs)."""
    return f"{run_name}:eval:{folder}"


def eval_campaign_runs(root: Path, run: Path, base: Path | None = None) -> dict[str, Path]:
    """The evaluation campaign runs of ``run`` by their folder name (inside ``root`` only):
    the runs in ``base`` (default: the run's ``eval/campaigns``)."""
    base = run / EVAL_CAMPAIGNS if base is None else base
    out: dict[str, Path] = {}
    try:
        children = sorted(base.iterdir()) if base.is_dir() else []
    except OSError:
        return out
    for child in children:
        target = child.resolve()
        if target.is_relative_to(root) and (target / "config.json").is_file():
            out[child.name] = target
    return out


def run_summary(name: str, path: Path) -> dict[str, Any]:
    """What the runs list shows: the config's headline fields and the streams' sizes."""
    config = read_config(path)
    sizes = {}
    for stream in STREAMS:
        try:
            sizes[stream] = (path / f"{stream}.jsonl").stat().st_size
        except FileNotFoundError:
            sizes[stream] = 0
    keys = ("kind", "task", "agent", "created", "model", "steps")
    return {"name": name, **{k: config[k] for k in keys if k in config}, "bytes": sizes}


# ---- evaluations -------------------------------------------------------------------------


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (JSON has neither)."""
    if isinstance(value, float):
        return value if np.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def read_evaluation(run: Path, run_name: str | None = None) -> dict[str, Any] | None:
    """A run's evaluation as the viewer shows it, or None where it has none (or the summary
    cannot be read yet: a writer may be halfway through it).

    ``{"summary": <eval/summary.json>, "runs": {folder: run name}}``: ``runs`` names the
    evaluation campaign folders that are runs (``random``, ``random-impossible``, ...), as
    :func:`find_runs` lists them under ``run_name`` (default: the run folder's name).
    """
    path = run / EVAL_SUMMARY
    try:
        if path.stat().st_size > MAX_EVAL_BYTES:
            return None
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(summary, dict) or not isinstance(summary.get("agents"), dict):
        return None
    name = run_name if run_name is not None else run.resolve().name
    folders = eval_campaign_runs(run.resolve(), run.resolve())
    return {
        "summary": _finite(summary),
        "runs": {folder: eval_run_name(name, folder) for folder in folders},
    }


class EvaluationWatch:
    """Reads a run's evaluation again whenever ``eval/summary.json`` or its campaign folders
    change (size and modification time); :meth:`poll` says whether it did."""

    def __init__(self, run: Path, run_name: str | None = None) -> None:
        self.run, self.run_name = run, run_name
        self._signature: Any = None
        self._unreadable: Any = None
        self.evaluation: dict[str, Any] | None = None

    def _stat(self) -> Any:
        marks = []
        for path in (self.run / EVAL_SUMMARY, self.run / EVAL_CAMPAIGNS):
            try:
                st = path.stat()
                marks.append((st.st_size, st.st_mtime_ns))
            except OSError:
                marks.append(None)
        return tuple(marks)

    def poll(self) -> bool:
        """True when the evaluation shown should change (it appeared, changed or went)."""
        signature = self._stat()
        if signature in (self._signature, self._unreadable):
            return False
        evaluation = read_evaluation(self.run, self.run_name)
        if evaluation is None and signature[0] is not None:
            self._unreadable = signature  # there but unreadable (being written): wait for
            return False  # the next change
        self._signature = signature
        if evaluation == self.evaluation:
            return False
        self.evaluation = evaluation
        return True


# ---- structures ----------------------------------------------------------------------------


def artifact_path(run: Path, rel_path: str) -> Path:
    """The file of an artifact path a record lists; ValueError unless it resolves (symlinks
    followed) to a ``.npy`` file inside the run's ``artifacts/`` folder."""
    if not isinstance(rel_path, str) or not rel_path or "\x00" in rel_path:
        raise ValueError("not an artifact path")
    if os.path.isabs(rel_path):
        raise ValueError(f"{rel_path!r} is not a path inside the run")
    root = (run.resolve() / "artifacts").resolve()
    target = (run.resolve() / rel_path).resolve()
    if not target.is_relative_to(root) or target.suffix != ".npy" or not target.is_file():
        raise ValueError(f"{rel_path!r} is not an artifact of this run")
    return target


def load_structure(run: Path, artifacts: Mapping[str, str]) -> dict[str, Any]:
    """The structure behind a record (its ``measurement.artifacts`` paths) as viewer JSON."""
    arrays = {
        name: np.load(artifact_path(run, artifacts[name]), allow_pickle=False)
        for name in NAMES
        if name in artifacts
    }
    return structure_json(arrays)


def structure_json(arrays: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A structure's arrays (see :mod:`labtwin.structures`) as the viewer draws them.

    ``frames`` is ``(frames, n, 3)`` positions in ångström rounded to 1e-4 Å,
    ``cells`` one ``(3, 3)`` cell per frame (rows are lattice vectors) or one for all,
    ``bonds`` ``(i, j, order)`` rows. KeyError or ValueError for a malformed structure.
    """
    s = read_structure(arrays)
    if s.cell is not None and s.cell.shape[0] not in (1, s.n_frames):
        raise ValueError(f"{s.cell.shape[0]} cells for {s.n_frames} frames")
    if not np.all(np.isfinite(s.positions)):
        raise ValueError("positions must be finite")
    return {
        "numbers": s.numbers.tolist(),
        "frames": np.round(s.positions, 4).tolist(),
        "cells": None if s.cell is None else np.round(s.cell, 4).tolist(),
        "bonds": None if s.bonds is None else s.bonds.tolist(),
    }


def structure_size(structure: dict[str, Any]) -> int:
    """Numbers a structure's JSON holds (what a report budgets)."""
    frames = structure["frames"]
    return len(frames) * len(structure["numbers"]) * 3


def has_structure_paths(artifacts: Any) -> bool:
    return (
        isinstance(artifacts, dict) and "structure_numbers" in artifacts and POSITIONS in artifacts
    )
