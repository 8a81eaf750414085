"""Constrained decoding of tool calls with xgrammar (optional dependency).

The chat template writes a tool call as

    <tool_call>
    {"name": "run_experiment", "arguments": {...}}
    </tool_call>

``ToolCallGrammar`` compiles, once per tokenizer and tools list, a grammar in
which free text may be followed by such blocks whose ``arguments`` follow the
tool's JSON schema (``required=True``: the completion is exactly one tool
call). Calling it returns fresh logits processors for one ``generate`` batch,
which is what ``HFPolicy.generate(logits_processor=...)`` accepts:

    grammar = ToolCallGrammar(policy.tokenizer, tools, policy.stop_token_ids,
                              vocab_size=policy.model.config.vocab_size)
    policy.sample(chats, tools=tools, logits_processor=grammar)

Masking runs on CPU or CUDA (xgrammar's CPU bitmask kernel on CPU).
Sampling log-probs stay those of the unconstrained model: see ``HFPolicy.generate``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor, PreTrainedTokenizerBase

TOOL_CALL_TRIGGER = "<tool_call>"


class ToolCallGrammar:
    """Grammar for Hermes-style ``<tool_call>`` blocks of the given tools.

    Args:
        tokenizer: the policy's tokenizer.
        tools: OpenAI-style tools list (``{"type": "function", "function": {...}}``).
        stop_token_ids: tokens that end a completion (``HFPolicy.stop_token_ids``).
        vocab_size: the model's vocabulary size (``model.config.vocab_size``),
            which may exceed ``len(tokenizer)``.
        required: the completion must be exactly one tool call (no free text).
        max_whitespace: most consecutive whitespace characters inside the JSON.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        tools: Sequence[dict[str, Any]],
        stop_token_ids: Sequence[int],
        vocab_size: int | None = None,
        required: bool = False,
        max_whitespace: int | None = 1,
    ) -> None:
        import xgrammar as xgr

        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size or len(tokenizer), stop_token_ids=list(stop_token_ids)
        )
        tags = []
        for tool in tools:
            function = tool.get("function", tool)
            tags.append(
                {
                    "type": "tag",
                    "begin": f'{TOOL_CALL_TRIGGER}\n{{"name": {json.dumps(function["name"])}, '
                    '"arguments": ',
                    "content": {
                        "type": "json_schema",
                        "json_schema": function.get("parameters") or {"type": "object"},
                        "max_whitespace_cnt": max_whitespace,
                    },
                    "end": "}\n</tool_call>",
                }
            )
        if required:
            root = {"type": "or", "elements": tags}
        else:
            root = {"type": "triggered_tags", "triggers": [TOOL_CALL_TRIGGER], "tags": tags}
        structural_tag = {"type": "structural_tag", "format": root}
        self.compiled = xgr.GrammarCompiler(info).compile_structural_tag(json.dumps(structural_tag))

    def __call__(self) -> list[LogitsProcessor]:
        """Fresh (stateful) processors for one ``generate`` call."""
        return [GrammarLogitsProcessor(self.compiled)]


class GrammarLogitsProcessor(LogitsProcessor):
    """Masks each row's logits to the tokens its grammar matcher allows.

    Stateful: one matcher per row, advanced with the token sampled at the
    previous step. Use one instance per ``generate`` call.
    """

    def __init__(self, compiled_grammar: Any) -> None:
        self.compiled_grammar = compiled_grammar
        self.matchers: list[Any] | None = None
        self.bitmask: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        import xgrammar as xgr

        if self.matchers is None:  # first step: nothing sampled yet
            self.matchers = [xgr.GrammarMatcher(self.compiled_grammar) for _ in input_ids]
            vocab_size = self.compiled_grammar.tokenizer_info.vocab_size
            self.bitmask = xgr.allocate_token_bitmask(len(self.matchers), vocab_size)
        else:
            for row, matcher in enumerate(self.matchers):
                if not matcher.is_terminated() and not matcher.accept_token(
                    int(input_ids[row, -1])
                ):
                    raise RuntimeError(f"row {row}: sampled token outside the grammar")
        xgr.reset_token_bitmask(self.bitmask)  # finished rows: anything (generate pads them)
        for row, matcher in enumerate(self.matchers):
            if not matcher.is_terminated():
                matcher.fill_next_token_bitmask(self.bitmask, row)
        # mask a copy: generate() keeps the raw logits it passed in (output_logits), and
        # the sampling log-probs must be those of the unconstrained model
        if scores.device.type == "cuda":
            masked = scores.clone()
            xgr.apply_token_bitmask_inplace(masked, self.bitmask.to(scores.device))
            return masked
        masked = scores.to("cpu", copy=True)
        xgr.apply_token_bitmask_inplace(masked, self.bitmask)
        return masked.to(scores.device)
