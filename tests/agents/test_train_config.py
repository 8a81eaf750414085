"""The trainer's config, its seed streams and the `labtwin train` command built from it."""

from __future__ import annotations

import dataclasses
import typing

import pytest
import torch
import typer
from rich.markup import escape
from typer.testing import CliRunner

import labtwin
from labtwin.agents.grpo import AGGREGATIONS
from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer
from labtwin.agents.train import SeedStreams, TrainConfig
from labtwin.agents.train_config import field_help, field_types
from labtwin.cli import app

runner = CliRunner()


# ---- the config --------------------------------------------------------------------------


def test_every_field_has_a_line_of_help() -> None:
    helps = field_help()
    assert list(helps) == [f.name for f in dataclasses.fields(TrainConfig)]
    assert all(h and "\n" not in h for h in helps.values())


def test_aggregation_choices_are_the_losses() -> None:
    assert typing.get_args(field_types()["aggregation"]) == AGGREGATIONS


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": -1}, "steps must be at least 0"),
        ({"steps": 2.5}, "steps must be int"),
        ({"steps": True}, "steps must be int"),
        ({"group_size": 1}, "group_size must be at least 2"),
        ({"budget": 0}, "budget must be at least 1"),
        ({"micro_batch_size": 0}, "micro_batch_size must be at least 1"),
        ({"generation_timeout_s": 0.0}, "generation_timeout_s must be a finite number > 0"),
        ({"generation_timeout_s": "soon"}, "generation_timeout_s must be"),
        ({"generation_startup_timeout_s": -1.0}, "generation_startup_timeout_s must be a finite"),
        ({"learning_rate": 0.0}, "learning_rate must be a finite number > 0"),
        ({"warmstart_learning_rate": float("nan")}, "warmstart_learning_rate must be a finite"),
        ({"temperature": 0}, "temperature must be a finite number > 0"),
        ({"clip_low": -0.1}, "clip_low must be a finite number >= 0"),
        ({"kl_coef": -1e-3}, "kl_coef must be a finite number >= 0"),
        ({"aggregation": "mean"}, "aggregation must be one of 'token_mean'"),
        ({"backend": "jax"}, "backend must be one of 'hf', 'vllm'"),
        ({"task": "Nope-v0"}, "task: unknown lab 'Nope-v0'; registered labs: "),
        ({"model": "/no/such/folder"}, "model must be 'tiny' or a local"),
        ({"seed": -1}, "seed must be at least 0"),
        ({"seed": 2**32}, "seed must be below 2\\*\\*32"),
        ({"hidden_size": 12}, "hidden_size must be a positive multiple of 8"),
        ({"out": 3}, "out must be str or None"),
        ({"constrained": "yes"}, "constrained must be bool"),
        ({"resume": True}, "resume needs out"),
    ],
)
def test_bad_settings_are_one_line_value_errors(changes, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        TrainConfig(**changes)
    assert "\n" not in str(err.value)


def test_validate_sees_fields_assigned_after_construction() -> None:
    cfg = TrainConfig()
    cfg.group_size = 1
    with pytest.raises(ValueError, match="group_size"):
        cfg.validate()


def test_every_registered_lab_is_a_valid_task() -> None:
    for task_id in labtwin.list_tasks():
        assert TrainConfig(task=task_id).task == task_id  # with or without the namespace


# ---- seed streams ---------------------------------------------------------------------------


def test_seed_streams_are_named_independent_and_reproducible() -> None:
    s = SeedStreams(7)
    drawn = {
        "model": [s.model_init()],
        "warm": s.warm_start_campaigns(0, 4) + s.warm_start_campaigns(1, 4),
        "train": s.train_campaigns(1, 4) + s.train_campaigns(2, 4),
        "train sampling": [s.train_sampling(1), s.train_sampling(2)],
        "eval": s.eval_campaigns(4),
        "eval sampling": [s.eval_sampling()],
        "engine": [s.engine()],
    }
    seeds = [x for v in drawn.values() for x in v]
    assert all(isinstance(x, int) and 0 <= x < 2**63 for x in seeds)
    assert len(set(seeds)) == len(seeds)  # no stream repeats another's seed
    assert SeedStreams(7).train_campaigns(2, 4) == s.train_campaigns(2, 4)  # (seed, step) only
    assert s.eval_campaigns(2) == s.eval_campaigns(4)[:2]  # more campaigns extend the list
    assert SeedStreams(8).train_campaigns(1, 4) != s.train_campaigns(1, 4)
    a, b = s.warm_start_replies(), SeedStreams(7).warm_start_replies()
    assert a.integers(1 << 30, size=3).tolist() == b.integers(1 << 30, size=3).tolist()


# ---- the reference model, passed explicitly ---------------------------------------------------


def test_logprobs_of_another_model_equal_that_models_policy() -> None:
    """``policy.logprobs(..., model=reference)`` scores with the reference and leaves the
    policy's own model in place; same float32 computation, so equal exactly."""
    tokenizer = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
    reference = HFPolicy(build_tiny_model(tokenizer, seed=1), tokenizer, device="cpu")
    prompts = [tokenizer("a prompt")["input_ids"], tokenizer("a longer prompt here")["input_ids"]]
    completions = [tokenizer(" and more")["input_ids"], tokenizer(" end")["input_ids"]]
    with torch.no_grad():
        own = policy.logprobs(prompts, completions).logprobs
        via = policy.logprobs(prompts, completions, model=reference.model).logprobs
        direct = reference.logprobs(prompts, completions).logprobs
    assert torch.equal(via, direct) and not torch.equal(own, via)
    assert policy.model is not reference.model


# ---- the command line ----------------------------------------------------------------------


def test_every_field_is_an_option_with_the_dataclass_default() -> None:
    command = typer.main.get_command(app).commands["train"]
    options = {p.name: p for p in command.params}
    for f in dataclasses.fields(TrainConfig):
        assert options[f.name].default == f.default, f.name
        assert options[f.name].help == escape(field_help()[f.name])  # rich markup escaped
    flags = {flag for p in command.params for flag in p.opts + p.secondary_opts}
    for flag in (
        "--task --model --steps --budget --group-size --campaigns-per-step --learning-rate "
        "--warmstart-steps --seed --out --resume --set --progress --no-progress"
    ).split():
        assert flag in flags


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "steps=abc"], "'abc' is not an integer"),
        (["--set", "aggregation=foo"], "aggregation must be one of"),
        (["--set", "backend=foo"], "backend must be one of"),
        (["--set", "task=Nope-v0"], "unknown lab 'Nope-v0'"),
        (["--set", "group_size=1"], "group_size must be at least 2"),
        (["--set", "no_such_field=1"], "unknown setting 'no_such_field'"),
        (["--set", "steps"], "expected key=value"),
        (["--set", "scale_std=maybe"], "'maybe' is not a boolean"),
        (["--group-size", "1"], "group_size must be at least 2"),
        (["--task", "Nope-v0"], "unknown lab 'Nope-v0'"),
        (["--steps", "abc"], "Invalid value for '--steps'"),
        (["--aggregation", "foo"], "Invalid value for '--aggregation'"),
        (["--resume"], "resume needs out"),
    ],
)
def test_bad_train_options_exit_2_with_a_message(args, message) -> None:
    result = runner.invoke(app, ["train", *args], terminal_width=400)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, ValueError)


