"""Warp starts without its banner and without the no-driver line, and nothing else it
writes is lost."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labtwin.simulators.warp_runtime import NO_DRIVER, without_no_driver_line

DRIVER_LINE = NO_DRIVER + ". GPU execution will not be available.\n"


def test_only_the_no_driver_line_is_dropped(capfd) -> None:
    def start() -> str:
        os.write(2, b"before\n" + DRIVER_LINE.encode() + b"Warp CUDA error: something real\n")
        print("python's own", file=sys.stderr)
        return "started"

    assert without_no_driver_line(start) == "started"
    err = capfd.readouterr().err
    assert NO_DRIVER not in err
    assert "before\n" in err and "Warp CUDA error: something real\n" in err


def test_an_error_in_the_start_passes_through_and_stderr_comes_back(capfd) -> None:
    def start() -> None:
        os.write(2, b"last words\n")
        raise RuntimeError("no start")

    with pytest.raises(RuntimeError, match="no start"):
        without_no_driver_line(start)
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "last words\nafter\n"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )


def test_labtwin_starts_warp_quietly_where_plain_warp_does_not() -> None:
    """Plain Warp prints its banner (and, without an NVIDIA driver, the no-driver line on
    standard error); labtwin's first use of Warp prints neither."""
    plain = _run("import warp; warp.init()")
    ours = _run("from labtwin.simulators.md.lj_warp import default_device; print(default_device())")
    assert "initialized" in plain.stdout
    assert ours.stdout.strip() in ("cpu", "cuda") and ours.stderr == ""
