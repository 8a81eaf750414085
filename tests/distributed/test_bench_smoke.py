"""``bench/ray_scale.py --smoke`` runs end to end (its records are checked equal inside)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "ray_scale.py"


def test_ray_scale_smoke_writes_its_section(tmp_path) -> None:
    out = tmp_path / "section.md"
    subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--markdown", str(out)],
        check=True,
        timeout=540,
        capture_output=True,
    )
    text = out.read_text()
    assert text.startswith(
        "## Lab steps on Ray lab workers vs one process (`python bench/ray_scale.py --smoke`)"
    )
    assert "| instant simulator | Ray, 2 workers |" in text and "Reading." in text
    assert "per-step overhead" in text and "weight sync" in text