def test_resume_with_nothing_to_resume_exits_2(tmp_path) -> None:
    result = runner.invoke(app, ["train", "--out", str(tmp_path), "--resume"], terminal_width=400)
    assert result.exit_code == 2
    assert result.output.strip() == f"error: nothing to resume: {tmp_path} has no checkpoint"


def test_options_and_set_build_the_config(monkeypatch, tmp_path) -> None:
    """Flags and --set reach TrainConfig (--set last); the run itself is not started here."""
    import labtwin.agents.train as train_module

    seen = []

    def fake_train(cfg):
        seen.append(cfg)
        raise SystemExit(0)

    monkeypatch.setattr(train_module, "train", fake_train)
    args = "--steps 3 --group-size 4 --learning-rate 1e-6 --no-progress --no-constrained"
    args += " --set kl_coef=0.02 --set aggregation=dr_grpo --set steps=5"
    result = runner.invoke(app, ["train", *args.split(), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    (cfg,) = seen
    assert (cfg.steps, cfg.group_size, cfg.learning_rate) == (5, 4, 1e-6)
    assert (cfg.kl_coef, cfg.aggregation, cfg.progress, cfg.constrained) == (
        0.02,
        "dr_grpo",
        False,
        False,
    )
    assert cfg.budget == TrainConfig.budget and cfg.out == str(tmp_path / "r")


def test_share_prompt_reaches_the_policy() -> None:
    from labtwin.agents.train import make_policy

    assert make_policy(TrainConfig(share_prompt=False)).share_prompt is False
    assert make_policy(TrainConfig()).share_prompt is True
