"""The run store: records and conditions that read back, re-score, replay, and survive crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import labtwin
from labtwin.campaign import CampaignBatch, replay
from labtwin.runs import RunStore

GOOD = {"temperature_K": 330, "time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 1}


def recorded_campaigns(path, task, seeds, proposals_per_step):
    """Run campaigns on the engine with the store as its recorder."""
    with RunStore(path, {"task": task.id}) as store:
        batch = CampaignBatch(task, len(seeds), recorder=store)
        batch.reset(range(len(seeds)), seeds)
        for proposals in proposals_per_step:
            live = [i for i, c in enumerate(batch.campaigns) if not c.done]
            batch.step(live, proposals[: len(live)])
    return batch


def test_round_trip_conditions_records_and_artifacts(tmp_path) -> None:
    task = labtwin.load_task("BatchReactor-v1", budget=2)
    batch = recorded_campaigns(tmp_path / "run", task, [2, 3], [[GOOD, "{not json"], [GOOD, GOOD]])
    run = labtwin.runs.load(tmp_path / "run")
    assert run.config["task"] == "BatchReactor-v1" and "created" in run.config
    assert [r.kind for r in run.records] == ["experiment"] * 4
    assert [r.measurement.status for r in run.records] == ["ok", "invalid", "ok", "ok"]
    for campaign in batch.campaigns:
        info = run.campaigns[campaign.id]
        assert info.seed == campaign.seed and info.conditions == json.loads(
            json.dumps(campaign.conditions)
        )
        assert "prefactors" in info.hidden  # the reagents' kinetics are hidden from the agent
        assert [r.to_dict(artifacts=False) for r in run.records_of(campaign.id)] == [
            r.to_dict(artifacts=False) for r in campaign.history
        ]
    bad = run.records_of(1)[0]
    assert bad.proposal == "{not json" and "malformed JSON" in bad.measurement.reason
    line = run.record_lines[0]
    course = run.artifact(line["measurement"]["artifacts"]["time_course"])
    np.testing.assert_array_equal(
        course, batch.campaigns[0].history[0].measurement.artifacts["time_course"]
    )


def test_rescore_and_replay_reproduce_the_run(tmp_path) -> None:
    task = labtwin.load_task("ArrheniusFit-v1", budget=3)
    answer = labtwin.Answer({"activation_energy_kJ_mol": 66.0})
    run_ = {"temperature_K": 340, "time_min": 20}
    recorded_campaigns(tmp_path / "run", task, [4, 5], [[run_, run_], [run_, answer], [answer]])
    run = labtwin.runs.load(tmp_path / "run")
    assert [r.kind for r in run.records_of(1)] == ["experiment", "answer"]
    assert run.rescore(task) == [r.score for r in run.records]
    assert any(r.kind == "answer" and r.score > 0 for r in run.records)
    for cid, info in run.campaigns.items():
        again = replay(task, info.seed, run.records_of(cid))
        assert [r.to_dict(artifacts=False) for r in again] == [
            r.to_dict(artifacts=False) for r in run.records_of(cid)
        ]


def test_torn_last_line_is_skipped_and_resume_cuts_it(tmp_path) -> None:
    path = tmp_path / "run"
    with RunStore(path, {"a": 1}) as store:
        store.log_metrics(1, x=1.0)
        store.log_metrics(2, x=2.0)
    with open(path / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "x": ')  # a crash mid-write
    assert [r["step"] for r in labtwin.runs.load(path).metrics] == [1, 2]
    with pytest.raises(FileExistsError):
        RunStore(path)
    with RunStore(path, resume=True) as store:  # no hand repair: resume cuts the torn tail
        store.log_metrics(3, x=3.0)
        store.log_metrics(4, x=4.0)
    run = labtwin.runs.load(path)
    assert [r["step"] for r in run.metrics] == [1, 2, 3, 4] and run.skipped_lines == 0


def test_a_complete_last_line_that_lost_its_newline_is_kept(tmp_path) -> None:
    path = tmp_path / "run"
    with RunStore(path) as store:
        store.log_metrics(1, x=1.0)
    with open(path / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 2}))  # written whole, newline lost
    assert [r["step"] for r in labtwin.runs.load(path).metrics] == [1, 2]
    with RunStore(path, resume=True) as store:
        store.log_metrics(3)
    assert [r["step"] for r in labtwin.runs.load(path).metrics] == [1, 2, 3]


def test_a_campaign_run_again_after_resume_supersedes_the_first_attempt(tmp_path) -> None:
    """A trainer resumed from a checkpoint repeats the campaigns after it, with the same ids:
    the run keeps the latest attempt of each id."""
    task = labtwin.load_task("BatchReactor-v1", budget=2)
    path = tmp_path / "run"
    for resume, seed in ((False, 1), (True, 2)):
        with RunStore(path, resume=resume) as store:
            batch = CampaignBatch(task, 1, recorder=store)
            batch.reset([0], [seed])
            batch.step([0], [GOOD])
    run = labtwin.runs.load(path)
    assert run.campaigns[0].seed == 2 and len(run.records) == 1 and run.superseded == 1
    assert run.rescore(task) == [r.score for r in run.records]


def test_replay_uses_recorded_conditions_and_settings(tmp_path) -> None:
    """A campaign started with given conditions and a penalty replays to the same records."""
    task = labtwin.load_task("BatchReactor-v1", budget=3)
    with RunStore(tmp_path / "run") as store:
        batch = CampaignBatch(task, 1, "score", invalid_penalty=0.3, recorder=store)
        batch.reset([0], [9], [task.nominal_conditions()])
        batch.step([0], [GOOD])
        batch.step([0], ["{bad"])
    run = labtwin.runs.load(tmp_path / "run")
    assert run.records[1].reward == pytest.approx(-0.3)
    assert [r.to_dict(artifacts=False) for r in run.replay(task, 0)] == [
        r.to_dict(artifacts=False) for r in run.records
    ]


def test_binary_tail_and_corrupt_middle_line(tmp_path) -> None:
    path = tmp_path / "run"
    with RunStore(path) as store:
        store.log_metrics(1, x=1.0)
    with open(path / "metrics.jsonl", "ab") as f:
        f.write(b"\xff\xfe\x00garbage")
    assert [r["step"] for r in labtwin.runs.load(path).metrics] == [1]
    with open(path / "metrics.jsonl", "ab") as f:
        f.write(b"\n" + json.dumps({"step": 2}).encode() + b"\n")
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        run = labtwin.runs.load(path)
    assert [r["step"] for r in run.metrics] == [1, 2]


def test_artifacts_cannot_be_read_outside_the_run(tmp_path) -> None:
    path = tmp_path / "run"
    RunStore(path).close()
    np.save(tmp_path / "x.npy", np.zeros(3))
    run = labtwin.runs.load(path)
    for rel in ("../x.npy", "artifacts/../../x.npy", str(tmp_path / "x.npy")):
        with pytest.raises(ValueError, match="not an artifact"):
            run.artifact(rel)


def test_every_record_is_on_disk_before_close(tmp_path) -> None:
    store = RunStore(tmp_path / "run")
    store.log_metrics(1, x=1.0)
    assert labtwin.runs.load(tmp_path / "run").metrics[0]["x"] == 1.0  # flushed, not buffered
    store.close()


def test_load_rejects_non_runs(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a labtwin run"):
        labtwin.runs.load(tmp_path)


def test_sigkill_mid_campaign_loses_nothing_written(tmp_path) -> None:
    """A real `labtwin run`, killed with SIGKILL while it records, leaves a readable run."""
    out = tmp_path / "killed"
    cmd = [sys.executable, "-c", "from labtwin.cli import main; main()", "run", "BatchReactor-v1"]
    cmd += ["--campaigns", "64", "--budget", "400", "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = out / "records.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if records.exists() and records.stat().st_size > 20_000:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    run = labtwin.runs.load(out)
    lines = records.read_bytes().split(b"\n")
    complete = [line for line in lines[:-1] if line.strip()]
    assert len(run.records) == len(complete) > 0  # every complete line reads back
    assert set(run.campaigns) == set(range(64))  # conditions are written before any record
    task = labtwin.load_task("BatchReactor-v1", budget=400)
    assert run.rescore(task) == [r.score for r in run.records]


def test_derived_seeds_never_collide_across_key_lengths() -> None:
    from labtwin.campaign import derive_seeds

    seen = [tuple(derive_seeds(5, 3, *keys)) for keys in [(), (0,), (0, 0), (1,), (1, 0), (0, 1)]]
    assert len(set(seen)) == len(seen)
    assert derive_seeds(5, 3, 2) == derive_seeds(5, 3, 2)
