"""A pool of worker processes that measures molecules, each with its own timeout.

``MoleculePool(n_workers).map(function, jobs, timeout_s)`` runs ``function(job)`` for
every job in the workers and returns one :class:`Outcome` per job, in order:

- jobs are dispatched in the order given, or, with ``costs`` (an estimate per job),
  costliest first (longest-processing-time-first: the big jobs start early and the
  small ones fill in, so the workers finish together); ties keep the order given, and
  the outcomes are in job order either way;
- with ``prefetch=k`` a worker holds up to ``k`` messages queued behind the one it runs, so
  that it starts the next the moment it finishes one instead of waiting for the caller
  to answer (for jobs of a few milliseconds, where the trip is a tenth of the job), except
  the batch's last messages (:data:`ENDGAME`), which wait for a free worker; the
  per-job rules below are the same, and queued jobs that never started when a worker is
  lost go back to the queue untouched (they are not retries);
- with ``chunk=k`` up to ``k`` consecutive jobs (in dispatch order) travel to a worker in
  one message and come back in one reply (one round trip and one wake-up of the caller
  for ``k`` jobs of a few milliseconds; the function is pickled once a batch, and a worker
  unpickles it again only when it changes). Chunks shrink as the batch
  goes (guided self-scheduling, Polychronopoulos & Kuck 1987): a message carries at most
  ``1 / (GUIDED * n_workers)`` of the work still to send, by ``costs`` where given, so
  the first messages are long and the last ones single jobs, and the workers finish
  together. Each job of a chunk keeps its own timeout (the worker clocks it; one
  that ran past ``timeout_s`` is failed as below). A chunk whose worker died or stalled
  (past ``timeout_s`` for each of its jobs) has its jobs run again one per message, so
  that the job that crashed or stalled the worker is failed alone, with its reason, and
  the rest are measured (a job is a pure function of its input: running it again gives
  the same value);
- with ``pull=True`` no job travels in a message of its own: each worker gets the batch
  once, and the workers take its jobs one at a time, costliest first, from a shared queue
  of tickets (a pipe all of them read, each read one job), so a worker that finishes a job
  starts the next one at once, wherever the others are, without a word to the caller; a
  worker sends back what it has measured when it finds the queue empty, and at least every
  :data:`FLUSH_S` seconds on the way (so a lost worker loses little). The caller wakes once
  per reply, which for a batch of jobs of a few milliseconds is once per worker. A job's
  clock is read from a slot of shared memory where its worker writes the job and when it
  started; a lost worker fails the job written there, and the jobs it measured but had not
  sent back run again (a job is a pure function of its input);
- a job's clock starts when its worker can start it: when it is sent to an idle worker,
  when the worker answers the message before it, or when a fresh worker says it is up
  (its start-up, its ``initializer`` and reading its first message, imports say, do not
  count; they have ``startup_timeout_s``); a worker answers each message once, and says
  once that it is up, so the caller wakes once per message;
- a job that runs past ``timeout_s`` has its worker killed; the job is ``failed`` with
  the reason, a new worker replaces the old one, and the other jobs go on;
- a worker that dies (``os._exit``, SIGSEGV in native code, SIGKILL from the
  out-of-memory killer) fails its job with the cause (:func:`labtwin.isolation.crash_reason`)
  and is replaced;
- an exception raised by ``function`` is a bug, not bad input, and is re-raised in the
  caller (after the batch, with the worker's traceback), as it would be in-process.

Workers are forked from a **forkserver**: a clean process started (like spawn) on first
use, which imports RDKit, tblite and the engine once (:mod:`._preload`) and forks a
worker per request. That keeps
what :mod:`labtwin.isolation` wants of spawn (nothing inherited from the caller: no
locks, thread pools or CUDA contexts) while a replacement worker starts in milliseconds
rather than re-importing labtwin, torch and RDKit for seconds; where there is no
forkserver (Windows), workers are spawned. Workers run with ``OMP_NUM_THREADS=1``, set
before tblite loads, so that xTB's sums are reproducible. A job that failed alone is not
retried: a retry would only run the same molecule into the same wall.
"""

from __future__ import annotations

import atexit
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import select
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labtwin.isolation import RemoteTraceback, crash_reason


