"""Warp started once, without its start-up banner and its note that the machine has no
NVIDIA driver.

Warp's log level goes from its default (info) to warnings, unless the user set another:
no start-up banner and no line per loaded module on the console (``warp.config.quiet``
of earlier Warp versions is gone; Warp 1.19 reads ``log_level``).

Warp's native start-up writes ``Warp CUDA warning: Could not find or load the NVIDIA CUDA
driver. GPU execution will not be available.`` to the process's standard error on every
Linux machine without an NVIDIA driver: on a CPU machine it is the first line a user
sees from ``labtwin train`` or a test run, and it asks for nothing (labtwin picks the
CPU there by itself). Warp writes it from C, past its log level and Python's
``sys.stderr``, so :func:`init_warp` runs Warp's first initialisation with file
descriptor 2 sent to a temporary file and writes back everything Warp wrote there except
that line. Every other line, a real error included, reaches standard error as written.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

#: the start of the one line that is dropped
NO_DRIVER = "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"

_lock = threading.Lock()
_started = False


def init_warp() -> Any:
    """``warp``, initialised (``warp.init()``; the first time at warning level, where the
    user left Warp's default, and without the no-driver line)."""
    global _started
    import warp as wp

    with _lock:
        if not _started:
            if wp.config.log_level == wp.LOG_INFO:  # Warp's default: the user chose nothing
                wp.config.log_level = wp.LOG_WARNING
            without_no_driver_line(wp.init)
            _started = True
    return wp


def without_no_driver_line(start: Callable[[], Any]) -> Any:
    """``start()`` with what it writes to file descriptor 2 passed on, less the lines that
    begin with :data:`NO_DRIVER`."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            return start()
        finally:
            sys.stderr.flush()  # Python's own writes during start(), into the file too
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [
                line for line in text.splitlines(keepends=True) if not line.startswith(NO_DRIVER)
            ]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
