"""bench/validation.py: a run for some labs rewrites their sections, each stamped with the
date and CPU it was measured on, keeps the other registered labs' sections as they were,
and drops the sections of labs no longer registered (an old version of a lab)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KEPT = """<!-- lab:LJEquationOfState-v2 -->
## LJEquationOfState-v2

_Measured 2020-01-01 on an old CPU (1 cores), 5 s._

| a table measured long ago |
<!-- /lab -->
"""
GONE = """<!-- lab:MoleculeLibrary-v0 -->
## MoleculeLibrary-v0

No calibration points.
<!-- /lab -->
"""


def test_a_partial_run_stamps_its_sections_and_keeps_the_others(tmp_path, cpu_model: str) -> None:
    out = tmp_path / "validation.md"
    out.write_text("# Validation: calibrated error bars\n\n" + GONE + KEPT)
    done = subprocess.run(
        [
            *(sys.executable, "bench/validation.py", "--out", str(out)),
            *("--lab", "ArrheniusFit-v1", "--lab", "MoleculeLibrary-v3"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    today = datetime.date.today().isoformat()
    head, arrhenius = text.split("<!-- lab:ArrheniusFit-v1 -->\n")
    assert f"last on {today} for ArrheniusFit-v1, MoleculeLibrary-v3" in " ".join(head.split())
    assert f"_Measured {today} on {cpu_model} ({os.cpu_count()} cores), " in arrhenius
    assert "| ArrheniusFit-v1 |" in arrhenius and "all calibrated" in arrhenius
    assert KEPT in text  # the other lab's section, date and all, as it was
    # the old version's section is gone and the new one stands in its place; a lab new to
    # the page comes last
    assert "MoleculeLibrary-v0" not in text
    sections = [
        text.index(f"<!-- lab:{lab} -->")
        for lab in ("MoleculeLibrary-v3", "LJEquationOfState-v2", "ArrheniusFit-v1")
    ]
    assert sections == sorted(sections)
