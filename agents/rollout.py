"""Batched multi-turn rollouts of tool-calling campaigns.

One call runs a batch of campaigns to the end: generate a reply for every
live conversation in one batched ``generate``, parse the tool calls, step all
campaigns with one simulator call (:class:`labtwin.tools.ChatLabEnv`), append
the tool results, and repeat until every campaign has spent its budget or
submitted an answer.

Each conversation is kept as one token sequence: the first prompt, then the
model's tokens (mask 1, with their sampling log-probs) and the environment's
tokens (mask 0) as they were produced. Environment turns are tokenised as the
difference between the chat template's rendering of the conversation with
and without them, so no model token is ever re-tokenised.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from labtwin.campaign import Record, Recorder
from labtwin.measurement import Measurement
from labtwin.task import Task
from labtwin.tools import ChatLabEnv

Message = dict[str, Any]


@dataclass
class Episode:
    """One finished campaign as a training sample."""

    group: int
    """Index of the campaign seed; episodes of the same group share hidden conditions."""
    seed: int
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    """Everything after the first prompt: model and environment tokens in order."""
    completion_mask: list[int] = field(default_factory=list)
    """1 where the model produced the token, 0 for environment tokens."""
    old_logprobs: list[float] = field(default_factory=list)
    """Sampling log-probs at model tokens, 0 elsewhere."""
    reward: float = 0.0
    messages: list[Message] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    """The campaign's records (measurements, scores, kinds), as the engine made them."""
    campaign_id: int = -1
    conditions: dict[str, Any] = field(default_factory=dict)
    """The campaign's conditions, hidden ones included (what its scores used)."""
    turns: int = 0
    truncated: bool = False

    @property
    def measurements(self) -> list[Measurement]:
        return [r.measurement for r in self.records]

    def extend(self, ids: Sequence[int], from_model: bool, logprobs: Sequence[float] = ()) -> None:
        self.completion_ids += list(ids)
        self.completion_mask += [int(from_model)] * len(ids)
        self.old_logprobs += list(logprobs) if from_model else [0.0] * len(ids)


@dataclass
class RolloutTiming:
    generation_s: float = 0.0
    simulation_s: float = 0.0
    tokens_generated: int = 0


def render(
    tokenizer: Any, messages: list[Message], tools: list[dict], generation_prompt: bool
) -> str:
    return tokenizer.apply_chat_template(
        messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt
    )


def environment_tokens(
    tokenizer: Any, messages: list[Message], n_new: int, tools: list[dict]
) -> list[int]:
    """Token ids of the last ``n_new`` messages plus the next generation prompt.

    Computed as the template's rendering of the whole conversation minus its
    rendering without the new messages; templates in use (ChatML, Qwen,
    Llama 3) render conversations prefix-consistently.
    """
    before = render(tokenizer, messages[:-n_new], tools, generation_prompt=False)
    after = render(tokenizer, messages, tools, generation_prompt=True)
    if not after.startswith(before):
        raise ValueError("the chat template does not render this conversation prefix-consistently")
    return tokenizer(after[len(before) :], add_special_tokens=False)["input_ids"]


def run_episodes(
    policy: Any,
    task: Task,
    seeds: Sequence[int],
    group_size: int,
    invalid_penalty: float = 0.1,
    max_new_tokens: int = 128,
    temperature: float = 1.0,
    logits_processor: Sequence[Any] | None = None,
    replies: Callable[[list[int], ChatLabEnv], list[str]] | None = None,
    seed: int | None = None,
    generate_kwargs: dict[str, Any] | None = None,
    recorder: Recorder | None = None,
    first_campaign_id: int = 0,
    batch_factory: Any = None,
) -> tuple[list[Episode], RolloutTiming]:
    """Run ``len(seeds) * group_size`` campaigns to their end.

    ``policy`` is an :class:`~labtwin.agents.policy.HFPolicy` (anything with
    ``tokenizer``, ``stop_token_ids``, ``encode_chats`` and ``generate``).
    ``replies``, when given, scripts the assistant instead of sampling (for
    warm-start data and tests): it gets the live conversation indices and the
    env and returns their reply texts; the model tokens are then the
    tokenised replies with log-prob 0. ``seed`` makes sampling reproducible
    (turn ``k`` samples with ``seed + k``). ``generate_kwargs`` go to
    ``policy.generate`` as they are (e.g. ``json_schema`` for vLLM).
    ``recorder`` (a :class:`~labtwin.runs.RunStore`) records every campaign's
    conditions and every record; campaigns are numbered from ``first_campaign_id``.
    ``batch_factory`` replaces the campaign engine (Ray lab workers: ``labtwin.distributed``).
    """
    env = ChatLabEnv(
        task,
        invalid_penalty=invalid_penalty,
        recorder=recorder,
        first_campaign_id=first_campaign_id,
        **({"batch_factory": batch_factory} if batch_factory is not None else {}),
    )
    tokenizer = policy.tokenizer
    stop = policy.stop_token_ids[0]
    campaign_seeds = [s for s in seeds for _ in range(group_size)]
    chats = env.reset(campaign_seeds)
    group_prompts = policy.encode_chats(chats[::group_size], env.tools)  # a group shares its prompt
    episodes = [
        Episode(group=i // group_size, seed=seed, prompt_ids=list(group_prompts[i // group_size]))
        for i, seed in enumerate(campaign_seeds)
    ]
    timing = RolloutTiming()

    turn = 0
    while env.live:
        live = env.live
        turn += 1
        start = time.perf_counter()
        if replies is None:
            outs = policy.generate(
                [episodes[i].prompt_ids + episodes[i].completion_ids for i in live],
                n=1,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                seed=None if seed is None else seed + turn,
                **{"logits_processor": logits_processor, **(generate_kwargs or {})},
            )
            texts = [o.text for o in outs]
            for i, o in zip(live, outs):
                episodes[i].extend(o.completion_ids, True, o.logprobs)
                if o.finish_reason == "length":  # close the turn as the template would
                    episodes[i].extend([stop], False)
                    episodes[i].truncated = True
                timing.tokens_generated += len(o.completion_ids)
        else:
            texts = replies(live, env)
            for i, text in zip(live, texts):
                ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [stop]
                episodes[i].extend(ids, True, [0.0] * len(ids))
        timing.generation_s += time.perf_counter() - start

        start = time.perf_counter()
        env.step(texts)
        timing.simulation_s += time.perf_counter() - start

        for i in live:
            conversation = env.conversations[i]
            episodes[i].turns += 1
            if not conversation.done:
                # the tool result (newest message) and the next generation prompt
                episodes[i].extend(
                    environment_tokens(tokenizer, conversation.messages, 1, env.tools), False
                )

    for episode, conversation in zip(episodes, env.conversations):
        episode.reward = conversation.total_reward
        episode.messages = conversation.messages
        episode.records = list(conversation.campaign.history)
        episode.campaign_id = conversation.campaign.id
        episode.conditions = conversation.campaign.conditions
    return episodes, timing
