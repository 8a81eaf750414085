"""Crash isolation: a lab's ``simulate`` in a worker process, with a timeout.

Native simulator code (OpenMM, warp, RDKit, xTB, Cantera, ASE calculators) can
segfault, hang or exhaust memory. A lab that sets ``isolation = True`` has
:meth:`labtwin.task.Task.run` send each batched ``simulate`` call to a
:class:`WorkerPool` instead of calling it in-process:

- a call runs in a reused worker process; its clock starts once the worker
  holds the inputs (so a fresh worker's imports do not count);
- when the worker dies (a signal such as SIGSEGV, or SIGKILL from the
  out-of-memory killer) or the call runs past ``timeout_s`` (the worker is
  killed), the worker is replaced and each experiment of the call is retried
  once *alone*, so one bad experiment does not fail its batch-mates;
- an experiment that crashes or times out again becomes
  ``Measurement.failed(reason)``; an exception raised by ``simulate`` is
  re-raised in the caller, as in-process (bugs still raise).

The task, experiments, conditions and generators are pickled with each call,
and the generators come back with their new state, so an isolated call
measures bit for bit what the in-process call measures.

The worker is a ``multiprocessing`` process started with the **spawn** method:
a forked child would inherit the parent's CUDA context (which CUDA forbids in a
child), OpenMP/torch thread pools and locks held by other threads, and can
deadlock; spawn starts a clean interpreter on every platform. Calls travel over
a ``multiprocessing`` pipe, waited on together with the process's sentinel.
``concurrent.futures.ProcessPoolExecutor`` is not used: on Python 3.11 it can
neither kill a hung worker nor tell which signal ended a dead one without its
private attributes (``terminate_workers`` arrives in 3.14).

A script that measures an isolated lab at import time needs the usual
``if __name__ == "__main__":`` guard, as for any spawn-based multiprocessing.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.connection  # also imports multiprocessing.util: see the atexit note
import os
import pickle
import signal
import threading
import time
import traceback
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from labtwin.measurement import Measurement

if TYPE_CHECKING:
    from labtwin.experiment import Experiment
    from labtwin.task import Task

_SPAWN = multiprocessing.get_context("spawn")  # why spawn: see the module docstring
_STARTED = pickle.dumps(("started",))


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker (the ``__cause__`` of the re-raise)."""

    def __str__(self) -> str:
        return str(self.args[0])


