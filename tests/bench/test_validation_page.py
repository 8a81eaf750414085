"""bench/validation.py: a run for some labs rewrites their sections, each stamped with the
date and CPU it was measured on, and keeps the other labs' sections as they were."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KEPT = """<!-- lab:Kept-v0 -->
## Kept-v0

_Measured 2020-01-01 on an old CPU (1 cores), 5 s._

| a table measured long ago |
<!-- /lab -->
"""


def test_a_partial_run_stamps_its_sections_and_keeps_the_others(tmp_path, cpu_model: str) -> None:
    out = tmp_path / "validation.md"
    out.write_text("# Validation: calibrated error bars\n\n" + KEPT)
    done = subprocess.run(
        [sys.executable, "bench/validation.py", "--lab", "ArrheniusFit-v1", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    today = datetime.date.today().isoformat()
    head, arrhenius = text.split("<!-- lab:ArrheniusFit-v1 -->\n")
    assert f"last on {today} for ArrheniusFit-v1" in " ".join(head.split())
    assert f"_Measured {today} on {cpu_model} ({os.cpu_count()} cores), " in arrhenius
    assert "| ArrheniusFit-v1 |" in arrhenius and "all calibrated" in arrhenius
    assert KEPT in text  # the other lab's section, date and all, as it was
