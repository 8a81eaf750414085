"""Lab workers on a local Ray cluster: the same records as one process, and failures.

Every test compares a :class:`RayCampaignBatch` with an ordinary
:class:`CampaignBatch` run of the same seeds and proposals, record for record
(``Record.__eq__``: measurement, score, reward, proposal, confirmation), so the
reference is the local engine itself, not stored numbers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from ray_labs import CRASH_K, HANG_K, SLOW_S, SlowReactor, TrappedReactor, reactor_run

import labtwin
from labtwin.campaign import CampaignBatch
from labtwin.distributed import RETRIED, RayCampaignBatch
from labtwin.runs import RunStore, load

pytestmark = pytest.mark.timeout(300)


def proposals_for(task, rng, n):
    """Random experiments, with an out-of-range one now and then (an ``invalid`` record)."""
    out = [task.random_experiment(rng).model_dump(mode="json") for _ in range(n)]
    if rng.random() < 0.5:
        out[int(rng.integers(n))] = {**out[0], "temperature_K": -5.0}
    return out


def run_both(task, ray_batch, seeds, steps, rng, tmp_path):
    """The same campaigns on ``ray_batch`` and locally; both batches record to run stores."""
    n = len(seeds)
    with RunStore(tmp_path / "local", {}) as a, RunStore(tmp_path / "ray", {}) as b:
        local = CampaignBatch(task, n, recorder=a)
        ray_batch.recorder = b
        local.reset(seeds=seeds)
        ray_batch.reset(seeds=seeds)
        for _ in range(steps):
            live = [i for i in range(n) if not local.campaigns[i].done]
            props = proposals_for(task, rng, len(live))
            assert ray_batch.step(live, props) == local.step(live, props)
    return local, load(tmp_path / "local"), load(tmp_path / "ray")


def test_two_workers_give_the_local_records(ray_cluster, tmp_path) -> None:
    """BatchReactor-v1, 5 campaigns on 2 workers (shards of 3 and 2), to the end of the
    budget (the closing confirmations included), and then a second round of campaigns."""
    task = labtwin.load_task("BatchReactor-v1", budget=4)
    rng = np.random.default_rng(7)
    with RayCampaignBatch(task, 5, workers=2, task_spec=("BatchReactor-v1", {"budget": 4})) as rb:
        assert [len(s) for s in rb.shards] == [3, 2]
        assert len({info["pid"] for info in rb.worker_info}) == 2
        local, run_a, run_b = run_both(task, rb, [11, 12, 13, 14, 15], 4, rng, tmp_path)
        assert all(c.done for c in rb.campaigns)
        assert [c.result_score for c in rb.campaigns] == [c.result_score for c in local.campaigns]
        assert rb.campaigns[0].confirmed_score is not None
        np.testing.assert_array_equal(rb.observation(4), local.observation(4))
        assert [r.to_dict(False) for r in run_b.records] == [
            r.to_dict(False) for r in run_a.records
        ]
        assert run_b.campaigns.keys() == run_a.campaigns.keys()
        # campaigns reset without seeds draw them from the slot streams, as locally
        local.recorder = rb.recorder = None  # the stores are closed
        local.reset([1, 3])
        rb.reset([1, 3])
        assert [rb.campaigns[i].seed for i in (1, 3)] == [local.campaigns[i].seed for i in (1, 3)]
        props = proposals_for(task, rng, 2)
        assert rb.step([3, 1], props) == local.step([3, 1], props)
        assert rb.replacements == []


def test_worker_killed_mid_step_is_replaced_and_its_experiments_retried(
    ray_cluster, tmp_path
) -> None:
    """SIGKILL of a worker's process while it simulates: the step completes with the
    records a healthy worker gives (the replacement got the campaigns' first steps from
    the ledger: the confirmations that close them match too)."""
    task = SlowReactor(budget=2)
    rng = np.random.default_rng(3)
    with RayCampaignBatch(task, 4, workers=2, timeout_s=120) as rb:
        with RunStore(tmp_path / "ray", {}) as store:
            rb.recorder = store
            local = CampaignBatch(task, 4)
            local.reset(seeds=[1, 2, 3, 4])
            rb.reset(seeds=[1, 2, 3, 4])
            first = proposals_for(task, rng, 4)
            assert rb.step(range(4), first) == local.step(range(4), first)
            victim = rb.worker_info[1]["pid"]
            killer = threading.Timer(SLOW_S / 3, os.kill, (victim, signal.SIGKILL))
            killer.start()
            second = [reactor_run(t) for t in (320.0, 330.0, 340.0, 350.0)]
            records = rb.step(range(4), second)
            killer.join()
            assert records == local.step(range(4), second)
            assert all(r.measurement.ok for r in records)
            assert [w for w, _ in rb.replacements] == [1]
            assert "the lab worker process died" in rb.replacements[0][1]
            assert rb.worker_info[1]["pid"] != victim
        stored = load(tmp_path / "ray").records
        expected = [r for c in local.campaigns for r in c.history]
        key = lambda r: (r.campaign, r.step)  # noqa: E731
        assert sorted(
            (r.to_dict(False) for r in stored), key=lambda d: (d["campaign"], d["step"])
        ) == [r.to_dict(False) for r in sorted(expected, key=key)]


@pytest.mark.slow  # four worker replacements, each a new process that imports the lab (~5 s)
def test_segfault_and_hang_become_failed_after_one_retry(ray_cluster, tmp_path) -> None:
    """In one step a worker segfaults in native code and the other hangs past the timeout:
    their batch-mates are retried alone and equal the healthy lab's measurements; the two
    trapped experiments are ``failed`` with the reason; the campaigns go on as locally."""
    task = TrappedReactor(budget=3)
    healthy = labtwin.load_task("BatchReactor-v1", budget=3)  # the same lab without traps
    rng = np.random.default_rng(5)
    with RunStore(tmp_path / "ray", {}) as store:
        with RayCampaignBatch(task, 4, workers=2, timeout_s=3.0, recorder=store) as rb:
            local = CampaignBatch(healthy, 4)
            local.reset(seeds=[21, 22, 23, 24])
            rb.reset(seeds=[21, 22, 23, 24])
            first = proposals_for(task, rng, 4)
            assert rb.step(range(4), first) == local.step(range(4), first)
            trapped = [reactor_run(t) for t in (310.0, CRASH_K, HANG_K, 350.0)]
            records = rb.step(range(4), trapped)
            expected = local.step(range(4), trapped)
            assert records[0] == expected[0] and records[3] == expected[3]
            crashed, hung = records[1].measurement, records[2].measurement
            assert crashed.status == hung.status == "failed"
            assert crashed.reason.startswith("the lab worker process died (")
            assert hung.reason == f"the lab worker timed out after 3 s; {RETRIED}"
            assert RETRIED in crashed.reason
            assert crashed.experiment == expected[1].measurement.experiment  # the seed was spent
            assert crashed.provenance["seed"] == expected[1].measurement.provenance["seed"]
            assert sorted(w for w, _ in rb.replacements) == [0, 0, 1, 1]
            last = proposals_for(task, rng, 4)
            after = rb.step(range(4), last)
            assert [r.measurement for r in after] == [
                r.measurement for r in local.step(range(4), last)
            ]
    stored = load(tmp_path / "ray").records
    assert len(stored) == 12 and [r.measurement.status for r in stored[4:8]].count("failed") == 2


def test_labtwin_run_on_ray_records_what_the_local_run_records(ray_cluster, tmp_path) -> None:
    """A structure lab, locally (``run_campaigns``) and through ``labtwin run --ray auto
    --lab-workers 2`` on the running cluster: the run stores hold equal records."""
    from labtwin.cli import app
    from labtwin.runner import run_campaigns

    run_campaigns("LJClusterAnneal-v0", "random", 3, 4, tmp_path / "local", False, budget=2)
    args = ["run", "LJClusterAnneal-v0", "--campaigns", "3", "--seed", "4", "--budget", "2"]
    args += ["--out", str(tmp_path / "ray"), "--no-progress", "--ray", "auto", "--lab-workers", "2"]
    with pytest.raises(SystemExit) as done:
        app(args)
    assert not done.value.code
    a, b = load(tmp_path / "local"), load(tmp_path / "ray")
    assert len(a.records) == 6 and all(r.measurement.ok for r in a.records)
    assert [r.to_dict(False) for r in b.records] == [r.to_dict(False) for r in a.records]
    assert b.config["lab_workers"] == 2 and "lab_workers" not in a.config
    assert ray_cluster.is_initialized()  # the command used the running cluster, left it up


def test_a_local_run_never_imports_ray(tmp_path) -> None:
    """``labtwin run`` without --ray: Ray stays out of the process."""
    script = (
        "import sys; from labtwin.cli import app\n"
        f"args = ['run', 'BatchReactor-v1', '--campaigns', '2', '--budget', '2', '--out', "
        f"{str(tmp_path / 'run')!r}, '--no-progress']\n"
        "try:\n    app(args)\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('ray imported' if 'ray' in sys.modules else 'no ray')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=True
    )
    assert out.stdout.strip().endswith("no ray"), out.stdout[-2000:] + out.stderr[-2000:]
    assert (tmp_path / "run" / "records.jsonl").exists()
