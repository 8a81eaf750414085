"""Batches of ignition cases in worker processes, with a timeout per case.

:class:`IgnitionPool` holds ``workers`` spawned processes, each a
:class:`labtwin.isolation.WorkerPool` (the project's one crash-isolation mechanism), and
sends every case to a free one, alone, from a thread per worker. So

- a case whose worker segfaults or is killed, or that runs past ``timeout_s``, is retried
  once alone in a fresh worker (``WorkerPool``'s rule) and then becomes a ``failed``
  :class:`~labtwin.simulators.combustion.ignition.IgnitionResult` with the reason, while
  the other cases of the batch are measured;
- a case's result does not depend on its batch: it is integrated alone, from its own
  state, with the same settings wherever it runs.

Results are cached by ``(case, settings)``: the integration is deterministic, so a repeat
of a case (the seeds of one calibration point, a repeated experiment) is integrated once.
Only finished integrations are cached (ignited, no ignition, or a failure Cantera
reported), never a crash or a timeout, which a later call tries again.

``workers=0`` integrates in this process, one case after another, without isolation
(for benchmarks and debugging). A script that uses worker processes at import time needs
the usual ``if __name__ == "__main__":`` guard of spawn-based multiprocessing.
"""

from __future__ import annotations

import queue
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from labtwin.isolation import WorkerPool
from labtwin.measurement import Measurement
from labtwin.simulators.combustion.ignition import (
    DEFAULT_SETTINGS,
    IgnitionCase,
    IgnitionResult,
    SolverSettings,
    gas,
    ignite,
)

Integrator = Callable[[IgnitionCase, SolverSettings], IgnitionResult]


class CaseRunner:
    """What a worker process runs: ``integrator`` over each case (the shape of call a
    :class:`~labtwin.isolation.WorkerPool` makes: ``simulate(items, conditions, rngs)``;
    here the items are cases, the conditions their settings, and no generator is used).

    ``integrator`` must be a module-level function, so that it pickles by name."""

    def __init__(self, integrator: Integrator = ignite) -> None:
        self.integrator = integrator

    def __setstate__(self, state: dict) -> None:
        """Unpickled in a worker: load Cantera and GRI-Mech there and then, before the
        worker reports the call started, so a case's timeout counts its integration only
        (a fresh worker's imports count against the pool's start-up allowance)."""
        self.__dict__.update(state)
        gas()

    def simulate(
        self,
        cases: Sequence[IgnitionCase],
        settings: Sequence[SolverSettings],
        rngs: Sequence[np.random.Generator],
    ) -> list[IgnitionResult]:
        return [self.integrator(case, s) for case, s in zip(cases, settings)]


class IgnitionPool:
    """Integrates batches of cases in ``workers`` worker processes (see the module docstring).

    ``timeout_s`` bounds one attempt at one case (wall-clock seconds from the moment its
    worker holds it); ``integrator`` replaces :func:`ignite` (tests use it to crash a
    worker); ``cache_size`` results are kept, the least recently used dropped first.
    """

    def __init__(
        self,
        workers: int = 2,
        timeout_s: float = 120.0,
        integrator: Integrator = ignite,
        cache_size: int = 4096,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.workers = int(workers)
        self.timeout_s = float(timeout_s)
        self.runner = CaseRunner(integrator)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[IgnitionCase, SolverSettings], IgnitionResult] = (
            OrderedDict()
        )
        self._idle: queue.SimpleQueue[WorkerPool] = queue.SimpleQueue()
        self._pools = [WorkerPool() for _ in range(self.workers)]
        for pool in self._pools:
            self._idle.put(pool)

    def run(
        self, cases: Sequence[IgnitionCase], settings: SolverSettings = DEFAULT_SETTINGS
    ) -> list[IgnitionResult]:
        """The result of every case, in order (each distinct case integrated at most once)."""
        keys = [(case, settings) for case in cases]
        todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
        fresh = {}
        for key, (result, finished) in zip(todo, self._integrate([k[0] for k in todo], settings)):
            fresh[key] = result
            if finished:
                self._remember(key, result)
        out = []
        for key in keys:
            out.append(fresh[key] if key in fresh else self._cache[key])
            if key in self._cache:
                self._cache.move_to_end(key)
        return out

    def close(self) -> None:
        """Stop the worker processes (a later :meth:`run` starts them again)."""
        for pool in self._pools:
            pool.close()

    def __enter__(self) -> IgnitionPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict:  # a copy of the pool gets its own workers and cache
        return {
            "workers": self.workers,
            "timeout_s": self.timeout_s,
            "integrator": self.runner.integrator,
            "cache_size": self.cache_size,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    # ---- integration -------------------------------------------------------------------

    def _remember(self, key: tuple[IgnitionCase, SolverSettings], result: IgnitionResult) -> None:
        self._cache[key] = result
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _integrate(
        self, cases: list[IgnitionCase], settings: SolverSettings
    ) -> list[tuple[IgnitionResult, bool]]:
        """Each case's result, and whether its integration finished (not a crash or hang)."""
        if not cases:
            return []
        if self.workers == 0:
            return [(r, True) for r in self.runner.simulate(cases, [settings] * len(cases), [])]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(cases))) as threads:
            return list(threads.map(lambda case: self._one(case, settings), cases))

    def _one(self, case: IgnitionCase, settings: SolverSettings) -> tuple[IgnitionResult, bool]:
        pool = self._idle.get()
        try:
            (result,) = pool.simulate(
                self.runner, [case], [settings], [np.random.default_rng(0)], self.timeout_s
            )
        finally:
            self._idle.put(pool)
        if isinstance(result, Measurement):  # the worker crashed or hung, twice
            return IgnitionResult.failed(result.reason), False
        return result, True
