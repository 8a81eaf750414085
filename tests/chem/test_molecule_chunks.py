"""Jobs sent to the molecule workers several to a message (``chunk``): each job keeps its own
timeout and crash isolation, and chunked, single and cached results are the same."""

from __future__ import annotations

import os
import time

import pytest

from labtwin.isolation import RemoteTraceback
from labtwin.simulators.chem import MoleculeEngine
from labtwin.simulators.chem.engine import CHUNK, Job, measure_job
from labtwin.simulators.chem.workers import MoleculePool, guided_chunks

# small drug-like molecules of different sizes (descriptors: milliseconds each)
MOLECULES = [
    "CC(=O)Oc1ccccc1C(=O)O",
    "CC(C)Cc1ccc(cc1)C(C)C(=O)O",
    "CC(=O)Nc1ccc(O)cc1",
    "Cn1cnc2c1c(=O)n(C)c(=O)n2C",
    "CN(C)C(=N)NC(=N)N",
    "CN1CCC[C@H]1c1cccnc1",
    "Nc1ccc(cc1)S(N)(=O)=O",
    "NNC(=O)c1ccncc1",
    "CCN(CC)CC(=O)Nc1c(C)cccc1C",
    "COc1cc(Cc2cnc(N)nc2N)cc(OC)c1OC",
    "OCC(O)CO",
    "c1ccccc1O",
    "CCO",
    "CC(C)NCC(O)COc1cccc2ccccc12",
    "Cc1ncc([N+](=O)[O-])n1CCO",
    "OC(=O)Cc1ccccc1Nc1c(Cl)cccc1Cl",
]


def echo_or_crash(job: str) -> str:
    """The job itself, except ``"crash"``, which ends the worker (a native crash)."""
    if job == "crash":
        os._exit(3)
    return job


