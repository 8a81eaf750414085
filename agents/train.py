"""GRPO training of an LLM that runs lab campaigns through tool calls.

Read it top to bottom: a config with one line of help per field, seeding in
one place, and the loop in plain sight:

1. evaluate the untrained policy on fixed evaluation campaigns;
2. optionally warm-start it with a few supervised steps on valid proposals
   (random experiments written as tool calls), so that a tiny model learns
   the call format before it learns chemistry;
3. GRPO: for each step, run ``campaigns_per_step`` campaign seeds, each
   ``group_size`` times (a group shares hidden conditions); a campaign's
   return is its reward; advantages are group-relative; the clipped surrogate
   is accumulated over micro-batches with an exact normaliser;
4. evaluate again, and write metrics, every measured experiment and
   checkpoints into the run directory.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

import labtwin
from labtwin.agents.grpo import group_advantages, grpo_loss, loss_normaliser, zero_variance_mask
from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer
from labtwin.agents.rollout import Episode, run_episodes
from labtwin.experiment import field_bounds
from labtwin.runs import RunStore
from labtwin.tools import PROPOSE, SUBMIT, ChatLabEnv, format_tool_call, lab_tools


@dataclass
class TrainConfig:
    task: str = "BatchReactor-v0"
    """lab id"""
    model: str = "tiny"
    """'tiny' (built from a config, no download) or a local Hugging Face model folder"""
    steps: int = 20
    """GRPO steps"""
    campaigns_per_step: int = 4
    """distinct campaign seeds (GRPO groups) per step"""
    group_size: int = 8
    """campaigns per seed; advantages are relative within a group"""
    budget: int = 2
    """experiments per training campaign"""
    learning_rate: float = 2e-3
    """AdamW learning rate (the tiny model likes it high; use ~1e-6 for real LLMs)"""
    max_grad_norm: float = 1.0
    """gradient clipping"""
    micro_batch_size: int = 8
    """episodes per forward/backward; gradients accumulate exactly over a step"""
    clip_low: float = 0.2
    """ratio floor 1 - clip_low"""
    clip_high: float = 0.28
    """ratio ceiling 1 + clip_high (clip-higher)"""
    kl_coef: float = 0.0
    """weight of the k3 KL to the frozen starting policy (0: no reference model)"""
    aggregation: Literal["token_mean", "sequence_mean", "dr_grpo"] = "token_mean"
    """loss aggregation"""
    scale_std: bool = True
    """divide advantages by the group's reward std (False: Dr. GRPO)"""
    drop_zero_variance: bool = True
    """skip groups whose campaigns all got the same reward"""
    invalid_penalty: float = 0.1
    """reward subtracted for each invalid tool call"""
    max_new_tokens: int = 96
    """tokens per reply"""
    temperature: float = 1.0
    """sampling temperature for training and evaluation"""
    constrained: bool = True
    """constrain replies to one schema-valid tool call (xgrammar); False: free text"""
    backend: Literal["hf", "vllm"] = "hf"
    """generation engine: 'hf' (transformers, CPU or GPU) or 'vllm' (GPU, labtwin[vllm])"""
    threads: int = 1
    """torch CPU threads (1 is fastest for the tiny model on a busy 2-core machine)"""
    warmstart_steps: int = 30
    """supervised steps on valid random proposals before GRPO (0: none)"""
    warmstart_batch: int = 16
    """campaigns per warm-start step"""
    warmstart_learning_rate: float = 3e-3
    """learning rate of the warm start"""
    eval_campaigns: int = 32
    """fixed evaluation campaigns before and after training"""
    hidden_size: int = 64
    """tiny model: hidden size"""
    vocab_size: int = 1024
    """tiny model: BPE vocabulary size (trained on the lab's texts)"""
    layers: int = 2
    """tiny model: transformer layers"""
    seed: int = 0
    """seeds torch, numpy and every campaign"""
    checkpoint_every: int = 20
    """steps between checkpoints (and one at the end)"""
    out: str | None = None
    """run directory (default runs/train-<task>-<time>)"""
    resume: bool = False
    """continue the run in `out` from its last checkpoint"""
    tensorboard: bool = False
    """also write TensorBoard scalars (needs the tensorboard package)"""
    progress: bool = True
    """show a progress bar"""


@dataclass
class TrainResult:
    run_dir: Path
    eval_before: dict[str, float]
    eval_warm: dict[str, float] | None
    eval_after: dict[str, float]
    history: list[dict[str, Any]] = field(default_factory=list)


# ---- policy and data ---------------------------------------------------------------


