"""kill -9 during `labtwin train` leaves a readable run, and --resume finishes it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import labtwin

TASK = "BatchReactor-v1"
SMALL = [
    "--task", TASK, "--steps", "6", "--budget", "1", "--group-size", "2",
    "--campaigns-per-step", "2", "--warmstart-steps", "0", "--no-progress",
    "--set", "eval_campaigns=2", "--set", "checkpoint_every=1", "--set", "max_new_tokens=96",
]  # fmt: skip


def labtwin_train(*args: str) -> list[str]:
    return [sys.executable, "-c", "from labtwin.cli import main; main()", "train", *args]


def test_kill_9_mid_training_then_resume(tmp_path) -> None:
    out = tmp_path / "train"
    proc = subprocess.Popen(
        labtwin_train(*SMALL, "--out", str(out)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    records = out / "records.jsonl"
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline:  # kill once some training steps are recorded
            if (out / "checkpoints" / "latest").exists() and records.exists():
                lines = records.read_bytes().count(b"\n")
                if lines >= 8:  # two GRPO steps of 4 campaigns
                    break
            assert proc.poll() is None, "training ended before it could be killed"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    task = labtwin.load_task(TASK, budget=1)
    killed = labtwin.runs.load(out)
    complete = [line for line in records.read_bytes().split(b"\n")[:-1] if line.strip()]
    assert len(killed.records) + killed.superseded == len(complete) > 0
    assert killed.rescore(task) == [r.score for r in killed.records]

    resumed = subprocess.run(
        labtwin_train(*SMALL, "--out", str(out), "--resume"), capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    run = labtwin.runs.load(out)
    steps = sorted({line["train_step"] for line in run.record_lines})
    assert steps == list(range(1, 7))  # every step's campaigns, the repeated ones once
    assert len(run.records) == 6 * 4  # 6 steps x 4 campaigns x 1 experiment
    assert run.rescore(task) == [r.score for r in run.records]
    assert [m["phase"] for m in run.metrics].count("eval_trained") == 1
