"""One self-contained HTML file of a run: the viewer's views with data and assets inlined.

``labtwin report runs/<run> -o report.html`` (or :func:`write_report`) writes a
page that opens from disk with networking off: the vendored 3Dmol.js and uPlot,
the viewer's script, every JSONL line of the run, and the structures of its
records. Structures are inlined up to :data:`MAX_STRUCTURE_NUMBERS` numbers in
all (each campaign's best experiment first, then the rest in order); the page
says how many were left out. A run that ``labtwin eval`` evaluated carries its
``eval/summary.json`` too (the page's Evaluation section).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from labtwin.rendering.viewer.page import inline_page
from labtwin.rendering.viewer.reader import (
    RunReader,
    has_structure_paths,
    load_structure,
    read_evaluation,
    structure_size,
)

#: positions (x, y, z counted separately) a report inlines at most (about 8 bytes each)
MAX_STRUCTURE_NUMBERS = 2_000_000


def report_data(
    run: str | os.PathLike, max_structure_numbers: int = MAX_STRUCTURE_NUMBERS
) -> dict[str, Any]:
    """Everything a report page shows: config, every stream's lines, the structures, the
    evaluation (None where the run has none)."""
    path = Path(run)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a labtwin run (no config.json)")
    reader = RunReader(path)
    lines = reader.read_all()
    structures, omitted = _structures(path, lines["records"], max_structure_numbers)
    return {
        "name": path.resolve().name,
        "config": reader.config(),
        "lines": lines,
        "structures": structures,
        "structures_omitted": omitted,
        "evaluation": read_evaluation(path),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _structures(
    path: Path, records: list[dict[str, Any]], budget: int
) -> tuple[dict[str, Any], int]:
    """Structures by their positions path, each campaign's best record first, within budget."""
    with_structure = [
        r for r in records if has_structure_paths((r.get("measurement") or {}).get("artifacts"))
    ]
    best: dict[Any, dict[str, Any]] = {}
    for r in with_structure:
        score = r.get("score")
        c = r.get("campaign")
        if isinstance(score, (int, float)) and (
            c not in best or score > (best[c].get("score") or float("-inf"))
        ):
            best[c] = r
    ordered = list(best.values()) + [r for r in with_structure if r not in best.values()]
    out: dict[str, Any] = {}
    used = omitted = 0
    for r in ordered:
        artifacts = r["measurement"]["artifacts"]
        key = artifacts["structure_positions"]
        if key in out:
            continue
        try:
            structure = load_structure(path, artifacts)
        except (KeyError, ValueError, OSError):
            omitted += 1
            continue
        size = structure_size(structure)
        if used + size > budget:
            omitted += 1
            continue
        used += size
        out[key] = structure
    return out, omitted


def report_html(run: str | os.PathLike, **kwargs: Any) -> str:
    data = report_data(run, **kwargs)
    task = str(data["config"].get("task", "run")).removeprefix("labtwin/")
    return inline_page(data, f"labtwin report · {task} · {data['name']}")


def write_report(run: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the report of ``run`` to ``out`` (default ``<run>/report.html``)."""
    out = Path(out) if out is not None else Path(run) / "report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(report_html(run), encoding="utf-8")
    tmp.replace(out)
    return out