def make_policy(cfg: TrainConfig) -> HFPolicy:
    if cfg.model == "tiny":
        # a tokenizer that knows the lab's words keeps prompts short
        task = labtwin.load_task(cfg.task, budget=cfg.budget)
        env = ChatLabEnv(task)
        rng = np.random.default_rng(cfg.seed)
        texts = [env.system_prompt(), json.dumps(env.tools)]
        texts += [random_reply(task, rng, submit=False) for _ in range(64)]
        tokenizer = build_tiny_tokenizer(cfg.vocab_size, extra_texts=texts)
        model = build_tiny_model(
            tokenizer,
            seed=cfg.seed,
            hidden_size=cfg.hidden_size,
            intermediate_size=2 * cfg.hidden_size,
            num_hidden_layers=cfg.layers,
        )
        return HFPolicy(model, tokenizer)
    return HFPolicy.from_pretrained(cfg.model, dtype=torch.float32)


def random_reply(task: labtwin.Task, rng: np.random.Generator, submit: bool) -> str:
    """A valid tool call: a random experiment, or (if ``submit``) a random answer."""
    if submit and task.answer_model is not None:
        answer = {}
        for name, f in task.answer_model.model_fields.items():
            low, high = field_bounds(f) or (0.0, 1.0)  # unbounded fields: a unit range
            answer[name] = _round(rng.uniform(low, high))
        return format_tool_call(SUBMIT, answer)
    vector = rng.uniform(-1.0, 1.0, task.numeric_view.space.shape)
    experiment = task.numeric_view.to_experiment(vector).model_dump()
    return format_tool_call(PROPOSE, {k: _round(v) for k, v in experiment.items()})


def _round(value: Any) -> Any:
    return float(f"{value:.3g}") if isinstance(value, float) else value


def padded(rows: list[list[float]], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    width = max(max(len(r) for r in rows), 1)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=dtype, device=device)


# ---- evaluation and warm start -----------------------------------------------------


def make_grammar(policy: HFPolicy, task: labtwin.Task, cfg: TrainConfig) -> Any:
    """Logits processors that force one schema-valid tool call per reply (or None)."""
    if not cfg.constrained:
        return None
    from labtwin.agents.policy.grammar import ToolCallGrammar

    return ToolCallGrammar(
        policy.tokenizer,
        lab_tools(task),
        policy.stop_token_ids,
        vocab_size=policy.model.config.vocab_size,
        required=True,
    )


def make_generator(
    policy: HFPolicy, task: labtwin.Task, cfg: TrainConfig, run_dir: Path
) -> tuple[Any, dict[str, Any]]:
    """The engine that samples rollouts, and the keyword arguments of its ``generate``.

    ``hf``: the training model itself, constrained by the xgrammar tool-call
    grammar. ``vllm``: a vLLM engine loaded from the same weights (saved under
    the run), constrained by vLLM's structured outputs, synced after each update.
    """
    if cfg.backend == "hf":
        return policy, {"logits_processor": make_grammar(policy, task, cfg)}
    from labtwin.agents.policy.vllm_policy import VLLMPolicy, tool_call_schema

    path = run_dir / "generator_init"
    policy.model.save_pretrained(path)
    policy.tokenizer.save_pretrained(path)
    generator = VLLMPolicy(str(path), seed=cfg.seed)
    return generator, (
        {"json_schema": tool_call_schema(lab_tools(task))} if cfg.constrained else {}
    )


def sync_generator(generator: Any, policy: HFPolicy) -> None:
    """After an update, the generation engine samples from the new weights."""
    if generator is not policy:
        generator.load_weights(policy.model)


def evaluate(
    generator: Any, task: labtwin.Task, cfg: TrainConfig, seed: int, gen_kwargs: dict[str, Any]
) -> dict[str, float]:
    """Mean campaign reward and share of valid calls on the fixed evaluation seeds."""
    seeds = [10_000_000 + i for i in range(cfg.eval_campaigns)]
    episodes, _ = run_episodes(
        generator,
        task,
        seeds,
        1,
        cfg.invalid_penalty,
        cfg.max_new_tokens,
        cfg.temperature,
        seed=seed,
        generate_kwargs=gen_kwargs,
    )
    return summarise(episodes)


def summarise(episodes: list[Episode]) -> dict[str, float]:
    measurements = [m for e in episodes for m in e.measurements]
    scores = [e.reward for e in episodes]
    return {
        "reward_mean": float(np.mean(scores)),
        "reward_std": float(np.std(scores)),
        "valid_fraction": float(np.mean([m.status != "invalid" for m in measurements] or [0.0])),
    }


