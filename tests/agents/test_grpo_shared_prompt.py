"""A GRPO group's shared prompt run once (``HFPolicy(share_prompt=True)``) gives the numbers of
the unshared pass that runs every row's whole prompt.

Tiny model, 2 prompts of different lengths (so the prompt pass is left-padded) with 4
completions each of uneven lengths 0-7 (right padding; one empty, one of a single token),
and multi-turn rows whose completions hold environment tokens (mask 0).

Tolerances: both paths compute the same float32 function with different matrix shapes
(one prompt row instead of four, the completion attending to gathered cache rows) and so
a different summation order; observed differences are ~5e-7 in log-probs of magnitude ~6
and ~2e-6 in entropies of magnitude ~6, ~1e-6 of the largest entry in gradients. Log-probs
and entropies: atol 2e-5 (an off-by-one position or a lost prompt token moves them by
~1e-1). Gradients: rtol 1e-4 with atol 1e-6 on entries of magnitude up to ~1e-2 (a cache
detached from the prompt's graph changes most of them by ~10-100 %).
"""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from labtwin.agents.grpo import group_advantages  # noqa: E402
from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer  # noqa: E402
from labtwin.agents.rollout import Episode  # noqa: E402
from labtwin.agents.train import TrainConfig, grpo_update, micro_batches  # noqa: E402

GROUP_SIZE = 4
PROMPT_LENGTHS = (9, 14)
COMPLETION_LENGTHS = (5, 3, 1, 7, 2, 4, 7, 0)  # rows 0-3: prompt 0, rows 4-7: prompt 1
LOGPROB_ATOL = 2e-5
GRAD_TOL = dict(rtol=1e-4, atol=1e-6)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture
def policy(tokenizer):
    return HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")


