"""vLLM as the generation engine of GRPO (GPU machines, optional).

A thin adapter over vLLM's documented offline API (``vllm.LLM``,
``SamplingParams``, ``TokensPrompt``-style ``{"prompt_token_ids": ...}``
inputs): it offers the ``generate`` / ``encode_chats`` / ``tokenizer`` /
``stop_token_ids`` surface that :func:`labtwin.agents.rollout.run_episodes`
uses, so the rollout engine runs unchanged on vLLM, while training stays on
the Hugging Face model (:class:`~labtwin.agents.policy.HFPolicy`). After each
optimizer step :meth:`VLLMPolicy.load_weights` pushes the trained weights
into the engine in place.

Install with ``pip install labtwin[vllm]`` on a CUDA machine. vLLM does not
install on CPU-only machines; this module imports it lazily and its tests
skip where it is absent.

Log-probs: the engine is created with ``logprobs_mode="raw_logprobs"`` where
the installed vLLM supports it, so the returned log-probs are those of the
model before sampling processors; at temperature 1 they match
``HFPolicy.logprobs`` up to kernel differences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from labtwin.agents.policy.hf import Completion, encode_chats

Message = dict[str, Any]


class VLLMPolicy:
    """Generation through a ``vllm.LLM`` engine.

    Args:
        model: local model folder (the same weights the trainer starts from).
        gpu_memory_utilization: share of GPU memory vLLM may take; leave room
            for the training model on the same GPU.
        engine_kwargs: passed to ``vllm.LLM``.
    """

    def __init__(
        self, model: str, gpu_memory_utilization: float = 0.4, seed: int = 0, **engine_kwargs: Any
    ) -> None:
        import vllm

        kwargs = {
            "model": model,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "enable_prefix_caching": True,
            **engine_kwargs,
        }
        try:
            self.llm = vllm.LLM(logprobs_mode="raw_logprobs", **kwargs)
        except TypeError:  # older vLLM without logprobs_mode
            self.llm = vllm.LLM(**kwargs)
        self.tokenizer = self.llm.get_tokenizer()
        eos = (
            self.llm.llm_engine.generation_config_fields.get("eos_token_id")
            if hasattr(self.llm.llm_engine, "generation_config_fields")
            else None
        )
        eos = eos if eos is not None else self.tokenizer.eos_token_id
        self.stop_token_ids = [eos] if isinstance(eos, int) else list(eos)
        self.device = torch.device("cuda")

    def encode_chats(
        self, conversations: Sequence[Sequence[Message]], tools: Sequence[dict] | None = None
    ) -> list[list[int]]:
        return encode_chats(self.tokenizer, conversations, tools)

    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        logits_processor: Any = None,
        seed: int | None = None,
        json_schema: dict[str, Any] | None = None,
        **_: Any,
    ) -> list[Completion]:
        """``n`` samples per prompt with their per-token log-probs (same layout as HFPolicy).

        ``logits_processor`` (a transformers processor) is not used by vLLM; for
        constrained tool calls pass ``json_schema`` (vLLM structured outputs),
        which constrains the whole reply to one JSON object of that schema.
        """
        from vllm import SamplingParams

        params: dict[str, Any] = dict(
            n=n,
            max_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k if top_k > 0 else -1,
            logprobs=0,
            seed=seed,
            stop_token_ids=self.stop_token_ids,
        )
        if json_schema is not None:
            params.update(_structured(json_schema))
        sampling = SamplingParams(**params)
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompt_ids], sampling, use_tqdm=False
        )
        completions = []
        for index, (prompt, output) in enumerate(zip(prompt_ids, outputs)):
            for sample in output.outputs:
                ids = list(sample.token_ids)
                logprobs = [step[token].logprob for step, token in zip(sample.logprobs or [], ids)]
                completions.append(
                    Completion(
                        prompt_index=index,
                        prompt_ids=list(prompt),
                        completion_ids=ids,
                        text=self.tokenizer.decode(ids, skip_special_tokens=True),
                        logprobs=logprobs,
                        finish_reason="stop" if sample.finish_reason == "stop" else "length",
                    )
                )
        return completions

    @torch.no_grad()
    def load_weights(self, model: torch.nn.Module) -> None:
        """Push a trained model's weights into the engine in place (same architecture)."""
        weights = [(name, p.detach()) for name, p in model.state_dict().items()]

        def load(worker_model: Any) -> None:
            worker_model.load_weights(weights)

        if hasattr(self.llm, "apply_model"):
            self.llm.apply_model(load)
        else:  # older engines: the driver worker holds the model
            load(self.llm.llm_engine.model_executor.driver_worker.model_runner.model)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()  # cached prefixes were computed with old weights


def _structured(schema: dict[str, Any]) -> dict[str, Any]:
    """Sampling-parameter fields for JSON-schema-constrained output across vLLM versions."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(json=schema)}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema)}


def tool_call_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """JSON schema of one bare tool call ``{"name": ..., "arguments": {...}}`` of any tool.

    vLLM's structured outputs constrain a reply to a JSON document, so on that
    path the model writes the call without ``<tool_call>`` tags;
    :func:`labtwin.tools.parse_tool_call` accepts both forms.
    """
    options = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t["function"]["name"]},
                "arguments": t["function"]["parameters"],
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}
