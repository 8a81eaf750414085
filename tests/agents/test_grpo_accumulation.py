"""Gradient accumulation: 8 micro-batches of 1 give the loss and gradient of 1 batch of 8.

Which are exact:

- With ``loss_normaliser`` from ``loss_normaliser(...)`` (summing micro-batch
  losses): all three aggregations, in any micro-batch split, even when each
  micro-batch is padded only to its own length.
- Naively (each micro-batch normalised on its own, losses averaged over the
  number of equal-sized micro-batches): ``sequence_mean`` and ``dr_grpo`` (with
  a fixed ``max_completion_length``) are exact; ``token_mean`` is not when
  completion lengths differ, which is why the global token count exists.

Tensors are float64; the only differences are summation order (1e-12).
"""

from __future__ import annotations

import pytest
import torch

from labtwin.agents.grpo import AGGREGATIONS, grpo_loss, loss_normaliser

B, T = 8, 6
LENGTHS = [6, 1, 3, 5, 2, 6, 4, 6]  # halves hold 15 and 18 tokens
EXACT = dict(rtol=0, atol=1e-12)


def _rollout_batch():
    generator = torch.Generator().manual_seed(0)
    old = -torch.rand(B, T, generator=generator, dtype=torch.float64) * 3
    # Ratios spread over [0.6, 1.4] so that both clip sides are active.
    logprobs = old + torch.empty(B, T, dtype=torch.float64).uniform_(
        -0.5, 0.35, generator=generator
    )
    ref = old + 0.1 * torch.randn(B, T, generator=generator, dtype=torch.float64)
    advantages = torch.randn(B, generator=generator, dtype=torch.float64)
    mask = torch.tensor([[1] * n + [0] * (T - n) for n in LENGTHS])
    return logprobs, old, ref, advantages, mask


def _loss_and_grad(logprobs, old, ref, advantages, mask, **kwargs):
    logprobs = logprobs.clone().requires_grad_(True)
    loss, _ = grpo_loss(logprobs, old, advantages, mask, ref_logprobs=ref, kl_coef=0.05, **kwargs)
    loss.backward()
    return loss.detach(), logprobs.grad


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_eight_micro_batches_of_one_equal_one_batch_of_eight(aggregation):
    logprobs, old, ref, advantages, mask = _rollout_batch()
    full_loss, full_grad = _loss_and_grad(
        logprobs, old, ref, advantages, mask, aggregation=aggregation, max_completion_length=T
    )

    # Each micro-batch holds one completion trimmed to its own length (no padding).
    micro_masks = [mask[i : i + 1, : LENGTHS[i]] for i in range(B)]
    normaliser = loss_normaliser(micro_masks, aggregation, max_completion_length=T)
    accumulated_loss = torch.zeros((), dtype=torch.float64)
    accumulated_grad = torch.zeros(B, T, dtype=torch.float64)
    for i in range(B):
        rows, cols = slice(i, i + 1), slice(0, LENGTHS[i])
        loss, grad = _loss_and_grad(
            logprobs[rows, cols],
            old[rows, cols],
            ref[rows, cols],
            advantages[rows],
            micro_masks[i],
            aggregation=aggregation,
            max_completion_length=T,
            loss_normaliser=normaliser,
        )
        accumulated_loss += loss
        accumulated_grad[rows, cols] += grad

    torch.testing.assert_close(accumulated_loss, full_loss, **EXACT)
    torch.testing.assert_close(accumulated_grad, full_grad, **EXACT)


@pytest.mark.parametrize(
    "aggregation, exact", [("sequence_mean", True), ("dr_grpo", True), ("token_mean", False)]
)
def test_naive_accumulation_is_exact_only_without_token_mean(aggregation, exact):
    logprobs, old, ref, advantages, mask = _rollout_batch()
    full_loss, _ = _loss_and_grad(
        logprobs, old, ref, advantages, mask, aggregation=aggregation, max_completion_length=T
    )
    # Two micro-batches of 4, each normalised by itself, averaged.
    halves = [slice(0, 4), slice(4, 8)]
    naive = sum(
        _loss_and_grad(
            logprobs[h],
            old[h],
            ref[h],
            advantages[h],
            mask[h],
            aggregation=aggregation,
            max_completion_length=T,
        )[0]
        for h in halves
    ) / len(halves)
    assert torch.allclose(naive, full_loss, **EXACT) == exact
