"""bench/run_all.py: one command runs the benchmarks and writes the results file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_all(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_all.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_runner_writes_each_section_with_its_command_and_keeps_the_others(
    tmp_path, cpu_model: str
) -> None:
    out = tmp_path / "RESULTS.md"
    done = run_all("--smoke", "--only", "combustion", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("# Benchmark results")
    assert "cores" in text and "Versions: torch" in text
    assert "<!-- bench: combustion -->" in text
    assert "(`python bench/combustion.py --smoke`)" in text  # how to run it alone
    assert "| in process, serial |" in text  # the benchmark's own table
    assert "load average (1, 5, 15 min)" in text
    # each section's stamp names the CPU it ran on (kept sections may come from others),
    # and the head which sections this run measured
    assert f"s on {cpu_model} ({os.cpu_count()} cores); load average" in text
    assert "It measured combustion; the other sections are kept" in text
    # a second partial run replaces its own section and keeps the first one's
    out.write_text(text.replace("| in process, serial |", "| in process, serial (old) |"))
    done = run_all("--smoke", "--only", "generation", "-o", str(out), "--vllm-python", "")
    assert done.returncode == 0, done.stderr
    again = out.read_text()
    assert "| in process, serial (old) |" in again
    assert "<!-- bench: generation -->" in again
    assert again.index("<!-- bench: generation -->") < again.index("<!-- bench: combustion -->")


def test_smoke_results_never_overwrite_the_results_file() -> None:
    before = (ROOT / "bench" / "RESULTS.md").read_text()
    done = run_all("--smoke", "--only", "combustion")
    assert done.returncode != 0 and "--output" in done.stderr
    assert (ROOT / "bench" / "RESULTS.md").read_text() == before
