"""Test labs for lab workers: the real batch reactor, slowed down or booby-trapped.

An experiment at exactly ``CRASH_K`` segfaults the process that simulates it (a
read of address 0 in native code), one at ``HANG_K`` sleeps for an hour;
:class:`SlowReactor` takes ``SLOW_S`` per batched call, so that a test can kill
its worker in the middle of a step. :class:`SlowStartEngine` is a generation engine that
does not come up when it finds the file ``SLOW_START_MARKER`` (which it removes).
"""

from __future__ import annotations

import ctypes
import os
import resource
import time

from labtwin.agents.ray_generation import GenerationEngine
from labtwin.tasks.reactor import BatchReactor

CRASH_K = 333.0
HANG_K = 366.0
SLOW_S = 0.8
#: the next :class:`SlowStartEngine` to start after this file is made hangs in its build
SLOW_START_MARKER = "/tmp/labtwin-test-generation-slow-start"


def reactor_run(temperature_K: float) -> dict[str, float]:
    return {
        "temperature_K": temperature_K,
        "time_min": 30.0,
        "feed_conc_mol_L": 0.5,
        "catalyst_mol_pct": 1.0,
    }


class SlowReactor(BatchReactor):
    def simulate(self, experiments, conditions, rngs):
        time.sleep(SLOW_S)
        return super().simulate(experiments, conditions, rngs)


class TrappedReactor(BatchReactor):
    """Segfaults at ``CRASH_K``, hangs at ``HANG_K``; otherwise the batch reactor."""

    def simulate(self, experiments, conditions, rngs):
        temperatures = {e.temperature_K for e in experiments}
        if CRASH_K in temperatures:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
            ctypes.string_at(0)  # SIGSEGV in native code
        if HANG_K in temperatures:
            time.sleep(3600)
        return super().simulate(experiments, conditions, rngs)


class SlowStartEngine(GenerationEngine):
    """A generation engine whose build hangs for an hour if ``SLOW_START_MARKER`` exists
    (a stuck start: a driver waiting for a GPU, a model load that never ends); the engine
    that finds the file removes it, so only the next engine to start hangs."""

    def __init__(self, parts, cfg) -> None:
        try:
            os.remove(SLOW_START_MARKER)
        except FileNotFoundError:
            pass
        else:
            time.sleep(3600)
        super().__init__(parts, cfg)
