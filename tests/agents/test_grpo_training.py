"""GRPO with the tiny model: a step changes the weights; accumulation is exact."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from labtwin.agents.grpo import (  # noqa: E402
    group_advantages,
    grpo_loss,
    loss_normaliser,
)
from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer  # noqa: E402

CHATS = [
    [{"role": "user", "content": "Propose a temperature in kelvin."}],
    [{"role": "user", "content": "Propose a pressure in bar."}],
]
GROUP_SIZE = 4


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The tiny model's matrices are so small that a second thread only adds overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def distinct_characters(completions: list[str], **kwargs) -> list[float]:
    """Toy reward: how many distinct characters a completion uses.

    >>> distinct_characters(["aab", "abc"])
    [2.0, 3.0]
    """
    return [float(len(set(text))) for text in completions]


def _policy(seed: int = 0) -> HFPolicy:
    tokenizer = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tokenizer, seed=seed), tokenizer, device="cpu")


def test_training_step_changes_every_parameter():
    policy = _policy()
    completions = policy.sample(CHATS, n=GROUP_SIZE, max_new_tokens=10, seed=0)
    rewards = torch.tensor(distinct_characters([c.text for c in completions]))
    advantages = group_advantages(rewards, GROUP_SIZE)
    assert advantages.abs().sum() > 0

    before = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    optimizer = torch.optim.Adam(policy.model.parameters(), lr=1e-2)
    policy.model.train()
    out = policy.logprobs(
        [c.prompt_ids for c in completions], [c.completion_ids for c in completions]
    )
    old = torch.zeros_like(out.logprobs)
    for row, c in enumerate(completions):
        old[row, : len(c.logprobs)] = torch.tensor(c.logprobs)
    loss, metrics = grpo_loss(out.logprobs, old, advantages, out.mask)
    loss.backward()
    optimizer.step()

    # On-policy: the ratio is 1 up to float32 noise, so nothing is clipped.
    assert metrics["ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert metrics["clip_fraction"] == 0.0
    for name, param in policy.model.named_parameters():
        assert not torch.equal(param, before[name]), f"{name} did not change"


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "dr_grpo"])
def test_model_gradients_of_8x1_micro_batches_equal_1x8(aggregation):
    """Same gradient whether 8 completions go through the model at once or one by one.

    Rows are padded differently in the two cases (to the batch's longest prompt
    and completion vs not at all), so float32 sums differ in order: tolerance
    rtol 1e-4, atol 1e-6 on gradients of magnitude ~1e-2.
    """
    policy = _policy()
    completions = policy.sample(CHATS, n=GROUP_SIZE, max_new_tokens=10, seed=2)
    advantages = group_advantages(
        torch.tensor(distinct_characters([c.text for c in completions])), GROUP_SIZE
    )
    prompts = [c.prompt_ids for c in completions]
    outputs = [c.completion_ids for c in completions]
    max_len = 10

    def grads_after(batches):
        policy.model.zero_grad()
        masks = [policy.logprobs(prompts[b], outputs[b]).mask.detach() for b in batches]
        normaliser = loss_normaliser(masks, aggregation, max_completion_length=max_len)
        for b in batches:
            out = policy.logprobs(prompts[b], outputs[b])
            # Off-policy by a fixed shift so that clipping is active in some tokens.
            old = out.logprobs.detach() + 0.3 * torch.sin(torch.arange(out.logprobs.shape[1]))
            loss, _ = grpo_loss(
                out.logprobs,
                old,
                advantages[b],
                out.mask,
                aggregation=aggregation,
                max_completion_length=max_len,
                loss_normaliser=normaliser,
            )
            loss.backward()
        return {n: p.grad.clone() for n, p in policy.model.named_parameters()}

    one_batch = grads_after([slice(0, 8)])
    micro_batches = grads_after([slice(i, i + 1) for i in range(8)])
    for name, grad in one_batch.items():
        assert grad.abs().sum() > 0
        torch.testing.assert_close(micro_batches[name], grad, rtol=1e-4, atol=1e-6, msg=name)
