"""Crash isolation: a segfault or a hang in ``simulate`` becomes a failed measurement.

The labs below are the real batch reactor with a booby trap: an experiment at
exactly ``CRASH_K`` segfaults its process, one at ``HANG_K`` sleeps for an
hour. They are module-level classes, so the spawned worker imports them from
this module (pytest puts tests/core on ``sys.path``, and a spawned child gets
the parent's ``sys.path``).
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import threading
import time

import numpy as np
import pytest

import labtwin
from labtwin.isolation import RemoteTraceback, crash_reason, default_pool, simulate_isolated
from labtwin.tasks.reactor import BatchReactor  # by class, so that an id bump leaves this alone

CRASH_K = 333.0  # an experiment at this temperature segfaults the simulator
HANG_K = 366.0  # ... and one at this temperature never returns
TIMEOUT_S = 1.5  # short, so that the hang test stays within seconds

pytestmark = pytest.mark.timeout(120)  # a broken timeout must not hang the suite for an hour


def reactor_run(temperature_K: float) -> dict[str, float]:
    return {
        "temperature_K": temperature_K,
        "time_min": 30.0,
        "feed_conc_mol_L": 0.5,
        "catalyst_mol_pct": 1.0,
    }


class SegfaultingReactor(BatchReactor):
    isolation = True

    def simulate(self, experiments, conditions, rngs):
        if any(e.temperature_K == CRASH_K for e in experiments):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().simulate(experiments, conditions, rngs)


class HangingReactor(BatchReactor):
    isolation = True
    simulation_timeout_s = TIMEOUT_S

    def simulate(self, experiments, conditions, rngs):
        if any(e.temperature_K == HANG_K for e in experiments):
            time.sleep(3600)
        return super().simulate(experiments, conditions, rngs)


class BuggyReactor(BatchReactor):
    isolation = True

    def simulate(self, experiments, conditions, rngs):
        if any(e.temperature_K == CRASH_K for e in experiments):
            raise ValueError("a bug in the lab")
        return super().simulate(experiments, conditions, rngs)


class UnpicklableReactor(BatchReactor):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # a lock does not pickle


def worker_pids() -> set[int]:
    """The live worker of the pool that isolated labs share (other pools, such as the
    combustion lab's, keep workers of their own that are not counted)."""
    pid = default_pool().pid
    return set() if pid is None else {pid}


def test_every_builtin_lab_pickles(task_id: str) -> None:
    lab = labtwin.load_task(task_id)
    copy = pickle.loads(pickle.dumps(lab))
    assert type(copy) is type(lab) and copy.budget == lab.budget


def test_isolated_equals_in_process_bit_for_bit() -> None:
    lab = BatchReactor()
    rng = np.random.default_rng(0)
    experiments = [lab.random_experiment(rng) for _ in range(6)]
    expected = lab.measure(experiments, seed=11)
    lab.isolation = True  # an instance may switch isolation on
    assert lab.measure(experiments, seed=11) == expected
    pids = worker_pids()
    assert lab.measure(experiments, seed=11) == expected
    assert worker_pids() == pids and len(pids) == 1  # the worker is reused, not respawned

    # the generators come back advanced exactly as an in-process call leaves them
    conditions = [lab.nominal_conditions()] * 3
    in_process = [np.random.default_rng(s) for s in (1, 2, 3)]
    isolated = [np.random.default_rng(s) for s in (1, 2, 3)]
    assert lab.simulate(experiments[:3], conditions, in_process) == simulate_isolated(
        lab, experiments[:3], conditions, isolated, timeout_s=30.0
    )
    assert [g.bit_generator.state for g in isolated] == [g.bit_generator.state for g in in_process]


def test_segfault_fails_only_its_experiment_and_the_campaign_goes_on() -> None:
    slots, seeds = [0, 1, 2], [1, 2, 3]
    batch = labtwin.CampaignBatch(SegfaultingReactor(budget=3), 3)
    reference = labtwin.CampaignBatch(BatchReactor(budget=3), 3)  # in-process, no trap
    batch.reset(slots, seeds)
    reference.reset(slots, seeds)
    first = [reactor_run(340.0), reactor_run(CRASH_K), reactor_run(350.0)]
    records, expected = batch.step(slots, first), reference.step(slots, first)

    crashed = records[1].measurement
    assert crashed.status == "failed"
    assert "crashed (signal SIGSEGV)" in crashed.reason and "retried once" in crashed.reason
    assert crashed.experiment == expected[1].measurement.experiment  # what was run is kept
    assert records[1].score == BatchReactor.invalid_score and records[1].reward == 0.0
    assert records[0] == expected[0] and records[2] == expected[2]  # batch-mates measured

    second = [reactor_run(345.0)] * 3
    records, expected = batch.step(slots, second), reference.step(slots, second)
    assert [r.measurement for r in records] == [r.measurement for r in expected]
    assert records[0] == expected[0] and records[2] == expected[2]
    assert len(worker_pids()) == 1  # the crashed worker was replaced by one


def test_hang_times_out_and_the_env_goes_on() -> None:
    default_pool().close()  # time a fresh worker's start-up (spawn + imports), under this load
    start = time.monotonic()
    HangingReactor().measure([reactor_run(340.0)])
    startup_s = time.monotonic() - start

    env = labtwin.LabEnv(HangingReactor(budget=3))
    env.reset(seed=4)
    lab = HangingReactor()
    start = time.monotonic()
    measured = lab.measure([reactor_run(340.0), reactor_run(HANG_K)], seed=9)
    elapsed = time.monotonic() - start
    expected = BatchReactor().measure([reactor_run(340.0), reactor_run(HANG_K)], seed=9)

    assert measured[0] == expected[0]
    assert measured[1].status == "failed"
    assert f"timed out after {TIMEOUT_S:g} s" in measured[1].reason
    # the batch call and the retry alone each wait out the timeout; the two workers started
    # after the kills do their imports off the clock
    assert 2 * TIMEOUT_S <= elapsed < 2 * TIMEOUT_S + 2 * startup_s + 5.0, (elapsed, startup_s)
    assert worker_pids() == set()  # both hung workers were killed (the next call starts one)

    _, _, _, _, info = env.step(reactor_run(HANG_K))
    assert info["status"] == "failed" and "timed out" in info["measurement"].reason
    _, reward, done, _, info = env.step(reactor_run(350.0))
    assert info["status"] == "ok" and info["experiments_done"] == 2 and not done and reward > 0


def test_an_exception_in_simulate_is_raised_as_in_process() -> None:
    lab = BuggyReactor()
    lab.measure([reactor_run(340.0)])
    pids = worker_pids()
    with pytest.raises(ValueError, match="a bug in the lab") as raised:
        lab.measure([reactor_run(340.0), reactor_run(CRASH_K)])
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "BuggyReactor" not in str(raised.value) and "simulate" in str(raised.value.__cause__)
    assert worker_pids() == pids  # an exception does not cost the worker


def test_a_lab_that_does_not_pickle_runs_in_process_and_says_why_it_cannot_be_isolated() -> None:
    lab = UnpicklableReactor()
    assert lab.measure([reactor_run(340.0)])[0].ok
    lab.isolation = True
    with pytest.raises(TypeError, match="cannot run isolated"):
        lab.measure([reactor_run(340.0)])


def test_crash_reasons_name_the_signal() -> None:
    assert crash_reason(-signal.SIGSEGV) == "the simulator process crashed (signal SIGSEGV)"
    assert "out-of-memory killer" in crash_reason(-signal.SIGKILL)
    assert crash_reason(3) == "the simulator process exited with code 3"
