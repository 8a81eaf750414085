"""HFPolicy: a local Hugging Face causal LM as a sampling and training policy.

Two jobs, both batched:

- ``sample`` / ``generate``: chat conversations (or token ids) in, ``n``
  completions per prompt out, each with its token ids, text and the per-token
  log-probabilities it was sampled with (the "old" log-probs of GRPO).
- ``logprobs``: the training forward pass; ``[B, T]`` log-probs of given
  completions after given prompts, with their mask. Rows with the same prompt
  (a GRPO group) share one forward pass of it: its keys and values are cached
  once and every completion of the group attends to them (``share_prompt``).

Completions of the same prompt are consecutive, the layout
``labtwin.agents.grpo.group_advantages`` expects. Prompts go in as token ids
as well as chats, so a multi-turn rollout can append tokens without
re-tokenising the history.
"""

from __future__ import annotations

import contextlib
import inspect
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DynamicCache,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.cache_utils import DynamicLayer

from labtwin.agents.grpo.losses import selective_log_softmax, token_entropy

Message = dict[str, Any]
# A list of processors, or a factory making fresh (stateful) ones for each generate batch.
LogitsProcessors = Sequence[LogitsProcessor] | Callable[[], Sequence[LogitsProcessor]]


@dataclass
class Completion:
    """One sampled completion of one prompt."""

    prompt_index: int
    """Index of the prompt (conversation) in the request; ``n`` samples share it."""
    prompt_ids: list[int]
    completion_ids: list[int]
    """Generated tokens, including the stop token when one was generated."""
    text: str
    """``completion_ids`` decoded without special tokens (``<|im_end|>`` dropped)."""
    logprobs: list[float]
    """Per-token log pi(token) at sampling time, one per completion token."""
    finish_reason: Literal["stop", "length"]


class CompletionLogprobs(NamedTuple):
    """Output of :meth:`HFPolicy.logprobs`."""

    logprobs: Tensor
    """``[B, T]`` log-probs of the completion tokens (0 at padding)."""
    mask: Tensor
    """``[B, T]`` bool, True at completion tokens, False at right padding."""
    entropy: Tensor | None
    """``[B, T]`` next-token entropy (no grad; 0 at padding), when asked for."""


def default_device() -> torch.device:
    """``cuda`` when a GPU is visible, else ``cpu``."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@contextlib.contextmanager
def transformers_bars_off() -> Iterator[None]:
    """transformers' own progress bars (``Writing model shards``, loading bars) off for the
    block and as they were after it: a training run shows its own progress, and a bar per
    checkpoint of a one-file model only scrolls it away."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def save_pretrained(path: str | Path, model: torch.nn.Module, tokenizer: Any = None) -> Path:
    """``model.save_pretrained(path)`` (and the tokenizer's, where given), without
    transformers' progress bars (:func:`transformers_bars_off`)."""
    with transformers_bars_off():
        model.save_pretrained(path)
        if tokenizer is not None:
            tokenizer.save_pretrained(path)
    return Path(path)


def load_causal_lm(path: str | Path, **kwargs: Any) -> torch.nn.Module:
    """``AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)`` with
    every parameter and buffer moved into memory of its own from torch's allocator.

    Loaded tensors sit where the file's header put them (here 40 bytes past a 64-byte
    boundary), while tensors torch allocates start on one; on CPUs with AVX-512 the matrix
    products then take other code paths and differ in the last bit, so a run resumed from a
    checkpoint drifted from the same run done straight (6e-8 in the weights after one step).
    In fresh memory a loaded model computes what the model that was saved computed.
    """
    with transformers_bars_off():
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.clone()
    return model


