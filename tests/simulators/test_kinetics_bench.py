"""bench/kinetics.py --smoke runs and writes its markdown section (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_kinetics_benchmark_writes_its_section(tmp_path: Path) -> None:
    out = tmp_path / "kinetics.md"
    done = subprocess.run(
        [sys.executable, "bench/kinetics.py", "--smoke", "--markdown", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("## Batch-reactor kinetics")
    assert "(`python bench/kinetics.py --smoke`)" in text
    assert "initialized" not in text and "load on device" not in text  # no Warp log lines
    for n in (1, 8):
        assert re.search(rf"^\| {n} \| cpu \| [\d,]+ \| \d+ \| [\d,]+ \| [\d,.]+x \|", text, re.M)
    # the matched accuracy is stated and labtwin's error is within its stated bound
    error = float(re.search(r"labtwin \(rtol [^)]*\) ([\d.e+-]+);", text).group(1))
    assert 0 < error < 1e-9
    assert "Reading." in text
