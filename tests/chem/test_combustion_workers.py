"""Ignition cases in worker processes: a crash or a hang fails that case, the batch goes on.

The integrator below is the real engine with a booby trap: a case at exactly ``CRASH_K``
segfaults its worker, one at ``HANG_K`` sleeps for an hour. It is a module-level function,
so a spawned worker imports it from this module (pytest puts tests/chem on ``sys.path``,
and a spawned child gets the parent's ``sys.path``).
"""

from __future__ import annotations

import os
import resource
import signal
import time

import pytest

import labtwin
from labtwin.simulators.combustion import IgnitionCase, IgnitionPool, SolverSettings, ignite
from labtwin.tasks.combustion import IgnitionDelay

CRASH_K = 1333.0
HANG_K = 1366.0
TIMEOUT_S = 5.0  # a case integrates in < 0.5 s on an idle core; the hang costs 2 of these

pytestmark = pytest.mark.timeout(180)  # a broken timeout must not hang the suite for an hour


def booby_trapped(case: IgnitionCase, settings: SolverSettings):
    if case.temperature_K == CRASH_K:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        os.kill(os.getpid(), signal.SIGSEGV)
    if case.temperature_K == HANG_K:
        time.sleep(3600)
    return ignite(case, settings)


def shot(temperature_K: float, fuel: str = "CH4") -> dict:
    return {
        "fuel": fuel,
        "equivalence_ratio": 1.0,
        "temperature_K": temperature_K,
        "pressure_atm": 5.0,
        "diluent": "N2",
        "diluent_fraction": 0.72,
    }


def test_a_crash_and_a_hang_fail_their_cases_and_the_batch_is_measured() -> None:
    lab = IgnitionDelay()
    lab.engine = IgnitionPool(workers=2, timeout_s=TIMEOUT_S, integrator=booby_trapped)
    batch = [shot(1300.0), shot(CRASH_K), shot(1500.0, "H2"), shot(HANG_K), shot(1400.0)]
    started = time.monotonic()
    measured = lab.measure(batch, seed=3)
    elapsed = time.monotonic() - started
    assert [m.status for m in measured] == ["ok", "failed", "ok", "failed", "ok"]
    assert "crashed (signal SIGSEGV)" in measured[1].reason
    assert "retried once alone" in measured[1].reason
    assert f"timed out after {TIMEOUT_S:g} s" in measured[3].reason
    # the hang cost two timeouts (one retry), not an hour; worker restarts take seconds
    assert elapsed < 2 * TIMEOUT_S + 60
    # the survivors are what an untrapped lab measures at the same seeds
    clean = IgnitionDelay(workers=0).measure(batch, seed=3)
    for i in (0, 2, 4):
        assert measured[i] == clean[i]
    # a crash is not cached: the trapped case crashes again on the next call, and the
    # pool still serves the healthy ones
    again = lab.measure([shot(CRASH_K), shot(1300.0)], seed=3)
    assert [m.status for m in again] == ["failed", "ok"]
    lab.engine.close()


def test_results_do_not_depend_on_the_batch_or_the_worker() -> None:
    """A shot measured alone, in a batch, in a fresh lab, in process or in a worker reads
    the same at the same seed (the engine is deterministic; the noise is the shot's own)."""
    pooled = IgnitionDelay(workers=2)
    serial = IgnitionDelay(workers=0)
    shots = [shot(1250.0), shot(1450.0, "C2H6"), shot(1600.0, "H2")]
    conditions = [pooled.nominal_conditions()] * 3
    seeds = [11, 12, 13]
    together = pooled.run(shots, conditions, seeds)
    assert all(m.ok for m in together)
    for i in range(3):
        alone = serial.run([shots[i]], [conditions[i]], [seeds[i]])[0]
        assert alone == together[i]
    assert pooled.run(shots[::-1], conditions, seeds[::-1]) == together[::-1]
    pooled.engine.close()


def test_a_repeated_case_is_integrated_once() -> None:
    calls = []
    pool = IgnitionPool(workers=0, integrator=lambda c, s: calls.append(c) or ignite(c, s))
    case = IgnitionCase("H2", 1.0, 1300.0, 1.0)
    first = pool.run([case, case, case])
    second = pool.run([case])
    assert calls == [case] and first == [second[0]] * 3
    longer = pool.run([case], SolverSettings(window_s=0.05))  # other settings: integrated
    assert len(calls) == 2 and longer[0].delay_s == first[0].delay_s


def test_the_lab_pickles_with_its_engine() -> None:
    import pickle

    lab = labtwin.load_task("IgnitionDelay-v1", workers=1)
    copy = pickle.loads(pickle.dumps(lab))
    assert copy.engine.workers == 1 and copy.engine is not lab.engine
