"""HFPolicy on the tiny model: sampling layout, sampling log-probs, logits processors."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import LogitsProcessor  # noqa: E402

from labtwin.agents.policy import (  # noqa: E402
    HFPolicy,
    build_tiny_model,
    build_tiny_tokenizer,
    save_tiny,
)

CHATS = [
    [{"role": "user", "content": "Maximise the yield."}],
    [
        {"role": "system", "content": "You run a batch reactor."},
        {"role": "user", "content": "Fit the Arrhenius law to the rate constants."},
    ],
]
TOOLS = [{"type": "function", "function": {"name": "run_experiment", "parameters": {}}}]
# Sampling runs through the KV cache on a left-padded batch, the recomputation in
# one forward pass on a differently padded batch: same float32 math, different
# order -> agreement to ~1e-6 in log-probs of magnitude ~6; 1e-4 leaves margin.
LOGPROB_ATOL = 1e-4


@pytest.fixture(scope="module")
def policy():
    tokenizer = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")


def _assert_logprobs_match_forward(policy, completions, temperature):
    with torch.no_grad():
        out = policy.logprobs(
            [c.prompt_ids for c in completions],
            [c.completion_ids for c in completions],
            temperature=temperature,
        )
    assert out.logprobs.shape == (len(completions), max(len(c.completion_ids) for c in completions))
    for row, completion in enumerate(completions):
        n = len(completion.completion_ids)
        assert out.mask[row].sum().item() == n and out.mask[row, :n].all()
        torch.testing.assert_close(
            out.logprobs[row, :n], torch.tensor(completion.logprobs), rtol=0, atol=LOGPROB_ATOL
        )


def test_sample_returns_n_consecutive_samples_per_prompt(policy):
    completions = policy.sample(CHATS, tools=TOOLS, n=3, max_new_tokens=8, seed=0)
    assert [c.prompt_index for c in completions] == [0, 0, 0, 1, 1, 1]
    prompts = policy.encode_chats(CHATS, tools=TOOLS)
    for c in completions:
        assert c.prompt_ids == prompts[c.prompt_index]
        assert 1 <= len(c.completion_ids) <= 8 and len(c.logprobs) == len(c.completion_ids)
        assert all(lp <= 0 for lp in c.logprobs)
    # Same seed, same samples.
    again = policy.sample(CHATS, tools=TOOLS, n=3, max_new_tokens=8, seed=0)
    assert [c.completion_ids for c in again] == [c.completion_ids for c in completions]


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_sampling_logprobs_equal_a_recomputed_forward_pass(policy, temperature, top_p):
    completions = policy.sample(
        CHATS, n=2, max_new_tokens=12, temperature=temperature, top_p=top_p, seed=1, batch_size=3
    )
    _assert_logprobs_match_forward(policy, completions, temperature=temperature or 1.0)
    if temperature == 0.0:  # greedy: the n samples of a prompt are identical
        assert completions[0].completion_ids == completions[1].completion_ids


class StopAfter(LogitsProcessor):
    """Allow only ``allowed`` tokens, and force ``stop_id`` once ``length`` are generated."""

    def __init__(self, prompt_length: int, length: int, allowed: list[int], stop_id: int):
        self.prompt_length, self.length, self.stop_id = prompt_length, length, stop_id
        self.allowed = torch.tensor(allowed)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        keep = self.allowed if input_ids.shape[1] - self.prompt_length < self.length else None
        keep = torch.tensor([self.stop_id]) if keep is None else keep
        masked = torch.full_like(scores, -torch.inf)
        masked[:, keep] = scores[:, keep]
        return masked


def test_logits_processor_constrains_sampling_and_stop_ends_completion(policy):
    tokenizer = policy.tokenizer
    digits = [tokenizer.convert_tokens_to_ids(d) for d in "0123456789"]
    stop_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompts = policy.encode_chats(CHATS[:1])
    processor = StopAfter(len(prompts[0]), length=5, allowed=digits, stop_id=stop_id)
    completions = policy.generate(
        prompts, n=4, max_new_tokens=20, logits_processor=[processor], seed=0
    )
    for c in completions:
        assert c.finish_reason == "stop"
        assert c.completion_ids[-1] == stop_id and len(c.completion_ids) == 6
        assert c.text.isdigit() and len(c.text) == 5  # <|im_end|> is dropped from the text
    # Log-probs are the model's own (before the processor), as the training pass sees them.
    _assert_logprobs_match_forward(policy, completions, temperature=1.0)


def test_from_pretrained_loads_a_local_path(tmp_path, policy):
    loaded = HFPolicy.from_pretrained(save_tiny(tmp_path / "tiny", seed=0), device="cpu")
    assert loaded.device == torch.device("cpu")
    assert loaded.stop_token_ids == policy.stop_token_ids
    kwargs = dict(n=2, max_new_tokens=6, seed=5)
    assert [c.completion_ids for c in loaded.sample(CHATS, **kwargs)] == [
        c.completion_ids for c in policy.sample(CHATS, **kwargs)
    ]


def test_loaded_weights_live_in_memory_of_their_own(tmp_path):
    """A loaded model's tensors are moved off the offsets the file gave them, onto torch's
    own 64-byte aligned allocations, where matrix products take the code paths of the model
    that was saved (on AVX-512 CPUs the offset changed the last bit: a resumed run drifted)."""
    loaded = HFPolicy.from_pretrained(save_tiny(tmp_path / "tiny", seed=0), device="cpu")
    tensors = [*loaded.model.parameters(), *loaded.model.buffers()]
    assert tensors and all(t.data_ptr() % 64 == 0 for t in tensors)


def test_logprobs_pads_and_reports_entropy(policy):
    prompts = [[5, 6, 7], [8]]
    completions = [[9, 10], [11, 12, 13, 14]]
    out = policy.logprobs(prompts, completions, with_entropy=True)
    assert out.mask.tolist() == [[True, True, False, False], [True, True, True, True]]
    assert out.logprobs[0, 2:].abs().sum() == 0 and out.entropy[0, 2:].abs().sum() == 0
    assert out.logprobs.requires_grad and not out.entropy.requires_grad
    # Row by row (no padding at all) gives the same numbers.
    for row in range(2):
        single = policy.logprobs(prompts[row : row + 1], completions[row : row + 1])
        n = len(completions[row])
        torch.testing.assert_close(
            single.logprobs[0], out.logprobs[row, :n], rtol=0, atol=LOGPROB_ATOL
        )