def _batch(seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Groups of ``GROUP_SIZE`` rows, each group one prompt, completions of uneven lengths."""
    generator = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, 400, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]
    completions = [
        torch.randint(3, 400, (n,), generator=generator).tolist() for n in COMPLETION_LENGTHS
    ]
    return [p for p in prompts for _ in range(GROUP_SIZE)], completions


def _score(policy, share, prompts, completions, **kwargs):
    policy.share_prompt = share
    out = policy.logprobs(prompts, completions, with_entropy=True, **kwargs)
    return out, policy.unshared_reason


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_logprobs_and_entropy_equal_the_unshared_pass(tokenizer, attention):
    model = build_tiny_model(tokenizer, seed=0, attn_implementation=attention)
    policy = HFPolicy(model, tokenizer, device="cpu")
    prompts, completions = _batch()
    shared, reason = _score(policy, True, prompts, completions, temperature=0.7)
    assert reason is None  # the prompts were shared
    unshared, reason = _score(policy, False, prompts, completions, temperature=0.7)
    assert reason == "share_prompt is off"

    assert shared.mask.tolist() == unshared.mask.tolist()
    assert shared.mask.sum(dim=1).tolist() == list(COMPLETION_LENGTHS)
    assert shared.logprobs.requires_grad and not shared.entropy.requires_grad
    torch.testing.assert_close(shared.logprobs, unshared.logprobs, rtol=0, atol=LOGPROB_ATOL)
    torch.testing.assert_close(shared.entropy, unshared.entropy, rtol=0, atol=LOGPROB_ATOL)
    # padding stays 0, and real tokens have real log-probs
    assert shared.logprobs[~shared.mask].abs().sum() == 0
    assert (shared.logprobs[shared.mask] < 0).all()


def test_rows_in_any_order_and_a_lone_prompt_are_grouped_by_their_ids(policy):
    """Groups need not be consecutive; a prompt seen once is a group of one."""
    prompts, completions = _batch(seed=1)
    order = [5, 0, 7, 2, 1, 6, 3]  # interleaved groups, one row of prompt 1 left out
    prompts = [prompts[i] for i in order] + [[11, 12, 13]]
    completions = [completions[i] for i in order] + [[14, 15]]
    with torch.no_grad():  # the reference model's path
        shared, reason = _score(policy, True, prompts, completions)
        assert reason is None
        unshared, _ = _score(policy, False, prompts, completions)
    assert not shared.logprobs.requires_grad
    torch.testing.assert_close(shared.logprobs, unshared.logprobs, rtol=0, atol=LOGPROB_ATOL)
    torch.testing.assert_close(shared.entropy, unshared.entropy, rtol=0, atol=LOGPROB_ATOL)


def _episodes(policy: HFPolicy) -> tuple[list[Episode], torch.Tensor]:
    """Two groups of multi-turn episodes: model tokens, environment tokens (mask 0), model
    tokens; old log-probs off the current policy by a fixed shift so that clipping acts."""
    prompts, completions = _batch(seed=2)
    episodes = []
    for row, (prompt, completion) in enumerate(zip(prompts, completions)):
        episode = Episode(group=row // GROUP_SIZE, seed=row // GROUP_SIZE, prompt_ids=prompt)
        half = len(completion) // 2
        episode.extend(completion[:half], True, [0.0] * half)
        if row % 2:  # a tool result and the next generation prompt, written by the environment
            episode.extend([21, 22, 23], False)
        episode.extend(completion[half:], True, [0.0] * (len(completion) - half))
        episodes.append(episode)
    with torch.no_grad():
        policy.share_prompt = False
        out = policy.logprobs(
            [e.prompt_ids for e in episodes], [e.completion_ids for e in episodes]
        )
    for row, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        shift = 0.3 * torch.sin(torch.arange(n) + row)
        episode.old_logprobs = [
            (lp + s).item() if m else 0.0
            for lp, s, m in zip(out.logprobs[row, :n], shift, episode.completion_mask)
        ]
    rewards = torch.tensor([0.0, 1.0, 0.5, 2.0, 1.0, 0.0, 0.0, 3.0])
    return episodes, group_advantages(rewards, GROUP_SIZE)


@pytest.mark.parametrize("micro_batch_size", [8, 6, 3])
def test_grpo_update_gradients_equal_the_unshared_pass(policy, tokenizer, micro_batch_size):
    """labtwin's ``grpo_update`` with the KL term and entropy: every parameter's gradient.

    ``micro_batch_size=6`` keeps each group of 4 in a micro-batch of its own;
    ``micro_batch_size=3`` cuts each group into 3 rows and 1 (its prompt runs once in each).
    """
    episodes, advantages = _episodes(policy)
    reference = build_tiny_model(tokenizer, seed=1).eval().requires_grad_(False)
    cfg = TrainConfig(
        micro_batch_size=micro_batch_size,
        kl_coef=0.05,
        max_grad_norm=1e9,  # no clipping: the gradients stay as computed
        progress=False,
    )
    # lr 0: the step leaves the weights as they were, so both passes start from them
    optimizer = torch.optim.SGD(policy.model.parameters(), lr=0.0)
    before = copy.deepcopy(policy.model.state_dict())

    def gradients(share: bool) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        policy.share_prompt = share
        metrics = grpo_update(policy, reference, optimizer, episodes, advantages, cfg)
        # the last call was the reference model's, on the last micro-batch (one row of 3)
        alone = "no two rows share a prompt" if micro_batch_size == 3 else None
        assert policy.unshared_reason == (alone if share else "share_prompt is off")
        return {n: p.grad.clone() for n, p in policy.model.named_parameters()}, metrics

    shared, shared_metrics = gradients(True)
    unshared, unshared_metrics = gradients(False)
    assert 0 < unshared_metrics["clip_fraction"] < 1 and unshared_metrics["kl"] > 0
    for key in ("loss", "clip_fraction", "kl", "entropy", "ratio_mean", "grad_norm"):
        assert shared_metrics[key] == pytest.approx(unshared_metrics[key], rel=1e-4), key
    for name, grad in unshared.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(shared[name], grad, **GRAD_TOL, msg=name)
    for name, value in policy.model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_prompt_gradients_come_through_the_cache(policy):
    """The embedding rows of tokens that occur only in the prompt get their gradient only
    through the cached keys and values: equal to the unshared pass, and not zero."""
    prompts, completions = _batch(seed=3)
    only_in_prompts = sorted({t for p in prompts for t in p} - {t for c in completions for t in c})
    assert len(only_in_prompts) > 5
    weight = policy.model.get_input_embeddings().weight

    def embedding_grad(share: bool) -> torch.Tensor:
        out, _ = _score(policy, share, prompts, completions)
        (grad,) = torch.autograd.grad(out.logprobs.sum(), [weight])
        return grad[only_in_prompts]

    shared, unshared = embedding_grad(True), embedding_grad(False)
    assert (shared.abs().sum(dim=1) > 0).all()
    torch.testing.assert_close(shared, unshared, **GRAD_TOL)


def test_falls_back_to_the_unshared_pass_and_says_why(tokenizer):
    prompts, completions = _batch(seed=4)

    distinct = HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
    _, reason = _score(distinct, True, [p + [i] for i, p in enumerate(prompts)], completions)
    assert reason == "no two rows share a prompt"

    # Qwen2 with sliding-window attention on every layer: a DynamicSlidingWindowLayer cache
    sliding = build_tiny_model(
        tokenizer, seed=0, use_sliding_window=True, sliding_window=4, max_window_layers=0
    )
    policy = HFPolicy(sliding, tokenizer, device="cpu")
    out, reason = _score(policy, True, prompts, completions)
    assert "DynamicSlidingWindowLayer" in reason
    assert _score(policy, True, prompts, completions)[1] == reason  # remembered for the model
    unshared, _ = _score(policy, False, prompts, completions)
    torch.testing.assert_close(out.logprobs, unshared.logprobs, rtol=0, atol=0)

    checkpointed = build_tiny_model(tokenizer, seed=0)
    enable = getattr(checkpointed, "activation_checkpointing_enable", None)
    (enable or checkpointed.gradient_checkpointing_enable)()
    policy = HFPolicy(checkpointed.train(), tokenizer, device="cpu")
    _, reason = _score(policy, True, prompts, completions)
    assert reason is not None and "checkpointing" in reason


@pytest.mark.slow
def test_bench_smoke_writes_the_update_comparison(tmp_path):
    """``bench/grpo_step.py --smoke --parts update --markdown FILE`` runs and writes one
    section with labtwin's shared and unshared updates and TRL's (about 15 s of CPU, most
    of it importing TRL)."""
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("trl")
    bench = Path(__file__).parents[2] / "bench" / "grpo_step.py"
    out = tmp_path / "section.md"
    args = ["--smoke", "--parts", "update", "--markdown", str(out)]
    subprocess.run([sys.executable, str(bench), *args], check=True, timeout=300)
    text = out.read_text()
    assert (
        text.startswith("## GRPO update with each group's prompt run once")
        and text.count("\n## ") == 0
    )
    # the command that reruns it, without where this run wrote its section
    assert "`python bench/grpo_step.py --smoke --parts update`" in text.splitlines()[0]
    rows = [line for line in text.splitlines() if line.startswith("| ") and "x |" in line]
    assert len(rows) == 3 and rows[0].endswith("| 1.00x |")
    assert "Reading. " in text


@pytest.mark.parametrize(
    ("groups", "size", "expected"),
    [
        ([4, 4], 8, [(0, 8)]),
        ([4, 4], 6, [(0, 4), (4, 8)]),  # no group cut where each fits
        ([4, 4], 3, [(0, 3), (3, 4), (4, 7), (7, 8)]),
        ([6, 6, 6], 8, [(0, 6), (6, 12), (12, 18)]),
        ([2, 2, 3, 1], 4, [(0, 4), (4, 8)]),  # whole groups packed while they fit
        ([10, 2], 8, [(0, 8), (8, 12)]),  # a long group's last rows packed with the next
        ([1] * 5, 2, [(0, 2), (2, 4), (4, 5)]),  # no two rows share a prompt
    ],
)
def test_micro_batches_keep_groups_whole_where_they_fit(groups, size, expected) -> None:
    episodes = [
        Episode(group=g, seed=g, prompt_ids=[7, g]) for g, n in enumerate(groups) for _ in range(n)
    ]
    assert micro_batches(episodes, size) == expected