def warm_start(policy: HFPolicy, task: labtwin.Task, cfg: TrainConfig, progress: Progress) -> None:
    """Supervised steps on scripted campaigns of random valid tool calls."""
    rng = np.random.default_rng(cfg.seed + 1)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.warmstart_learning_rate)
    job = progress.add_task("warm start", total=cfg.warmstart_steps)

    def script(live: list[int], env: ChatLabEnv) -> list[str]:
        return [
            random_reply(task, rng, submit=env.conversations[i].campaign.remaining == 1)
            for i in live
        ]

    policy.model.train()
    for step in range(cfg.warmstart_steps):
        seeds = [20_000_000 + step * cfg.warmstart_batch + j for j in range(cfg.warmstart_batch)]
        episodes, _ = run_episodes(policy, task, seeds, 1, replies=script)
        out = policy.logprobs(
            [e.prompt_ids for e in episodes], [e.completion_ids for e in episodes]
        )
        mask = (
            padded([e.completion_mask for e in episodes], torch.float32, policy.device) * out.mask
        )
        loss = -(out.logprobs * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.max_grad_norm)
        optimizer.step()
        progress.update(job, advance=1, description=f"warm start  nll {loss.item():.3f}")


# ---- one GRPO step -------------------------------------------------------------------


def grpo_update(
    policy: HFPolicy,
    reference: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    episodes: list[Episode],
    advantages: torch.Tensor,
    cfg: TrainConfig,
) -> dict[str, float]:
    """Accumulate the GRPO loss over micro-batches and take one optimizer step."""
    device = policy.device
    masks = [padded([e.completion_mask], torch.float32, device) for e in episodes]
    longest = max(len(e.completion_ids) for e in episodes)
    normaliser = loss_normaliser(masks, cfg.aggregation, max_completion_length=longest)
    totals: dict[str, float] = {}
    policy.model.train()
    optimizer.zero_grad()
    for start in range(0, len(episodes), cfg.micro_batch_size):
        batch = episodes[start : start + cfg.micro_batch_size]
        prompts, completions = [e.prompt_ids for e in batch], [e.completion_ids for e in batch]
        out = policy.logprobs(prompts, completions, cfg.temperature, with_entropy=True)
        mask = padded([e.completion_mask for e in batch], torch.float32, device) * out.mask
        old = padded([e.old_logprobs for e in batch], torch.float32, device)
        ref = None
        if reference is not None:
            with torch.no_grad():
                ref = _reference_logprobs(policy, reference, prompts, completions, cfg.temperature)
        loss, metrics = grpo_loss(
            out.logprobs,
            old,
            advantages[start : start + len(batch)].to(device),
            mask,
            cfg.clip_low,
            cfg.clip_high,
            ref,
            cfg.kl_coef,
            cfg.aggregation,
            max_completion_length=longest,
            loss_normaliser=normaliser,
            entropy=out.entropy,
        )
        loss.backward()
        weight = float(mask.sum().item())
        totals["loss"] = totals.get("loss", 0.0) + loss.item()
        for k in ("clip_fraction", "kl", "entropy", "ratio_mean"):
            if k in metrics:
                totals[k] = totals.get(k, 0.0) + metrics[k] * weight
        totals["_tokens"] = totals.get("_tokens", 0.0) + weight
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.model.parameters(), cfg.max_grad_norm)
    optimizer.step()
    tokens = max(totals.pop("_tokens"), 1.0)
    out_metrics = {k: (v if k == "loss" else v / tokens) for k, v in totals.items()}
    out_metrics["grad_norm"] = float(grad_norm)
    return out_metrics


def _reference_logprobs(policy, reference, prompts, completions, temperature) -> torch.Tensor:
    model = policy.model
    policy.model = reference
    try:
        return policy.logprobs(prompts, completions, temperature).logprobs
    finally:
        policy.model = model


# ---- checkpoints -----------------------------------------------------------------------


def save_checkpoint(run_dir: Path, policy: HFPolicy, optimizer, step: int, extra: dict) -> Path:
    path = run_dir / "checkpoints" / f"step_{step:06d}"
    policy.model.save_pretrained(path)
    policy.tokenizer.save_pretrained(path)
    torch.save({"optimizer": optimizer.state_dict(), "step": step, **extra}, path / "trainer.pt")
    (run_dir / "checkpoints" / "latest").write_text(path.name)
    return path


def latest_checkpoint(run_dir: Path) -> Path | None:
    marker = run_dir / "checkpoints" / "latest"
    return run_dir / "checkpoints" / marker.read_text().strip() if marker.exists() else None


# ---- the training run --------------------------------------------------------------------