def sleep_for(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def pid_after(seconds: float) -> int:
    """The worker's process id, after ``seconds``."""
    time.sleep(seconds)
    return os.getpid()


def raise_on_three(job: int) -> int:
    if job == 3:
        raise ZeroDivisionError("a bug in job three")
    return job


def test_chunks_shrink_to_single_jobs_as_the_batch_goes() -> None:
    """Guided self-scheduling: a message carries at most half (two workers) of the cost
    still to send, and at most ``most`` jobs; every job is sent once, in order."""
    chunks = guided_chunks(list(range(16)), None, 8, 2)
    assert [i for c in chunks for i in c] == list(range(16))
    assert [len(c) for c in chunks] == [8, 4, 2, 1, 1]
    costs = [1.0] * 8 + [8.0, 8.0, 2.0, 2.0]
    order = [8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7]  # costliest first
    # two workers, 28 to send: 8 + 8 is more than 28 / 2, so 8 goes alone; 20 / 2 = 10
    # takes 9 and 10; 10 / 2 = 5 takes 11, 0, 1, 2; then shares of 2.5, 1.5, 1, 0.5
    assert guided_chunks(order, costs, 8, 2) == [
        [8],
        [9, 10],
        [11, 0, 1, 2],
        [3, 4],
        [5],
        [6],
        [7],
    ]
    # one worker: the whole cost left may go in one message, so ``most`` cuts it
    assert guided_chunks(order, costs, 8, 1) == [[8, 9, 10, 11, 0, 1, 2, 3], [4, 5, 6, 7]]
    assert [len(c) for c in guided_chunks(list(range(40)), None, 8, 2)] == [8, 8, 8, 8, 4, 2, 1, 1]
    assert guided_chunks([2, 0, 1], None, 1, 2) == [[2], [0], [1]]  # chunk=1: one job each


def test_a_chunk_whose_worker_crashed_is_measured_again_one_by_one() -> None:
    pool = MoleculePool(n_workers=1)
    try:
        jobs = ["a", "crash", "b", "c", "d", "e", "f", "g"]
        outcomes = pool.map(echo_or_crash, jobs, timeout_s=30.0, chunk=4)
        restarted = pool.started_workers
    finally:
        pool.close()
    assert [o.value for o in outcomes] == ["a", None, "b", "c", "d", "e", "f", "g"]
    assert outcomes[1].failed == "the simulator process exited with code 3"
    assert [o.ok for o in outcomes].count(False) == 1
    # the first worker, one after the chunk ["a", "crash", "b", "c"] was lost (8 jobs on 1
    # worker: the first message takes all it may, 4 of them), one after "crash" alone
    assert guided_chunks(list(range(8)), None, 4, 1)[0] == [0, 1, 2, 3] and restarted == 3


def test_a_stalled_job_of_a_chunk_times_out_alone() -> None:
    """A chunk is stopped once it has run longer than its jobs' timeouts together; then each
    of its jobs runs alone, and only the stalled one is failed, on its own timeout."""
    pool = MoleculePool(n_workers=1)
    try:
        pool.map(sleep_for, [0.0], timeout_s=30.0)  # the worker up (start-up not timed)
        start = time.monotonic()
        delays = [0.0, 60.0, 0.1, 0.0] + [0.0] * 12  # 16 jobs: 4 a message
        outcomes = pool.map(sleep_for, delays, timeout_s=0.5, chunk=4)
        elapsed = time.monotonic() - start
    finally:
        pool.close()
    assert [o.failed for o in outcomes[:4]] == ["", "the measurement timed out after 0.5 s", "", ""]
    assert [o.value for o in outcomes] == [0.0, None, *delays[2:]]
    assert elapsed < 10.0  # the chunk's 2 s, the job's 0.5 s alone, two new workers


def test_a_job_of_a_chunk_past_its_timeout_is_failed_by_the_worker_clock() -> None:
    """A job that finishes, but later than its timeout, inside a chunk whose total is within
    bounds is failed as it would be alone; the worker lives on."""
    pool = MoleculePool(n_workers=1)
    try:
        delays = [0.0, 0.7] + [0.0] * 10  # 12 jobs: 3 a message
        outcomes = pool.map(sleep_for, delays, timeout_s=0.5, chunk=3)
        restarted = pool.started_workers
    finally:
        pool.close()
    assert [bool(o.failed) for o in outcomes] == [False, True] + [False] * 10
    assert outcomes[1].failed == "the measurement timed out after 0.5 s"
    assert restarted == 1


def test_the_last_message_goes_to_the_first_free_worker_not_behind_a_long_job() -> None:
    """With prefetch, the batch's last messages are not queued behind a running one: the
    third job waits for the first worker to be free (the one that ran the short job), not
    in the queue of the worker busy with the long one."""
    from labtwin.simulators.chem.workers import ENDGAME

    assert ENDGAME >= 1
    pool = MoleculePool(n_workers=2)
    try:
        pool.map(pid_after, [0.0, 0.0], timeout_s=30.0)  # both workers up
        long, short, last = pool.map(pid_after, [0.6, 0.05, 0.0], timeout_s=30.0, prefetch=1)
    finally:
        pool.close()
    assert long != short and last == short


def test_a_bug_in_a_chunk_raises_in_the_caller_naming_its_job() -> None:
    pool = MoleculePool(n_workers=1)
    try:
        with pytest.raises(ZeroDivisionError, match="job three") as raised:
            pool.map(raise_on_three, list(range(8)), timeout_s=30.0, chunk=8)
        with pytest.raises(ValueError, match="chunk"):
            pool.map(raise_on_three, [0], timeout_s=1.0, chunk=0)
    finally:
        pool.close()
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "job 3 in a molecule worker" in str(raised.value.__cause__)


def test_chunked_single_and_cached_descriptors_are_identical() -> None:
    """A batch of descriptor jobs (chunks on two workers) equals each molecule measured
    alone (one job, one message) and the cache's answers, every value bit for bit."""
    assert CHUNK["descriptors"] > 1 and CHUNK["xtb"] == 1
    chunked, alone = MoleculeEngine(n_workers=2), MoleculeEngine(n_workers=1, cache_size=0)
    try:
        batch = chunked.measure(MOLECULES, "descriptors")
        singles = [alone.measure([s], "descriptors")[0] for s in MOLECULES]
        computed = chunked.computed
        hits = chunked.measure(MOLECULES[::-1], "descriptors")
        assert chunked.computed == computed
    finally:
        chunked.close()
        alone.close()
    assert all(r.ok for r in batch), [r.reason for r in batch if not r.ok]
    assert batch == singles and hits == batch[::-1]
    settings = chunked.settings
    for smiles, result in zip(MOLECULES[:3], batch):  # and the job run in this process
        direct = measure_job(Job(result.canonical, "descriptors", settings))
        assert result.values == direct.values and result.smiles == smiles


def crash_on_benzene(job: Job):
    """A worker's job that ends the worker process on benzene (a test hook)."""
    if job.canonical == "c1ccccc1":
        os._exit(3)
    return measure_job(job)


def test_an_engine_chunk_with_a_crashing_molecule_measures_the_others() -> None:
    engine = MoleculeEngine(n_workers=1, job_function=crash_on_benzene)
    reference = MoleculeEngine(n_workers=1, cache_size=0)
    batch = [*MOLECULES[:8], "c1ccccc1", *MOLECULES[8:]]
    try:
        results = engine.measure(batch, "descriptors")
        expected = reference.measure(batch, "descriptors")
    finally:
        engine.close()
        reference.close()
    lost = batch.index("c1ccccc1")
    assert results[lost].status == "failed" and results[lost].smiles == "c1ccccc1"
    assert results[lost].reason == "the simulator process exited with code 3"
    assert results[:lost] + results[lost + 1 :] == expected[:lost] + expected[lost + 1 :]
    assert "c1ccccc1" not in engine._hits["descriptors"]  # a failure is not an answer to keep
