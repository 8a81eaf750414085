"""Constrained tool calls with xgrammar on CPU (skipped when xgrammar is absent)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("xgrammar")


from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer  # noqa: E402
from labtwin.agents.policy.grammar import ToolCallGrammar  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_experiment",
            "parameters": {
                "type": "object",
                "properties": {"catalyst": {"enum": ["Pd", "Pt"]}, "stirred": {"type": "boolean"}},
                "required": ["catalyst", "stirred"],
                "additionalProperties": False,
            },
        },
    }
]
PREFIX = '<tool_call>\n{"name": "run_experiment", "arguments": '
SUFFIX = "}\n</tool_call>"


def test_required_tool_call_follows_the_schema():
    """The random tiny model, constrained, writes only valid calls.

    The tag text is forced one character-level token at a time, so some
    completions hit the length limit; every one is a prefix of a valid call,
    and every finished one parses and matches the schema.
    """
    tokenizer = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
    grammar = ToolCallGrammar(
        tokenizer,
        TOOLS,
        policy.stop_token_ids,
        vocab_size=policy.model.config.vocab_size,
        required=True,
    )
    completions = policy.sample(
        [[{"role": "user", "content": "Run one experiment."}]],
        tools=TOOLS,
        n=4,
        max_new_tokens=60,
        logits_processor=grammar,  # a factory: fresh matchers for each batch
        batch_size=2,
        seed=0,
    )
    finished = [c for c in completions if c.finish_reason == "stop"]
    assert finished, "expected at least one finished call with this seed"
    for c in completions:
        assert c.text.startswith(PREFIX) or PREFIX.startswith(c.text)
    for c in finished:
        assert c.text.startswith(PREFIX) and c.text.endswith(SUFFIX)
        arguments = json.loads(c.text[len(PREFIX) : -len(SUFFIX)])
        assert set(arguments) == {"catalyst", "stirred"}
        assert arguments["catalyst"] in ("Pd", "Pt") and isinstance(arguments["stirred"], bool)