class HFPolicy:
    """A ``transformers`` causal LM with its tokenizer, for rollouts and training.

    Args:
        model: any ``AutoModelForCausalLM`` model.
        tokenizer: its tokenizer; must have a chat template for :meth:`sample`.
        device: where the model runs; default :func:`default_device`.
        share_prompt: in :meth:`logprobs`, run a prompt that several rows share
            once and let their completions attend to its cached keys and values
            (False: every row runs its whole prompt, as one padded batch).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        device: str | torch.device | None = None,
        share_prompt: bool = True,
    ) -> None:
        self.device = torch.device(device) if device is not None else default_device()
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        self.stop_token_ids = _stop_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_token_id = pad if pad is not None else self.stop_token_ids[0]
        self.share_prompt = share_prompt
        self.unshared_reason: str | None = None
        """Why the last :meth:`logprobs` call ran every row's prompt (None: it shared them)."""
        # models whose cache turned out not to be shareable, with the reason
        self._no_shared_cache: weakref.WeakKeyDictionary[torch.nn.Module, str] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        device: str | torch.device | None = None,
        dtype: torch.dtype | str = "auto",
        **model_kwargs: Any,
    ) -> HFPolicy:
        """Load tokenizer and model from a local folder (never from a hub).

        ``dtype="auto"`` keeps the dtype the weights were saved in.
        """
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = load_causal_lm(path, dtype=dtype, **model_kwargs)
        return cls(model, tokenizer, device=device)

    def encode_chats(
        self, conversations: Sequence[Sequence[Message]], tools: Sequence[dict] | None = None
    ) -> list[list[int]]:
        """Render chats with the chat template (plus generation prompt) to token ids.

        ``tools`` is an OpenAI-style tools list, shared by all conversations.
        """
        return encode_chats(self.tokenizer, conversations, tools)

    def sample(
        self,
        conversations: Sequence[Sequence[Message]],
        tools: Sequence[dict] | None = None,
        n: int = 1,
        **generate_kwargs: Any,
    ) -> list[Completion]:
        """``n`` completions for each chat; keyword arguments as :meth:`generate`."""
        return self.generate(self.encode_chats(conversations, tools), n=n, **generate_kwargs)

    @torch.no_grad()
    def generate(
        self,
        prompt_ids: Sequence[Sequence[int]],
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        logits_processor: LogitsProcessors | None = None,
        batch_size: int | None = None,
        seed: int | None = None,
    ) -> list[Completion]:
        """Sample ``n`` completions per prompt, ``len(prompt_ids) * n`` in all.

        Output order: the ``n`` samples of prompt 0, then of prompt 1, ...
        Prompts are left-padded into batches of ``batch_size`` rows (all at
        once by default); generation stops at the model's EOS token(s).

        ``logprobs`` are ``log_softmax(raw_logits / temperature)`` at each
        sampled token (temperature 1 when ``temperature == 0``, i.e. greedy):
        before top-p/top-k truncation and before ``logits_processor``. That is
        what :meth:`logprobs` recomputes, so the GRPO ratio is 1 on-policy.

        Args:
            prompt_ids: token ids of each prompt.
            n: samples per prompt (the GRPO group size).
            max_new_tokens: completion length limit.
            temperature: softmax temperature; 0 means greedy decoding.
            top_p: nucleus sampling mass (1 = off).
            top_k: keep the k most likely tokens (0 = off).
            logits_processor: extra ``transformers`` logits processors, or a
                zero-argument factory called once per batch for stateful ones
                (e.g. ``grammar.ToolCallGrammar``): the seam for constrained
                decoding of tool calls. They run before temperature, top-k and
                top-p.
            batch_size: rows per ``generate`` call, to bound memory (the raw
                logits of a batch, ``[rows, new_tokens, V]``, are kept).
            seed: seeds torch's global RNG before sampling.
        """
        if seed is not None:
            torch.manual_seed(seed)
        config = GenerationConfig(
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=top_p if temperature > 0 else None,
            top_k=top_k if temperature > 0 else None,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.stop_token_ids,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
            output_logits=True,
        )
        logprob_temperature = temperature if temperature > 0 else 1.0
        rows = [(i, list(p)) for i, p in enumerate(prompt_ids) for _ in range(n)]
        batch_size = batch_size or max(len(rows), 1)

        completions = []
        with _eval_mode(self.model):
            for start in range(0, len(rows), batch_size):
                batch = rows[start : start + batch_size]
                input_ids, attention_mask = _left_pad([p for _, p in batch], self.pad_token_id)
                out = self.model.generate(
                    input_ids=input_ids.to(self.device),
                    attention_mask=attention_mask.to(self.device),
                    generation_config=config,
                    logits_processor=_processors(logits_processor),
                )
                new_tokens = out.sequences[:, input_ids.shape[1] :]  # [rows, L]
                step_logprobs = torch.stack(  # [rows, L], one step at a time to save memory
                    [
                        torch.log_softmax(logits.float() / logprob_temperature, dim=-1)
                        .gather(-1, new_tokens[:, s : s + 1])
                        .squeeze(-1)
                        for s, logits in enumerate(out.logits)
                    ],
                    dim=1,
                )
                for row, (prompt_index, prompt) in enumerate(batch):
                    completions.append(
                        self._completion(prompt_index, prompt, new_tokens[row], step_logprobs[row])
                    )
        return completions

    def logprobs(
        self,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
        temperature: float = 1.0,
        with_entropy: bool = False,
        model: torch.nn.Module | None = None,
    ) -> CompletionLogprobs:
        """Log-probs of each completion after its prompt: the training forward pass.

        Rows are laid out as ``[left pad | prompt | completion | right pad]``, so
        completion token ``t`` of every row sits in column ``t`` of the output.
        Runs with gradients unless called under ``torch.no_grad()``; the
        model's train/eval mode is left as the caller set it.

        With ``share_prompt`` (the default), rows whose prompt token ids are
        identical are scored in two passes: each distinct prompt once
        (left-padded, one row per prompt) with the model's key/value cache on,
        then every completion against its prompt's cached keys and values
        (the cache rows gathered per completion, with positions continuing
        after the prompt). Gradients flow through the gathered keys and values
        into the prompt's one forward pass, summed over its completions, so
        log-probs, entropies and gradients equal those of the unshared pass
        up to float summation order. Calls that cannot share run the single
        padded pass instead and say why in :attr:`unshared_reason`: no two
        rows share a prompt, ``share_prompt`` is off, gradient checkpointing
        is on (transformers drops the cache), the model's forward takes no
        cache, or its cache is not a plain ``DynamicCache`` of full-attention
        layers (sliding-window, static, quantised, linear-attention caches).

        Args:
            prompt_ids: ``B`` prompts (non-empty).
            completion_ids: ``B`` completions.
            temperature: divide the logits by it, as at sampling time.
            with_entropy: also return per-token entropies (computed without grad).
            model: the network to score with, on this policy's device and sharing
                its tokenizer; default this policy's own model. GRPO passes the
                frozen reference model here for the KL term.

        Returns:
            ``CompletionLogprobs(logprobs [B, T], mask [B, T], entropy [B, T] | None)``
            with ``T`` the longest completion, on the policy's device.
        """
        model = self.model if model is None else model
        reason = self._unshared_reason(model, prompt_ids)
        scored = None
        if reason is None:
            try:
                scored = self._shared_prompt_logits(model, prompt_ids, completion_ids)
            except _CacheNotShareable as error:
                reason = self._no_shared_cache[model] = str(error)
        if scored is None:
            scored = self._padded_logits(model, prompt_ids, completion_ids)
        self.unshared_reason = reason
        logits, targets, mask = scored
        logits = logits / temperature  # [B, T, V]
        logprobs = selective_log_softmax(logits, targets) * mask
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = token_entropy(logits, mask)
        return CompletionLogprobs(logprobs, mask, entropy)

    def _unshared_reason(
        self, model: torch.nn.Module, prompt_ids: Sequence[Sequence[int]]
    ) -> str | None:
        """Why this call cannot share prompts, found before running anything (None: it can)."""
        if not self.share_prompt:
            return "share_prompt is off"
        if len({tuple(p) for p in prompt_ids}) == len(prompt_ids):
            return "no two rows share a prompt"
        if model in self._no_shared_cache:
            return self._no_shared_cache[model]
        if _checkpointing(model) and model.training:
            return "gradient checkpointing is on (transformers turns the cache off)"
        if getattr(getattr(model, "config", None), "is_encoder_decoder", False):
            return "an encoder-decoder model"
        if _cache_argument(model) is None:
            return "the model's forward takes no cache argument"
        return None

    def _padded_logits(
        self,
        model: torch.nn.Module,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Every row's prompt and completion in one padded pass: logits ``[B, T, V]`` of the
        completion tokens (before the temperature), the tokens ``[B, T]`` and their mask."""
        prompt_len = max(len(p) for p in prompt_ids)
        completion_len = max(max(len(c) for c in completion_ids), 1)
        input_ids, attention_mask = [], []
        for prompt, completion in zip(prompt_ids, completion_ids, strict=True):
            left, right = prompt_len - len(prompt), completion_len - len(completion)
            pad = self.pad_token_id
            input_ids.append([pad] * left + list(prompt) + list(completion) + [pad] * right)
            attention_mask.append([0] * left + [1] * (len(prompt) + len(completion)) + [0] * right)
        input_ids = torch.tensor(input_ids, device=self.device)
        attention_mask = torch.tensor(attention_mask, device=self.device)
        position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)

        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            logits_to_keep=completion_len + 1,
            use_cache=False,
        )
        # The logit at position j predicts token j + 1: drop the last one.
        logits = out.logits[:, :-1, :]
        return logits, input_ids[:, prompt_len:], attention_mask[:, prompt_len:].bool()

    def _shared_prompt_logits(
        self,
        model: torch.nn.Module,
        prompt_ids: Sequence[Sequence[int]],
        completion_ids: Sequence[Sequence[int]],
    ) -> tuple[Tensor, Tensor, Tensor]:
        """As :meth:`_padded_logits`, with each distinct prompt run once and its cached keys
        and values gathered for its completions. Raises :class:`_CacheNotShareable`."""
        pad, device = self.pad_token_id, self.device
        distinct: dict[tuple[int, ...], int] = {}
        prompt_of_row = [distinct.setdefault(tuple(p), len(distinct)) for p in prompt_ids]
        rows = torch.tensor(prompt_of_row, device=device)

        # pass 1: each distinct prompt once, left-padded, with its keys and values cached
        prompt_ids_, prompt_mask = _left_pad([list(p) for p in distinct], pad)
        prompt_ids_, prompt_mask = prompt_ids_.to(device), prompt_mask.to(device)
        cache_argument = _cache_argument(model)
        out = model(
            input_ids=prompt_ids_,
            attention_mask=prompt_mask,
            position_ids=(prompt_mask.cumsum(dim=1) - 1).clamp(min=0),
            logits_to_keep=1,
            use_cache=True,
        )
        cache = getattr(out, "cache", None)
        if cache is None:
            cache = getattr(out, "past_key_values", None)
        _check_shareable(cache)
        for layer in cache.layers:  # one cache row per completion (differentiable gather)
            layer.batch_select_indices(rows)

        # pass 2: every completion after its prompt's cached keys and values
        completion_len = max(max(len(c) for c in completion_ids), 1)
        targets = torch.tensor(
            [list(c) + [pad] * (completion_len - len(c)) for c in completion_ids], device=device
        )
        mask = torch.tensor(
            [[1] * len(c) + [0] * (completion_len - len(c)) for c in completion_ids], device=device
        )
        # the last prompt token's logit predicts completion token 0
        logits = out.logits[:, -1:, :].index_select(0, rows)  # [B, 1, V]
        if completion_len > 1:  # tokens 0 .. T-2 predict tokens 1 .. T-1
            attention_mask = torch.cat([prompt_mask.index_select(0, rows), mask], dim=1)[:, :-1]
            position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
            out = model(
                input_ids=targets[:, :-1],
                attention_mask=attention_mask,
                position_ids=position_ids[:, prompt_mask.shape[1] :],
                use_cache=True,
                **{cache_argument: cache},
            )
            logits = torch.cat([logits, out.logits], dim=1)
        return logits, targets, mask.bool()

    def _completion(
        self, prompt_index: int, prompt: list[int], new_tokens: Tensor, logprobs: Tensor
    ) -> Completion:
        """Cut one generated row at its first stop token."""
        tokens = new_tokens.tolist()
        stops = [t for t, token in enumerate(tokens) if token in self.stop_token_ids]
        length = stops[0] + 1 if stops else len(tokens)
        ids = tokens[:length]
        return Completion(
            prompt_index=prompt_index,
            prompt_ids=prompt,
            completion_ids=ids,
            text=self.tokenizer.decode(ids, skip_special_tokens=True),
            logprobs=logprobs[:length].tolist(),
            finish_reason="stop" if stops else "length",
        )


class _CacheNotShareable(Exception):
    """The model's key/value cache cannot be gathered per completion; the message says why."""


def _cache_argument(model: torch.nn.Module) -> str | None:
    """The name under which the model's forward takes a key/value cache: ``cache``
    (transformers 5.2x), ``past_key_values`` (earlier), or None."""
    inner = getattr(model, "_orig_mod", getattr(model, "module", model))  # compiled, DDP
    parameters = inspect.signature(inner.forward).parameters
    for name in ("cache", "past_key_values"):
        if name in parameters:
            return name
    return None


def _checkpointing(model: torch.nn.Module) -> bool:
    """Whether activation (gradient) checkpointing is on, under either transformers name."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):  # on the type: reading the old name warns
            return bool(getattr(model, name))
    return False


def _check_shareable(cache: Any) -> None:
    """Raise :class:`_CacheNotShareable` unless ``cache`` is a ``DynamicCache`` whose
    layers are all plain full-attention ``DynamicLayer`` (whose ``update`` concatenates,
    so new keys append after the gathered prompt's and gradients reach it)."""
    if cache is None:
        raise _CacheNotShareable("the model returned no cache")
    if not isinstance(cache, DynamicCache) or not hasattr(cache, "layers"):
        raise _CacheNotShareable(f"its cache is a {type(cache).__name__}, not a DynamicCache")
    kinds = {type(layer).__name__ for layer in cache.layers if type(layer) is not DynamicLayer}
    if kinds:
        raise _CacheNotShareable(
            f"its cache has {', '.join(sorted(kinds))} layers, not only full-attention "
            "DynamicLayer ones"
        )


def _processors(logits_processor: LogitsProcessors | None) -> LogitsProcessorList:
    if logits_processor is None:
        return LogitsProcessorList()
    if callable(logits_processor) and not isinstance(logits_processor, LogitsProcessor):
        logits_processor = logits_processor()
    elif isinstance(logits_processor, LogitsProcessor):
        logits_processor = [logits_processor]
    return LogitsProcessorList(logits_processor)


def encode_chats(
    tokenizer: PreTrainedTokenizerBase,
    conversations: Sequence[Sequence[Message]],
    tools: Sequence[dict] | None = None,
) -> list[list[int]]:
    """Chats rendered by the tokenizer's chat template (with generation prompt) as token ids."""
    prompts = []
    for messages in conversations:
        text = tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools) if tools else None,
            tokenize=False,
            add_generation_prompt=True,
        )
        prompts.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    return prompts


def _stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """EOS ids from the model's generation config, else the tokenizer's EOS."""
    eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("model and tokenizer define no EOS token to stop generation")
    return [eos] if isinstance(eos, int) else list(eos)


def _left_pad(sequences: Sequence[Sequence[int]], pad_token_id: int) -> tuple[Tensor, Tensor]:
    """``[N, L]`` input ids left-padded with ``pad_token_id`` and their attention mask."""
    length = max(len(s) for s in sequences)
    ids = [[pad_token_id] * (length - len(s)) + list(s) for s in sequences]
    mask = [[0] * (length - len(s)) + [1] * len(s) for s in sequences]
    return torch.tensor(ids), torch.tensor(mask)


@contextlib.contextmanager
def _eval_mode(model: torch.nn.Module) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)
