"""Jobs the molecule workers pull from a shared queue (``MoleculePool.map(..., pull=True)``,
what the engine does for descriptors): outcomes in job order, costliest first, every
worker taking jobs, and each job keeping its own timeout and crash isolation; what a lost
worker had measured but not sent back is measured again, and what it had sent back is not.
"""

from __future__ import annotations

import os
import time

import pytest

import labtwin.simulators.chem.workers as workers
from labtwin.isolation import RemoteTraceback
from labtwin.simulators.chem.workers import FLUSH_S, MoleculePool

pytestmark = pytest.mark.skipif(not workers.PULL, reason="no shared queue on this platform")


def pid_of(job: tuple[str, float]) -> tuple[str, int]:
    """``(name, worker pid)`` after sleeping ``seconds``; the name ``"crash"`` ends the worker
    process (a native crash), ``"stall"`` sleeps for a minute."""
    name, seconds = job
    if name == "crash":
        os._exit(3)
    time.sleep(60.0 if name == "stall" else seconds)
    return name, os.getpid()


def stamp(job: None) -> float:
    """When the worker ran the job (the monotonic clock, which processes share)."""
    return time.monotonic()


def raise_on_three(job: int) -> int:
    if job == 3:
        raise ZeroDivisionError("a bug in job three")
    return job


def exit_at_start() -> None:
    """A worker initializer that ends the process before it is up."""
    os._exit(4)


def test_pulled_outcomes_come_back_in_order_from_every_worker() -> None:
    pool = MoleculePool(n_workers=2)
    try:
        jobs = [(f"job {i}", 0.005) for i in range(40)]
        outcomes = pool.map(pid_of, jobs, timeout_s=30.0, pull=True)
        started = pool.started_workers
    finally:
        pool.close()
    assert [o.value[0] for o in outcomes] == [name for name, _ in jobs]
    assert len({o.value[1] for o in outcomes}) == 2 and started == 2


def test_the_costliest_jobs_are_taken_first() -> None:
    """One worker takes the jobs in the order of their costs, largest first (ties in the
    order given): the order of the times the jobs ran at."""
    pool = MoleculePool(n_workers=1)
    try:
        outcomes = pool.map(stamp, [None] * 5, timeout_s=30.0, costs=[1, 5, 3, 5, 0], pull=True)
    finally:
        pool.close()
    stamps = [o.value for o in outcomes]
    assert sorted(range(5), key=stamps.__getitem__) == [1, 3, 2, 0, 4]


def test_a_crash_fails_its_job_alone_and_the_unsent_jobs_before_it_run_again() -> None:
    """A worker measures three quick jobs (not yet sent back: less than ``FLUSH_S``) and
    crashes on the fourth: that one is failed with the cause, and the three are measured
    again, with the fifth, by its replacement."""
    pool = MoleculePool(n_workers=1)
    try:
        jobs = [("a", 0.0), ("b", 0.0), ("c", 0.0), ("crash", 0.0), ("d", 0.0)]
        outcomes = pool.map(pid_of, jobs, timeout_s=30.0, costs=[5, 4, 3, 2, 1], pull=True)
        started = pool.started_workers
    finally:
        pool.close()
    assert outcomes[3].failed == "the simulator process exited with code 3"
    measured = [o.value for o in outcomes[:3] + outcomes[4:]]
    assert [name for name, _ in measured] == ["a", "b", "c", "d"]
    assert len({pid for _, pid in measured}) == 1  # all by the replacement
    assert started == 2


def test_what_a_worker_sent_back_before_it_crashed_is_kept() -> None:
    """Jobs longer than ``FLUSH_S`` are sent back as they finish: a crash after them
    costs only the crashed job; the jobs after it run on the replacement."""
    pool = MoleculePool(n_workers=1)
    try:
        slow = 2 * FLUSH_S
        jobs = [("a", slow), ("b", slow), ("crash", 0.0), ("c", 0.0)]
        outcomes = pool.map(pid_of, jobs, timeout_s=30.0, costs=[4, 3, 2, 1], pull=True)
    finally:
        pool.close()
    assert outcomes[2].failed == "the simulator process exited with code 3"
    (_, first), (_, second), (_, replacement) = (o.value for o in outcomes[:2] + outcomes[3:])
    assert first == second != replacement


def test_a_stalled_job_is_killed_on_its_own_clock_and_the_rest_are_measured() -> None:
    pool = MoleculePool(n_workers=2)
    try:
        pool.map(pid_of, [("up", 0.0)] * 2, timeout_s=30.0, pull=True)  # both workers up
        jobs = [("quick", 0.0)] * 3 + [("stall", 0.0)] + [("quick", 0.01)] * 20
        start = time.monotonic()
        outcomes = pool.map(pid_of, jobs, timeout_s=0.5, pull=True)
        elapsed = time.monotonic() - start
    finally:
        pool.close()
    assert outcomes[3].failed == "the measurement timed out after 0.5 s"
    assert all(o.ok for k, o in enumerate(outcomes) if k != 3)
    assert 0.5 <= elapsed < 5.0


def test_a_bug_raises_in_the_caller_naming_its_job() -> None:
    pool = MoleculePool(n_workers=2)
    try:
        with pytest.raises(ZeroDivisionError, match="job three") as raised:
            pool.map(raise_on_three, list(range(8)), timeout_s=30.0, pull=True)
        outcomes = pool.map(raise_on_three, [0, 1, 2], timeout_s=30.0, pull=True)
    finally:
        pool.close()
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "job 3 in a molecule worker" in str(raised.value.__cause__)
    assert [o.value for o in outcomes] == [0, 1, 2]  # the next batch, on the same workers


def test_a_long_batch_runs_in_rounds(monkeypatch) -> None:
    monkeypatch.setattr(workers, "ROUND_JOBS", 7)
    pool = MoleculePool(n_workers=2)
    try:
        outcomes = pool.map(raise_on_three, list(range(4, 40)), timeout_s=30.0, pull=True)
    finally:
        pool.close()
    assert [o.value for o in outcomes] == list(range(4, 40))


def test_workers_that_never_start_fail_one_job_a_round() -> None:
    """Every worker ends before it is up: each round settles one job, with the cause, so
    the batch ends."""
    pool = MoleculePool(n_workers=2, initializer=exit_at_start)
    try:
        outcomes = pool.map(raise_on_three, [0, 1, 2], timeout_s=30.0, pull=True)
    finally:
        pool.close()
    assert [o.failed for o in outcomes] == ["the simulator process exited with code 4"] * 3
