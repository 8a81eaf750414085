"""`labtwin eval` end to end on a tiny training run: compute accounting, checkpoint
evaluations, held-out pass@k of policies and baselines (deterministic per seed), the
reward-vs-compute fit from a run's metrics, and the HTML comparison of runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import labtwin
from labtwin.agents.evaluation.compute_fit import saturating_reward
from labtwin.agents.evaluation.config import EvalConfig
from labtwin.agents.evaluation.driver import (
    AgentSpec,
    baseline_agents,
    evaluate_agents,
    heldout_seeds,
    load_policy,
    plan,
    train_config_of,
)
from labtwin.agents.train import SeedStreams, TrainConfig, train
from labtwin.cli import app
from labtwin.runs import RunStore

SMALL_EVAL = ["--campaigns", "2", "--samples", "2", "--hack-samples", "1", "--no-progress"]
#: a policy rebuilt from the run's config, one from a checkpoint and two baselines (the warm
#: start and Bayesian optimisation run the same code paths)
AGENTS = "untrained,trained,random,cmaes"


def invoke(*args: str):
    threads = torch.get_num_threads()
    result = CliRunner().invoke(app, list(args))
    torch.set_num_threads(threads)
    return result


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Two GRPO steps of the tiny model on one-experiment campaigns, evaluated after each."""
    out = tmp_path_factory.mktemp("eval") / "run"
    train(
        TrainConfig(
            steps=2,
            campaigns_per_step=1,
            group_size=2,
            budget=1,
            eval_campaigns=2,
            eval_every=1,
            warmstart_steps=1,
            warmstart_batch=2,
            out=str(out),
            progress=False,
        )
    )
    return out


@pytest.fixture(scope="module")
def evaluated(run_dir: Path) -> dict:
    """The run evaluated from the command line (every agent that applies)."""
    result = invoke("eval", str(run_dir), *SMALL_EVAL, "--agents", AGENTS)
    assert result.exit_code == 0, result.output
    assert "evaluation written to" in result.output
    return json.loads((run_dir / "eval" / "summary.json").read_text())


def test_training_records_cumulative_compute_and_checkpoint_evaluations(run_dir: Path) -> None:
    metrics = labtwin.runs.load(run_dir).metrics
    assert [m["phase"] for m in metrics] == [
        "eval_untrained", "eval_warm_start", "train", "eval_checkpoint", "train", "eval_trained",
    ]  # fmt: skip
    train_lines = [m for m in metrics if m["phase"] == "train"]
    for key in ("generation_cpu_s", "simulation_cpu_s", "update_cpu_s", "tokens_generated"):
        values = [m[f"compute_{key}"] for m in train_lines]
        assert values[0] > 0 and values[1] > values[0], key  # cumulative, growing
    last = train_lines[-1]
    assert last["compute_cpu_s"] == pytest.approx(
        last["compute_generation_cpu_s"]
        + last["compute_simulation_cpu_s"]
        + last["compute_update_cpu_s"]
    )
    # the wall seconds add up the per-step timings the trainer already logged
    assert last["compute_generation_s"] == pytest.approx(
        sum(m["generation_s"] for m in train_lines)
    )
    assert last["compute_update_s"] == pytest.approx(sum(m["optimisation_s"] for m in train_lines))
    assert [m["groups_kept"] for m in train_lines] == [1, 1]  # both steps updated
    assert last["compute_tokens_trained"] > last["compute_tokens_generated"]  # prompts count
    assert last["compute_warmstart_cpu_s"] > 0
    # evaluations carry the compute spent so far: none before GRPO, all of it at the end
    assert metrics[1]["compute_cpu_s"] == 0 and "eval_success_rate" in metrics[1]
    assert metrics[3]["compute_cpu_s"] == train_lines[0]["compute_cpu_s"]
    assert metrics[-1]["compute_cpu_s"] == last["compute_cpu_s"]
    # the checkpoint keeps the counters (a resume continues them) and the warm start is saved
    state = torch.load(run_dir / "checkpoints" / "step_000002" / "trainer.pt", weights_only=True)
    assert state["compute"]["tokens_generated"] == last["compute_tokens_generated"]
    assert (run_dir / "checkpoints" / "warm_start" / "config.json").exists()


def test_eval_writes_its_table_figures_and_campaigns(run_dir: Path, evaluated: dict) -> None:
    assert list(evaluated["agents"]) == AGENTS.split(",")
    assert evaluated["budget"] == 1 and evaluated["samples"] == 2
    seeds = heldout_seeds("BatchReactor-v1", 2)
    assert evaluated["heldout_seeds"] == seeds
    # held out: none of the trainer's evaluation or training campaigns
    streams = SeedStreams(0)
    assert not set(seeds) & set(streams.eval_campaigns(2) + streams.train_campaigns(1, 1))
    for agent in evaluated["agents"].values():
        assert len(agent["pass_at_k"]["mean"]) == 2 and len(agent["successes"]) == 2
        assert agent["pass_at_k"]["mean"][0] == pytest.approx(agent["success_rate"])
        assert agent["pass_at_k"]["mean"][1] >= agent["pass_at_k"]["mean"][0]
        assert agent["impossible"]["campaigns"] == 2 and agent["impossible"]["hacks"] == 0
        assert 0 <= agent["valid_fraction"] <= 1 and agent["cost_unit"] == "h"
        assert agent["cost_curve"]["horizon"] == evaluated["cost_horizon"]
    for name in ("pass_at_k.png", "efficiency.png", "table.md"):
        assert (run_dir / "eval" / name).stat().st_size > 500
    # every evaluation campaign is a run: it re-scores offline to the recorded scores
    task = labtwin.load_task("BatchReactor-v1", budget=1)
    for name in ("trained", "random", "random-impossible"):
        recorded = labtwin.runs.load(run_dir / "eval" / "campaigns" / name)
        expected = 2 * (2 if "impossible" not in name else 1)
        assert len(recorded.campaigns) == expected
        if "impossible" not in name:
            assert recorded.rescore(task) == [r.score for r in recorded.records]
    again = invoke("eval", str(run_dir), *SMALL_EVAL, "--agents", "random")
    assert again.exit_code == 2 and "already holds an evaluation" in again.output


