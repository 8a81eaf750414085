"""bench/molecules.py --smoke: the descriptors stage with its ceiling column runs in seconds
and writes its markdown section (the figures are checked by the benchmark itself: every
parallel, cached and repeated round equals the first serial round)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_descriptors_smoke_run_writes_its_section_with_the_ceiling(tmp_path) -> None:
    out = tmp_path / "molecules.md"
    done = subprocess.run(
        [sys.executable, "bench/molecules.py", "--smoke", "--stages", "descriptors"]
        + ["--markdown", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("## Molecules per second through the molecule engine")
    assert "(`python bench/molecules.py --smoke --stages descriptors`)" in text
    header = next(line for line in text.splitlines() if line.startswith("| stage |"))
    row = next(line for line in text.splitlines() if line.startswith("| descriptors |"))
    assert header.endswith("| ceiling: 2 plain loops / 1 |")
    assert row.count("|") == header.count("|") and row.split("|")[-2].strip().endswith("x")
    assert "\nReading. descriptors: two workers measure " in text
    assert "repeated rounds equal the first serial round exactly" in text
