"""bench/md_lj.py --smoke runs and writes its markdown section (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_md_bench_smoke_writes_a_markdown_section(tmp_path: Path) -> None:
    out = tmp_path / "md.md"
    subprocess.run(
        [sys.executable, "bench/md_lj.py", "--smoke", "--markdown", str(out)],
        cwd=ROOT,
        check=True,
        timeout=300,
        capture_output=True,
    )
    text = out.read_text()
    assert text.splitlines()[0].startswith("## ")
    assert "(`python bench/md_lj.py --smoke`)" in text.splitlines()[0]
    rows = [line for line in text.splitlines() if line.startswith("| 4 x 108 |")]
    assert rows[0].split("|")[2].strip().startswith("labtwin WarpLJ")
    # every peer is either timed or reported missing, never silently dropped
    engines = " ".join(row.split("|")[2] for row in rows)
    for peer in ("LAMMPS", "OpenMM", "TorchSim", "ASE"):
        assert peer in engines
    assert "Reading." in text