def train(cfg: TrainConfig) -> TrainResult:
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    task = labtwin.load_task(cfg.task, budget=cfg.budget)
    run_dir = (
        Path(cfg.out)
        if cfg.out
        else Path("runs") / f"train-{task.id}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    checkpoint = latest_checkpoint(run_dir) if cfg.resume else None
    if cfg.resume and checkpoint is None:
        raise FileNotFoundError(f"nothing to resume: {run_dir} has no checkpoint")

    policy = (
        make_policy(cfg)
        if checkpoint is None
        else HFPolicy.from_pretrained(checkpoint, dtype=torch.float32)
    )
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    generator, gen_kwargs = make_generator(policy, task, cfg, run_dir)
    store = RunStore(
        run_dir,
        {"kind": "train", **asdict(cfg), "task": f"labtwin/{task.id}"},
        resume=cfg.resume,
        durable=False,
    )
    writer = _tensorboard(run_dir) if cfg.tensorboard else None
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
    ]
    history: list[dict[str, Any]] = []
    with Progress(*columns, disable=not cfg.progress) as progress:
        if checkpoint is None:
            start_step = 0
            eval_before = evaluate(generator, task, cfg, cfg.seed, gen_kwargs)
            store.log_metrics(0, phase="eval_untrained", **_prefixed(eval_before, "eval_"))
            eval_warm = None
            if cfg.warmstart_steps:
                warm_start(policy, task, cfg, progress)
                sync_generator(generator, policy)
                eval_warm = evaluate(generator, task, cfg, cfg.seed, gen_kwargs)
                store.log_metrics(0, phase="eval_warm_start", **_prefixed(eval_warm, "eval_"))
        else:
            state = torch.load(checkpoint / "trainer.pt", weights_only=False)
            optimizer.load_state_dict(state["optimizer"])
            start_step, eval_before, eval_warm = (
                state["step"],
                state["eval_before"],
                state["eval_warm"],
            )
        reference = copy.deepcopy(policy.model).eval() if cfg.kl_coef > 0 else None

        job = progress.add_task("GRPO", total=cfg.steps, completed=start_step)
        for step in range(start_step + 1, cfg.steps + 1):
            t0 = time.perf_counter()
            seeds = [
                cfg.seed * 1_000_003 + step * cfg.campaigns_per_step + j
                for j in range(cfg.campaigns_per_step)
            ]
            episodes, timing = run_episodes(
                generator,
                task,
                seeds,
                cfg.group_size,
                cfg.invalid_penalty,
                cfg.max_new_tokens,
                cfg.temperature,
                seed=cfg.seed * 7919 + step,
                generate_kwargs=gen_kwargs,
            )
            rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
            advantages = group_advantages(rewards, cfg.group_size, cfg.scale_std)
            keep = torch.ones_like(rewards, dtype=torch.bool)
            if cfg.drop_zero_variance:
                keep = ~zero_variance_mask(rewards, cfg.group_size)
            t1 = time.perf_counter()
            kept = [e for e, k in zip(episodes, keep.tolist()) if k]
            update = (
                grpo_update(policy, reference, optimizer, kept, advantages[keep], cfg)
                if kept
                else {}
            )
            if kept:
                sync_generator(generator, policy)
            t2 = time.perf_counter()

            metrics = {
                **summarise(episodes),
                **update,
                "groups_kept": int(keep.sum().item()) // cfg.group_size,
                "tokens_per_s": timing.tokens_generated / max(timing.generation_s, 1e-9),
                "generation_s": timing.generation_s,
                "simulation_s": timing.simulation_s,
                "optimisation_s": t2 - t1,
                "simulation_share": timing.simulation_s / (t2 - t0),
            }
            store.log_metrics(step, phase="train", **metrics)
            for k, episode in enumerate(episodes):
                for turn, m in enumerate(episode.measurements):
                    store.log_experiment(
                        (step - 1) * len(episodes) + k,
                        turn,
                        m,
                        task.score(m, {}),
                        episode.reward,
                        train_step=step,
                        group=episode.group,
                    )
            if writer:
                for k, v in metrics.items():
                    writer.add_scalar(f"train/{k}", v, step)
            history.append(metrics)
            progress.update(
                job,
                advance=1,
                description=(
                    f"GRPO  reward {metrics['reward_mean']:+.3f}  valid {metrics['valid_fraction']:.2f}"
                ),
            )
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                save_checkpoint(
                    run_dir,
                    policy,
                    optimizer,
                    step,
                    {"eval_before": eval_before, "eval_warm": eval_warm},
                )

        eval_after = evaluate(generator, task, cfg, cfg.seed, gen_kwargs)
        store.log_metrics(cfg.steps, phase="eval_trained", **_prefixed(eval_after, "eval_"))
    store.close()
    if writer:
        writer.close()
    (run_dir / "summary.json").write_text(
        json.dumps(
            {
                "eval_untrained": eval_before,
                "eval_warm_start": eval_warm,
                "eval_trained": eval_after,
            },
            indent=2,
        )
    )
    return TrainResult(run_dir, eval_before, eval_warm, eval_after, history)


def _prefixed(d: dict[str, float], prefix: str) -> dict[str, float]:
    return {prefix + k: v for k, v in d.items()}


def _tensorboard(run_dir: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(run_dir / "tensorboard"))
