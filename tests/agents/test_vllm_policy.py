"""The vLLM generation backend: a thin adapter, exercised only where vLLM and CUDA exist.

vLLM ships CUDA-only wheels; on CPU machines these tests skip. The schema
helper is plain Python and always tested.
"""

from __future__ import annotations

import json

import pytest
import torch

import labtwin
from labtwin.agents.policy.vllm_policy import tool_call_schema
from labtwin.tools import lab_tools, parse_tool_call


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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="vLLM needs CUDA")
def test_vllm_generates_with_logprobs_and_syncs_weights(tmp_path) -> None:
    pytest.importorskip("vllm")
    from labtwin.agents.policy import HFPolicy, save_tiny
    from labtwin.agents.policy.vllm_policy import VLLMPolicy

    path = save_tiny(tmp_path / "tiny")
    engine = VLLMPolicy(str(path), gpu_memory_utilization=0.2)
    trainer = HFPolicy.from_pretrained(path, dtype=torch.float32)
    prompts = [trainer.tokenizer("<|im_start|>user\nhi<|im_end|>\n")["input_ids"]]
    out = engine.generate(prompts, n=4, max_new_tokens=16, seed=0)
    assert len(out) == 4 and all(len(c.logprobs) == len(c.completion_ids) for c in out)
    recomputed = trainer.logprobs([c.prompt_ids for c in out], [c.completion_ids for c in out])
    for c, row in zip(out, recomputed.logprobs):
        assert torch.allclose(torch.tensor(c.logprobs), row[: len(c.logprobs)].cpu(), atol=2e-2)
    with torch.no_grad():
        for p in trainer.model.parameters():
            p.mul_(0.0)
    engine.load_weights(trainer.model)
    zeroed = engine.generate(prompts, n=1, max_new_tokens=4, temperature=0.0)
    assert zeroed[0].completion_ids  # the engine runs the new (all-zero) weights