class WorkerPool:
    """Runs ``task.simulate`` calls in a worker process, one call at a time, with a timeout.

    The pool holds one worker process, started on the first call and reused
    by every call after it; a worker that crashed or was killed is replaced.
    ``startup_timeout_s`` bounds how long a worker may take to receive a call
    (start up, import the lab's modules, unpickle the inputs). Calls from
    several threads are served one after another. :meth:`close` stops the
    worker; every pool is closed at interpreter exit.
    """

    def __init__(self, startup_timeout_s: float = 120.0) -> None:
        self.startup_timeout_s = float(startup_timeout_s)
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: multiprocessing.connection.Connection | None = None
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        _POOLS.add(self)

    def simulate(
        self,
        task: Task,
        experiments: list[Experiment],
        conditions: list[dict[str, Any]],
        rngs: list[np.random.Generator],
        timeout_s: float | None,
    ) -> list[Measurement]:
        """``task.simulate(experiments, conditions, rngs)`` in the worker.

        ``timeout_s`` (seconds, None for no limit) bounds each call. After a
        crash or a timeout every experiment is retried once alone; one that
        fails again is returned as a ``failed`` measurement with the reason.
        """
        with self._lock:
            measured, failure = self._call(task, experiments, conditions, rngs, timeout_s)
            if failure is None:
                return measured
            out: list[Measurement] = []
            for experiment, condition, rng in zip(experiments, conditions, rngs):
                one, failure = self._call(task, [experiment], [condition], [rng], timeout_s)
                if failure is None:
                    out += one
                else:
                    out.append(Measurement.failed(f"{failure}; retried once alone"))
            return out

    def close(self) -> None:
        """Stop the worker (a later call starts a new one)."""
        locked = self._lock.acquire(timeout=5.0)  # at exit a daemon thread may hold it mid-call
        try:
            self._discard(grace_s=1.0)
        finally:
            if locked:
                self._lock.release()

    # ---- one call ----------------------------------------------------------------------

    def _call(
        self,
        task: Task,
        experiments: list[Experiment],
        conditions: list[dict[str, Any]],
        rngs: list[np.random.Generator],
        timeout_s: float | None,
    ) -> tuple[list[Measurement], str | None]:
        """One call in the worker: its measurements, or ``([], reason)`` if the worker died
        or ran out of time (it is then discarded)."""
        try:
            payload = pickle.dumps((task, experiments, conditions, rngs))
        except Exception as err:  # noqa: BLE001 - any pickling failure means the same
            raise TypeError(
                f"{type(task).__name__} cannot run isolated: its simulate call does not "
                f"pickle ({type(err).__name__}: {err}); set isolation = False for it"
            ) from err
        try:
            reply = self._exchange(payload, timeout_s)
        except BaseException:  # interrupted mid-call: the worker's state is unknown
            self._discard()
            raise
        if reply[0] == "error":
            raise reply[1] from RemoteTraceback(reply[2])
        if reply[0] == "failed":
            return [], reply[1]
        measured, returned = reply[1], reply[2]
        for rng, after in zip(rngs, returned):  # the caller's generators advance as in-process
            rng.bit_generator.state = after.bit_generator.state
        return measured, None

    def _exchange(self, payload: bytes, timeout_s: float | None) -> tuple:
        conn, process = self._worker()
        try:
            conn.send_bytes(payload)
        except OSError:  # the idle worker was killed from outside: start another
            self._discard()
            conn, process = self._worker()
            conn.send_bytes(payload)
        started = False
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait([conn, process.sentinel], remaining)
            if not ready:
                self._discard()
                if started:
                    return ("failed", f"the simulation timed out after {timeout_s:g} s")
                return (
                    "failed",
                    f"the simulator process did not start within {self.startup_timeout_s:g} s",
                )
            if conn in ready:
                try:
                    reply = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):  # the worker died: its sentinel tells how
                    reply = None
                if reply is not None and reply[0] == "started":
                    started = True
                    deadline = None if timeout_s is None else time.monotonic() + timeout_s
                    continue
                if reply is not None:
                    return reply
            process.join(5.0)
            reason = crash_reason(process.exitcode)
            self._discard()
            return ("failed", reason)

    # ---- the worker process ----------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """Process id of this pool's live worker (None before the first call or after one
        was killed)."""
        process = self._process
        alive = process is not None and process.exitcode is None and self._owner_pid == os.getpid()
        return process.pid if alive else None

    def _worker(
        self,
    ) -> tuple[multiprocessing.connection.Connection, multiprocessing.process.BaseProcess]:
        if self._owner_pid != os.getpid():  # a forked copy of the pool: the worker is not ours
            self._process, self._conn, self._owner_pid = None, None, os.getpid()
        if self._process is not None and self._process.exitcode is not None:
            self._discard()  # the idle worker was killed from outside (e.g. out of memory)
        if self._process is None or self._conn is None:
            parent_end, child_end = _SPAWN.Pipe()
            process = _SPAWN.Process(target=_serve, args=(child_end,), name="labtwin-simulator")
            process.start()
            child_end.close()  # so the worker sees EOF when this process goes away
            self._process, self._conn = process, parent_end
        return self._conn, self._process

    def _discard(self, grace_s: float = 0.0) -> None:
        """Close the pipe and end the worker: after ``grace_s`` seconds to exit on its own, kill it."""
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if conn is not None:
            conn.close()
        if process is not None and self._owner_pid == os.getpid():
            process.join(grace_s)
            if process.exitcode is None:
                process.kill()
                process.join(5.0)


def crash_reason(exitcode: int | None) -> str:
    """Why a worker process ended, in words (a negative exit code is the signal that ended it)."""
    if exitcode is None:
        return "the simulator process stopped answering"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        hint = ", e.g. by the out-of-memory killer" if name == "SIGKILL" else ""
        return f"the simulator process crashed (signal {name}{hint})"
    return f"the simulator process exited with code {exitcode}"


def _serve(conn: multiprocessing.connection.Connection) -> None:
    """The worker's loop: receive a call, say it started, run it, send back the outcome."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the caller, which ends us
    while True:
        try:
            data = conn.recv_bytes()
        except EOFError:  # the caller closed the pool or exited
            return
        try:
            task, experiments, conditions, rngs = pickle.loads(data)
            conn.send_bytes(_STARTED)
            measured = task.simulate(experiments, conditions, rngs)
            reply = pickle.dumps(("done", measured, rngs))
        except Exception as err:  # noqa: BLE001 - re-raised in the caller
            reply = _error_reply(err)
        conn.send_bytes(reply)


def _error_reply(err: Exception) -> bytes:
    text = traceback.format_exc()
    try:
        reply = pickle.dumps(("error", err, text))
        pickle.loads(reply)  # an exception class that does not round-trip becomes a RuntimeError
        return reply
    except Exception:  # noqa: BLE001
        return pickle.dumps(("error", RuntimeError(f"{type(err).__name__}: {err}"), text))


# ---- the process-wide pool that Task.run uses -------------------------------------------------

_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
_DEFAULT: WorkerPool | None = None
_DEFAULT_LOCK = threading.Lock()


def default_pool() -> WorkerPool:
    """The pool that isolated labs share, created on first use."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = WorkerPool()
        return _DEFAULT


def simulate_isolated(
    task: Task,
    experiments: list[Experiment],
    conditions: list[dict[str, Any]],
    rngs: list[np.random.Generator],
    timeout_s: float | None,
) -> list[Measurement]:
    """``task.simulate`` in the shared worker pool (see :meth:`WorkerPool.simulate`)."""
    return default_pool().simulate(task, experiments, conditions, rngs, timeout_s)


def close() -> None:
    """Stop every pool's worker (registered to run at interpreter exit)."""
    for pool in list(_POOLS):
        pool.close()


# multiprocessing.util registered its exit handler (which joins live children) on import,
# above; atexit runs handlers last-in first-out, so the workers are stopped before that join.
atexit.register(close)