def _context() -> multiprocessing.context.BaseContext:
    """The forkserver where there is one (POSIX), else spawn (see the module docs)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # the server imports these once; every worker forked from it starts with them loaded
    context.set_forkserver_preload(["labtwin.simulators.chem._preload"])
    return context


_CONTEXT = _context()
_UP = pickle.dumps(("up",))
#: with ``chunk``, one message carries at most ``1 / (GUIDED * n_workers)`` of the work not
#: yet sent (see the module docs); 1 is Polychronopoulos and Kuck's rule. Against 2: 9
#: messages instead of 16 for the 32 bench drugs' descriptors on 2 workers, and each reply
#: wakes the caller, which then competes with the workers for the cores (paired 1-worker /
#: 2-worker ratio, medians of 60 alternating batches in five runs: 1.96, 1.81, 1.94, 1.93,
#: 1.85x against 1.81, 1.69, 1.86, 1.77, 1.73x)
GUIDED = 1
#: with ``prefetch``, the last ``ENDGAME * n_workers`` messages are not queued behind a
#: running one: each goes to the first worker to be free, so that no worker sits idle at the
#: end while another still has a job queued (2 workers, 32 drugs' descriptors: 54.0 against
#: 55.9 ms and 56.0 against 61.0 ms a batch, medians of 40 alternating rounds)
ENDGAME = 1


#: with ``pull``, a worker sends back what it has measured at least this often (seconds of
#: work); a batch of descriptor jobs (tens of milliseconds a worker) comes back in one reply
#: per worker, an xTB job (seconds) as soon as it is done
FLUSH_S = 0.05
#: with ``pull``, the jobs one round puts in the ticket queue at most (4 bytes a ticket: 4 KiB,
#: which a pipe holds without blocking the caller: Linux's 64 KiB, macOS's 16 KiB); a longer
#: batch runs in rounds
ROUND_JOBS = 1024
_TICKET = 4  # bytes of one ticket: a job's position in its round, little-endian
#: where ``pull`` is possible: a pipe that several processes read with non-blocking reads
PULL = os.name == "posix"


def timed_out(timeout_s: float) -> str:
    """The reason of a job that ran past its timeout (the caller's or its worker's clock)."""
    return f"the measurement timed out after {timeout_s:g} s"


@dataclass(frozen=True)
class Outcome:
    """What became of one job: its ``value``, or ``failed`` with the reason."""

    value: Any = None
    failed: str = ""

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    #: the messages it holds, in order: each the indices of the jobs it carried (a chunk)
    jobs: list[list[int]] = field(default_factory=list)
    deadline: float = 0.0  # monotonic time by which it must answer for jobs[0]
    up: bool = False  # its start-up (initializer) is done: jobs[0] runs on its own clock
    #: shared with the process: ``[start, position]`` of the job it pulled and runs now
    #: (position -1: none), on the monotonic clock, which processes share
    slot: Any = None


class MoleculePool:
    """``n_workers`` reusable worker processes (started on first use); see the module docs."""

    def __init__(
        self,
        n_workers: int = 1,
        startup_timeout_s: float = 120.0,
        initializer: Callable[[], None] | None = None,
    ) -> None:
        if n_workers < 1:
            raise ValueError(f"n_workers must be at least 1, got {n_workers}")
        self.n_workers = int(n_workers)
        self.startup_timeout_s = float(startup_timeout_s)
        self.initializer = initializer
        self._idle: list[_Worker] = []
        self._owner_pid = os.getpid()
        self._tickets: tuple[Any, Any] | None = None  # the pull queue: (reader, writer)
        self._lock = threading.Lock()
        #: processes started so far (a replaced worker counts again); for tests and logs
        self.started_workers = 0
        _POOLS.add(self)

    def map(
        self,
        function: Callable[[Any], Any],
        jobs: list[Any],
        timeout_s: float,
        costs: Sequence[float] | None = None,
        prefetch: int = 0,
        chunk: int = 1,
        pull: bool = False,
    ) -> list[Outcome]:
        """``function(job)`` for each job in the workers (``function`` must pickle by
        reference: a module-level function); costliest job first where ``costs`` are
        given, up to ``prefetch`` messages queued per worker, up to ``chunk`` jobs a
        message, or with ``pull`` the workers taking the jobs from a shared queue (where
        :data:`PULL`; else one job a message); see the module docs."""
        if prefetch < 0:
            raise ValueError(f"prefetch must be at least 0, got {prefetch}")
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        jobs = list(jobs)
        order = list(range(len(jobs)))
        if costs is not None:
            if len(costs) != len(jobs):
                raise ValueError(f"{len(costs)} costs for {len(jobs)} jobs")
            order.sort(key=lambda i: -costs[i])  # stable: ties keep the order given
        with self._lock:
            if self._owner_pid != os.getpid():  # a forked copy: the workers are not ours
                self._idle, self._owner_pid, self._tickets = [], os.getpid(), None
            if pull and PULL:
                return self._pull(function, jobs, order, float(timeout_s))
            chunks = guided_chunks(order, costs, int(chunk), self.n_workers)
            return self._run(function, jobs, chunks, float(timeout_s), 1 + int(prefetch))

    def worker_pids(self) -> list[int]:
        """Process ids of the idle workers (for tests that kill one from outside)."""
        return [w.process.pid for w in self._idle if w.process.pid is not None]

    def close(self) -> None:
        """Stop every worker (a later call starts new ones)."""
        locked = self._lock.acquire(timeout=5.0)
        try:
            for worker in self._idle:
                _stop(worker, grace_s=1.0)
            self._idle = []
            if self._tickets is not None and self._owner_pid == os.getpid():
                for end in self._tickets:
                    end.close()
            self._tickets = None
        finally:
            if locked:
                self._lock.release()

    # ---- one batch ---------------------------------------------------------------------

    def _run(
        self,
        function: Callable,
        jobs: list[Any],
        chunks: list[list[int]],
        timeout_s: float,
        depth: int,
    ) -> list[Outcome]:
        outcomes: list[Outcome | None] = [None] * len(jobs)
        errors: list[tuple[int, BaseException, str]] = []
        waiting = chunks[::-1]  # pop() takes the next message in dispatch order
        busy: list[_Worker] = []
        poller = _Poller()
        pickled = pickle.dumps(function)  # once a batch, not once a message
        try:
            while waiting or busy:
                self._dispatch(pickled, jobs, waiting, busy, depth, timeout_s)
                now = time.monotonic()
                ready = poller.wait(busy, max(0.0, min(w.deadline for w in busy) - now))
                for worker in list(busy):
                    for index, outcome in self._check(worker, ready, timeout_s, errors, waiting):
                        outcomes[index] = outcome
                    if not worker.jobs:
                        busy.remove(worker)
                        if not worker.conn.closed and not _readable(worker.process.sentinel):
                            self._idle.append(worker)
                        elif not worker.conn.closed:  # ended after its last reply
                            _stop(worker)
                    elif worker.conn.closed:  # lost with messages queued that never started
                        busy.remove(worker)
                        waiting.extend(worker.jobs[::-1])  # next in line, in order
        except BaseException:  # interrupted: the busy workers' state is unknown
            for worker in busy:
                _stop(worker)
            raise
        if errors:
            index, err, text = errors[0]
            raise err from RemoteTraceback(f"job {index} in a molecule worker:\n{text}")
        return outcomes  # type: ignore[return-value]

    def _dispatch(
        self,
        function: bytes,
        jobs: list[Any],
        waiting: list[list[int]],
        busy: list[_Worker],
        depth: int,
        timeout_s: float,
    ) -> None:
        """Give waiting messages (with the pickled ``function``) to workers: a new worker
        while fewer than ``n_workers`` are busy, then queue on the least loaded one up to
        ``depth`` messages each, but the last :data:`ENDGAME` ``* n_workers`` messages only to a worker with none."""
        while waiting:
            if len(busy) < self.n_workers:
                worker = self._take_worker()
                busy.append(worker)
            else:
                worker = min(busy, key=lambda w: len(w.jobs))
                if len(worker.jobs) >= depth:
                    return
                if worker.jobs and len(waiting) <= ENDGAME * self.n_workers:
                    return  # the last messages go to whichever worker is free first
            indices = waiting.pop()
            payload = pickle.dumps(("run", function, [jobs[i] for i in indices], timeout_s))
            try:
                worker.conn.send_bytes(payload)
            except OSError:  # a worker killed from outside while idle: use a new one
                if worker.jobs:  # it holds jobs: its sentinel will tell what became of them
                    waiting.append(indices)
                    return
                _stop(worker)
                busy.remove(worker)
                worker = self._take_worker()
                busy.append(worker)
                worker.conn.send_bytes(payload)
            if not worker.jobs:  # an idle worker starts it now, a fresh one once it is up
                worker.deadline = time.monotonic() + (
                    timeout_s * len(indices) if worker.up else self.startup_timeout_s
                )
            worker.jobs.append(indices)

    def _check(
        self,
        worker: _Worker,
        ready: set,
        timeout_s: float,
        errors: list[tuple[int, BaseException, str]],
        waiting: list[list[int]],
    ) -> list[tuple[int, Outcome]]:
        """Outcomes of a busy worker's jobs available now, by job index. A worker that is
        lost (crashed, timed out, did not start) is stopped with its connection closed; its
        first message's job gets the outcome, or, for a chunk of several jobs, they go back
        to ``waiting`` one per message; the rest stay in ``worker.jobs`` unstarted."""
        done: list[tuple[int, Outcome]] = []
        ended = worker.process.sentinel in ready
        if worker.conn in ready:
            readable = True  # the poll said so for the first reply; after it, ask again
            while worker.jobs:
                try:
                    if not readable and not _readable(worker.conn):
                        break
                    readable = False
                    reply = pickle.loads(worker.conn.recv_bytes())
                except (EOFError, OSError):  # died mid-reply: its sentinel tells how
                    ended = True
                    break
                if reply[0] == "up":
                    worker.up = True
                    worker.deadline = time.monotonic() + timeout_s * len(worker.jobs[0])
                    continue
                indices = worker.jobs.pop(0)
                if worker.jobs:  # the next message, queued, runs from now
                    worker.deadline = time.monotonic() + timeout_s * len(worker.jobs[0])
                if reply[0] == "error":
                    _, err, text, position = reply
                    errors.append((indices[position], err, text))
                    failed = Outcome(failed="the measurement raised (re-raised in the caller)")
                    done.extend((index, failed) for index in indices)
                else:
                    late = set(reply[2])  # ran past the timeout on the worker's clock
                    for k, (index, value) in enumerate(zip(indices, reply[1])):
                        outcome = (
                            Outcome(failed=timed_out(timeout_s)) if k in late else Outcome(value)
                        )
                        done.append((index, outcome))
            if not worker.jobs:
                return done
        if ended:
            worker.process.join(5.0)
            failed = crash_reason(worker.process.exitcode)
        elif time.monotonic() >= worker.deadline:
            if worker.up:
                failed = timed_out(timeout_s)
            else:
                failed = f"the worker process did not start within {self.startup_timeout_s:g} s"
        else:
            return done
        _stop(worker)
        indices = worker.jobs.pop(0)
        if len(indices) == 1:
            done.extend((index, Outcome(failed=failed)) for index in indices)
        else:  # which job of the chunk was it? each again alone, next in line
            waiting.extend([index] for index in indices[::-1])
        return done

    def _take_worker(self) -> _Worker:
        while self._idle:
            worker = self._idle.pop()
            if not _readable(worker.process.sentinel):  # alive (exitcode, without a selector)
                return worker
            _stop(worker)  # died while idle
        parent_end, child_end = _CONTEXT.Pipe()
        slot = _CONTEXT.RawArray("d", 2)
        slot[1] = -1.0
        process = _CONTEXT.Process(
            target=_serve,
            args=(child_end, self.initializer, self._ticket_reader(), slot),
            name="labtwin-molecule",
        )
        process.start()
        child_end.close()
        self.started_workers += 1
        return _Worker(process, parent_end, slot=slot)

    def _ticket_reader(self) -> Any:
        """The read end of the pull queue every worker of this pool shares (``None``
        where there is no :data:`PULL`)."""
        if not PULL:
            return None
        if self._tickets is None:
            reader, writer = _CONTEXT.Pipe(duplex=False)
            os.set_blocking(reader.fileno(), False)  # the workers' too: one open file
            self._tickets = (reader, writer)
        return self._tickets[0]

    # ---- one batch, pulled from the shared queue ---------------------------------------

    def _pull(
        self, function: Callable, jobs: list[Any], order: list[int], timeout_s: float
    ) -> list[Outcome]:
        """:meth:`map` with ``pull``: rounds of up to :data:`ROUND_JOBS` jobs in dispatch
        order; the jobs a lost worker had measured but not sent back go into the next round
        (first), and a round that settles no job at all (every worker lost before it took
        one: a worker that does not start, say) fails its first job with the reason, so
        that every round settles one job at least."""
        outcomes: list[Outcome | None] = [None] * len(jobs)
        errors: list[tuple[int, BaseException, str]] = []
        pickled = pickle.dumps(function)  # once a batch
        waiting = list(order)
        while waiting and not errors:
            batch, waiting = waiting[:ROUND_JOBS], waiting[ROUND_JOBS:]
            lost = self._pull_round(pickled, jobs, batch, timeout_s, outcomes, errors)
            left = [i for i in batch if outcomes[i] is None]
            if len(left) == len(batch) and not errors:
                outcomes[left.pop(0)] = Outcome(failed=lost or "the worker was lost")
            waiting = left + waiting
        if errors:
            index, err, text = errors[0]
            raise err from RemoteTraceback(f"job {index} in a molecule worker:\n{text}")
        return outcomes  # type: ignore[return-value]

    def _pull_round(
        self,
        function: bytes,
        jobs: list[Any],
        batch: list[int],
        timeout_s: float,
        outcomes: list[Outcome | None],
        errors: list[tuple[int, BaseException, str]],
    ) -> str:
        """One round: the tickets of ``batch`` (its positions, in order) into the queue,
        the batch to up to ``n_workers`` workers, and their replies into ``outcomes``
        until each has found the queue empty or is lost. Returns the reason the last lost
        worker was lost ("" if none was)."""
        reader = self._ticket_reader()
        writer = self._tickets[1]  # type: ignore[index]
        _drain(reader)  # tickets an interrupted batch left behind
        tickets = memoryview(b"".join(p.to_bytes(_TICKET, "little") for p in range(len(batch))))
        while tickets:  # all of them before any worker reads (a write may be partial)
            tickets = tickets[os.write(writer.fileno(), tickets) :]
        payload = pickle.dumps(("pull", function, [jobs[i] for i in batch], timeout_s))
        busy: list[_Worker] = []
        lost = ""
        while len(busy) < min(self.n_workers, len(batch)):
            worker = self._take_worker()
            worker.slot[1] = -1.0
            try:
                worker.conn.send_bytes(payload)
            except OSError:  # killed from outside while idle: use a new one
                _stop(worker)
                continue
            worker.deadline = time.monotonic() + self.startup_timeout_s
            busy.append(worker)
        poller = _Poller()
        try:
            while busy:
                now = time.monotonic()
                wake = min(_pull_deadline(w, timeout_s, now) for w in busy)
                ready = poller.wait(busy, max(0.0, wake - now))
                for worker in list(busy):
                    done = False
                    if worker.conn in ready:
                        done = self._pull_replies(worker, batch, timeout_s, outcomes, errors)
                    if done:
                        busy.remove(worker)
                        if not _readable(worker.process.sentinel):
                            self._idle.append(worker)
                        else:
                            _stop(worker)
                        continue
                    reason = _pull_lost(worker, ready, timeout_s, self.startup_timeout_s)
                    if reason:
                        busy.remove(worker)
                        _stop(worker)
                        position = int(worker.slot[1])  # the job it ran (read once it ended)
                        if position >= 0 and outcomes[batch[position]] is None:
                            outcomes[batch[position]] = Outcome(failed=reason)
                        lost = reason
        except BaseException:  # interrupted: the busy workers' state is unknown
            for worker in busy:
                _stop(worker)
            raise
        return lost

    def _pull_replies(
        self,
        worker: _Worker,
        batch: list[int],
        timeout_s: float,
        outcomes: list[Outcome | None],
        errors: list[tuple[int, BaseException, str]],
    ) -> bool:
        """Read the replies a pulling worker has sent; whether it has found the queue
        empty (or raised: it takes no more jobs). A worker that ended mid-reply is left to
        :func:`_pull_lost`."""
        readable = True  # the poll said so for the first reply; after it, ask again
        while readable or _readable(worker.conn):
            readable = False
            try:
                reply = pickle.loads(worker.conn.recv_bytes())
            except (EOFError, OSError):
                return False
            if reply[0] == "up":
                worker.up = True
                continue
            tag, values, late = reply[:3]
            for position, value in values:
                outcomes[batch[position]] = Outcome(value)
            for position in late:
                outcomes[batch[position]] = Outcome(failed=timed_out(timeout_s))
            if tag == "error":
                _, _, _, err, text, position = reply
                errors.append((batch[position], err, text))
                outcomes[batch[position]] = Outcome(
                    failed="the measurement raised (re-raised in the caller)"
                )
            if tag != "part":
                return True
        return False


class _Poller:
    """:func:`multiprocessing.connection.wait` on the busy workers' pipes and sentinels,
    with one ``select.poll`` object kept while the busy workers stay the same (the loop of
    a batch wakes once per reply; building a selector each time was a third of its cost).
    Where there is no ``poll`` (Windows), :func:`multiprocessing.connection.wait`."""

    def __init__(self) -> None:
        self._key: tuple = ()
        self._poll: Any = None
        self._handles: dict[int, Any] = {}

    def wait(self, busy: list[_Worker], timeout_s: float) -> set:
        """The ready connections and sentinels of ``busy`` (empty after ``timeout_s``)."""
        handles = [w.conn for w in busy] + [w.process.sentinel for w in busy]
        if not hasattr(select, "poll"):
            return set(multiprocessing.connection.wait(handles, timeout_s))
        key = tuple(id(h) for h in handles)
        if key != self._key:
            self._poll, self._key = select.poll(), key
            self._handles = {}
            for handle in handles:
                fd = handle if isinstance(handle, int) else handle.fileno()
                self._handles[fd] = handle
                self._poll.register(fd, select.POLLIN)
        while True:
            try:
                events = self._poll.poll(math.ceil(timeout_s * 1000))
                break
            except InterruptedError:  # noqa: PERF203 - retried, as connection.wait does
                continue
        return {self._handles[fd] for fd, _ in events}


def _readable(handle: multiprocessing.connection.Connection | int) -> bool:
    """Whether a connection has data (or its other end closed), or a process sentinel is
    set (the process ended), now: ``conn.poll()`` or ``process.exitcode`` without
    building a selector (one ``poll`` call)."""
    if not hasattr(select, "poll"):
        return bool(multiprocessing.connection.wait([handle], 0))
    poll = select.poll()
    poll.register(handle if isinstance(handle, int) else handle.fileno(), select.POLLIN)
    return bool(poll.poll(0))


def _pull_deadline(worker: _Worker, timeout_s: float, now: float) -> float:
    """When the caller must look at a pulling worker again: the end of its start-up, or
    of the timeout of the job its slot shows, or (between jobs) ``timeout_s`` from now."""
    if not worker.up:
        return worker.deadline
    start, position = worker.slot[0], worker.slot[1]
    return start + timeout_s if position >= 0 else now + timeout_s


def _pull_lost(worker: _Worker, ready: set, timeout_s: float, startup_timeout_s: float) -> str:
    """Why a pulling worker is lost ("" if it is not): it ended, it did not start in
    time, or the job its slot shows has run past ``timeout_s`` (read twice, so that a job
    that has just ended is not taken for the next one)."""
    if worker.process.sentinel in ready or _readable(worker.process.sentinel):
        worker.process.join(5.0)
        return crash_reason(worker.process.exitcode)
    now = time.monotonic()
    if not worker.up:
        if now >= worker.deadline:
            return f"the worker process did not start within {startup_timeout_s:g} s"
        return ""
    start, position = worker.slot[0], worker.slot[1]
    if position < 0 or now < start + timeout_s:
        return ""
    if (worker.slot[0], worker.slot[1]) != (start, position):
        return ""  # it moved on between the two reads
    return timed_out(timeout_s)


def _drain(reader: Any) -> None:
    """Empty the pull queue (non-blocking reads until there is nothing)."""
    while True:
        try:
            if not os.read(reader.fileno(), 65536):
                return
        except BlockingIOError:
            return


def guided_chunks(
    order: list[int], costs: Sequence[float] | None, most: int, n_workers: int
) -> list[list[int]]:
    """``order`` cut into messages of consecutive jobs: each at most ``most`` jobs and, past
    its first job, at most ``1 / (GUIDED * n_workers)`` of the cost not yet cut (every job
    costs 1 without ``costs``)."""
    weight = [1.0] * len(order) if costs is None else [max(float(c), 0.0) for c in costs]
    left = sum(weight[i] for i in order)
    chunks: list[list[int]] = []
    at = 0
    while at < len(order):
        share = left / (GUIDED * n_workers)
        chunk, cost = [order[at]], weight[order[at]]
        at += 1
        while at < len(order) and len(chunk) < most and cost + weight[order[at]] <= share:
            chunk.append(order[at])
            cost += weight[order[at]]
            at += 1
        chunks.append(chunk)
        left -= cost
    return chunks


def _stop(worker: _Worker, grace_s: float = 0.0) -> None:
    """Close the pipe and end the process (killed if it does not exit within ``grace_s``)."""
    worker.conn.close()
    worker.process.join(grace_s)
    if worker.process.exitcode is None:
        worker.process.kill()
        worker.process.join(5.0)


def _serve(
    conn: multiprocessing.connection.Connection,
    initializer: Callable[[], None] | None,
    tickets: multiprocessing.connection.Connection | None = None,
    slot: Any = None,
) -> None:
    """A worker's loop: receive a message of jobs (and the pickled function, unpickled when
    it differs from the last message's), run them one after another, each on its own
    clock, and send back their results in one reply, with the positions of the jobs
    that ran past the timeout; or, for a ``"pull"`` message, take the jobs from the
    ``tickets`` queue (:func:`_pull_jobs`). Once, when ``initializer`` (imports, tables)
    has run and the first message is read (its function's module imported), say it is up:
    the start-up clock stops there."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the caller, which ends us
    os.environ["OMP_NUM_THREADS"] = "1"  # read when tblite's OpenMP runtime loads, below
    if initializer is not None:
        initializer()
    up = False
    pickled, function = b"", None  # the last message's function, unpickled once
    while True:
        try:
            data = conn.recv_bytes()
        except EOFError:
            return
        position = 0
        try:
            tag, blob, jobs, timeout_s = pickle.loads(data)
            if blob != pickled:
                function, pickled = pickle.loads(blob), blob
            if not up:
                conn.send_bytes(_UP)
                up = True
            if tag == "pull":
                _pull_jobs(conn, function, jobs, timeout_s, tickets, slot)
                continue
            values, late = [], []
            for position, job in enumerate(jobs):
                start = time.monotonic()
                values.append(function(job))
                if time.monotonic() - start > timeout_s:
                    late.append(position)
                    values[-1] = None
            reply = pickle.dumps(("done", values, late))
        except Exception as err:  # noqa: BLE001 - re-raised in the caller
            reply = _error_reply(err, position)
        conn.send_bytes(reply)


def _error_reply(err: Exception, position: int, head: tuple = ()) -> bytes:
    """The pickled ``("error", *head, err, traceback, position)`` reply; an exception that
    does not pickle and unpickle goes as a ``RuntimeError`` with its text."""
    text = traceback.format_exc()
    try:
        reply = pickle.dumps(("error", *head, err, text, position))
        pickle.loads(reply)
    except Exception:  # noqa: BLE001 - an exception that does not round-trip
        error = RuntimeError(f"{type(err).__name__}: {err}")
        reply = pickle.dumps(("error", *head, error, text, position))
    return reply


def _pull_jobs(
    conn: multiprocessing.connection.Connection,
    function: Callable,
    jobs: list[Any],
    timeout_s: float,
    tickets: multiprocessing.connection.Connection,
    slot: Any,
) -> None:
    """Take tickets (positions in ``jobs``) from the shared queue one at a time and run
    their jobs, each written into ``slot`` while it runs (its start, then its position),
    until the queue is empty; send back ``(position, value)`` pairs and the positions of
    the jobs that ran past the timeout, as ``"part"`` replies every :data:`FLUSH_S`
    seconds and a ``"done"`` reply at the end (``"error"`` with the pairs so far where
    ``function`` raised: the worker then takes no more)."""
    fd = tickets.fileno()
    values: list[tuple[int, Any]] = []
    late: list[int] = []
    flushed = time.monotonic()
    while True:
        try:
            ticket = os.read(fd, _TICKET)
        except BlockingIOError:  # the queue is empty: the round is done
            break
        position = int.from_bytes(ticket, "little")
        start = time.monotonic()
        slot[0] = start
        slot[1] = position
        try:
            value = function(jobs[position])
        except Exception as err:  # noqa: BLE001 - re-raised in the caller
            slot[1] = -1.0
            conn.send_bytes(_error_reply(err, position, head=(values, late)))
            return
        slot[1] = -1.0
        end = time.monotonic()
        if end - start > timeout_s:
            late.append(position)
        else:
            values.append((position, value))
        if end - flushed >= FLUSH_S:
            conn.send_bytes(pickle.dumps(("part", values, late)))
            values, late, flushed = [], [], end
    conn.send_bytes(pickle.dumps(("done", values, late)))


_POOLS: weakref.WeakSet[MoleculePool] = weakref.WeakSet()


def close_all() -> None:
    """Stop every pool's workers (registered to run at interpreter exit)."""
    for pool in list(_POOLS):
        pool.close()


atexit.register(close_all)
