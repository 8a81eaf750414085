"""The run store: append-only records that read back, survive a torn line, and resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

import labtwin
from labtwin.runs import RunStore


def test_round_trip(tmp_path) -> None:
    task = labtwin.load_task("BatchReactor-v0")
    measured = task.measure(
        [
            {"temperature_K": 330, "time_min": 40, "feed_conc_mol_L": 0.2, "catalyst_mol_pct": 1},
            "{not json",
        ],
        seed=2,
    )
    with RunStore(tmp_path / "run", {"task": task.id, "seed": 2}) as store:
        for step, m in enumerate(measured):
            store.log_experiment(0, step, m, task.score(m, {}), 0.5)
        store.log_campaign(0, best_score=0.7)
        store.log_metrics(1, reward_mean=0.25, loss=np.float32(1.5))
    run = labtwin.runs.load(tmp_path / "run")
    assert run.config["task"] == "BatchReactor-v0" and "created" in run.config
    back = run.measurements()
    assert [m.status for m in back] == ["ok", "invalid"]
    assert back[0].observables == measured[0].observables
    assert back[0].experiment == measured[0].experiment
    assert back[1].reason == measured[1].reason and back[1].proposal == "{not json"
    course = run.artifact(run.experiments[0]["measurement"]["artifacts"]["time_course"])
    np.testing.assert_array_equal(course, measured[0].artifacts["time_course"])
    assert run.campaigns == [{"campaign": 0, "best_score": 0.7}]
    assert run.metrics[0]["loss"] == 1.5
    assert run.best_scores() == {0: pytest.approx(measured[0]["yield_B"])}


def test_torn_last_line_is_skipped_and_resume_appends(tmp_path) -> None:
    path = tmp_path / "run"
    with RunStore(path, {"a": 1}) as store:
        store.log_metrics(1, x=1.0)
        store.log_metrics(2, x=2.0)
    with open(path / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "x": ')  # a crash mid-write
    assert [r["step"] for r in labtwin.runs.load(path).metrics] == [1, 2]
    with pytest.raises(FileExistsError):
        RunStore(path)
    # resuming starts on a fresh line after repairing nothing: the torn line stays, later lines read
    with open(path / "metrics.jsonl", "a") as f:
        f.write("\n")
    with RunStore(path, resume=True) as store:
        store.log_metrics(3, x=3.0)
    lines = (path / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["step"] == 3


def test_every_record_is_on_disk_before_close(tmp_path) -> None:
    store = RunStore(tmp_path / "run")
    store.log_metrics(1, x=1.0)
    assert labtwin.runs.load(tmp_path / "run").metrics[0]["x"] == 1.0  # flushed, not buffered
    store.close()


def test_load_rejects_non_runs(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a labtwin run"):
        labtwin.runs.load(tmp_path)