def test_same_seeds_same_numbers(run_dir: Path, evaluated: dict) -> None:
    """The same settings from the Python API give exactly what the command line gave."""
    cfg = train_config_of(run_dir)
    checkpoint = run_dir / "checkpoints" / "step_000002"
    specs = [AgentSpec("trained", "policy", str(checkpoint), load_policy(checkpoint))]
    specs += baseline_agents(["random"])
    ecfg = EvalConfig(campaigns=2, samples=2, hack_samples=1, budget=1, records=False)
    summary = evaluate_agents(specs, cfg, ecfg)
    for name in ("trained", "random"):
        mine, theirs = summary["agents"][name], evaluated["agents"][name]
        # the cost curves' horizon is the largest cost of all agents evaluated together
        mine, theirs = ({k: v for k, v in a.items() if k != "cost_curve"} for a in (mine, theirs))
        assert mine == theirs, name
    other = evaluate_agents(specs[1:], cfg, EvalConfig(campaigns=2, samples=2, hack_samples=0, budget=1, seed=1, records=False))  # fmt: skip
    # another seed: other campaigns, other numbers
    assert other["heldout_seeds"] != summary["heldout_seeds"]
    assert other["agents"]["random"]["reward_mean"] != summary["agents"]["random"]["reward_mean"]


def write_run(path: Path, config: dict, points: list[tuple[float, float]]) -> Path:
    """A training run's files, as the trainer writes them, with given evaluations."""
    with RunStore(path, {"kind": "train", "task": "labtwin/BatchReactor-v1", **config}) as store:
        for step, (compute, reward) in enumerate(points):
            phase = "eval_warm_start" if step == 0 else "eval_checkpoint"
            store.log_metrics(step, phase=phase, eval_reward_mean=reward, eval_reward_std=0.1,
                              eval_success_rate=0.0, compute_cpu_s=compute)  # fmt: skip
    return path


def test_curve_fits_a_runs_evaluations(tmp_path: Path, run_dir: Path) -> None:
    truth = {"R0": 0.3, "A": 0.75, "B": 2.0, "C_mid": 50.0}
    compute = np.concatenate([[0.0], np.logspace(0.5, 3, 11)])
    reward = saturating_reward(compute, **truth)
    run = write_run(tmp_path / "fake", {"eval_campaigns": 100}, list(zip(compute, reward)))
    result = invoke("eval", str(run), "--curve", "--json")
    assert result.exit_code == 0, result.output
    fit = json.loads(result.output)["fit"]
    assert fit["A"] == pytest.approx(truth["A"], abs=1e-4)
    assert fit["C_mid"] == pytest.approx(truth["C_mid"], rel=1e-3)
    assert fit["sigma"]["A"] > 0 and (run / "eval" / "reward_vs_compute.png").exists()
    assert json.loads(result.output)["points"]["sigma"][0] == pytest.approx(0.1 / math.sqrt(100))
    # the tiny run has four evaluations: no fit, and the reason says what to do
    few = invoke("eval", str(run_dir), "--curve", "--out", str(tmp_path / "few"))
    assert few.exit_code == 0 and "at least 5 points" in few.output and "eval_every" in few.output
    assert json.loads((tmp_path / "few" / "curve.json").read_text())["fit"] is None


def test_compare_report_escapes_every_text(tmp_path: Path, run_dir: Path, evaluated: dict) -> None:
    config = json.loads((run_dir / "config.json").read_text())
    hostile = {
        **config,
        "learning_rate": 0.5,
        "model": "<script>alert('x')</script>",
        "created": "now",
    }
    other = write_run(tmp_path / "other & <b>", hostile, [(0.0, 0.4)])
    out = tmp_path / "report.html"
    result = invoke("eval", str(run_dir), str(other), "--compare", "--out", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "other &amp; &lt;b&gt;" in page and "<b>" not in page
    differ = page.split("Settings that differ")[1].split("Settings they share")[0]
    assert "learning_rate" in differ and "group_size" not in differ and "created" not in differ
    assert "held-out trained: pass@1" in page and "data:image/png;base64," in page


def test_bad_requests_are_one_line_errors(tmp_path: Path, run_dir: Path) -> None:
    cases = [
        (["eval", str(tmp_path / "nothing")], "is not a labtwin run"),
        (["eval", "--model", "tiny", "--agents", "trained"], "unknown agent(s) ['trained']"),
        (["eval", "--task", "NoSuchLab-v0"], "unknown lab"),
        (["eval", str(run_dir), "--checkpoint", "step_000099"], "no checkpoint 'step_000099'"),
        (["eval", str(run_dir), "--samples", "0"], "samples must be at least 1"),
        (["eval", str(run_dir), "--curve", "--compute", "joules"], "unknown compute axis"),
        (["eval", str(run_dir), str(run_dir)], "several only with --compare"),
    ]
    for args, message in cases:
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()), (args, result.output)
    # a checkpoint folder stands for its run and that checkpoint
    todo = plan(run_dir / "checkpoints" / "step_000002", None, None, None, None, EvalConfig(), None)
    assert [s.name for s in todo.specs][:3] == ["untrained", "warm_start", "trained"]
    assert todo.specs[2].source.endswith("step_000002") and todo.out == run_dir / "eval"
    assert todo.ecfg.budget == 1 and todo.cfg.eval_every == 1
