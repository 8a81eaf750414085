"""Fixtures of the benchmark-runner tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cpu_model() -> str:
    """The benchmarks' name for this machine's CPU (``bench/_report.py``: the benchmarks are
    scripts, not modules of the package, so it is asked in a process of its own)."""
    return subprocess.run(
        [sys.executable, "-c", "import _report; print(_report.cpu_model())"],
        cwd=ROOT / "bench",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
