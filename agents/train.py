"""GRPO training of an LLM that runs lab campaigns through tool calls.

Read it top to bottom, CleanRL style: the config (:class:`TrainConfig`, one
line of help per field, checked in one place; it lives in ``train_config.py``
so that the command line can build its options from it without importing
torch), every seed of the run in one place (:class:`SeedStreams`), and the
loop in plain sight (:func:`train`):

1. evaluate the untrained policy on fixed evaluation campaigns;
2. optionally warm-start it with a few supervised steps on valid proposals
   (random experiments written as tool calls), so that a tiny model learns
   the call format before it learns chemistry;
3. GRPO: for each step, run ``campaigns_per_step`` campaign seeds, each
   ``group_size`` times (a group shares hidden conditions); a campaign's
   return is its reward; advantages are group-relative; the clipped surrogate
   is accumulated over micro-batches with an exact normaliser, with an
   optional KL to a frozen reference model passed explicitly;
4. evaluate again, and write metrics, every training campaign (its seed and
   conditions) and record, and checkpoints into the run directory.

Every metrics line carries the run's cumulative training compute so far
(:class:`Compute`: CPU-seconds of generation, simulation and updates, and
tokens), and with ``eval_every`` the policy is evaluated on the same fixed
campaigns during training too, which is what ``labtwin eval --curve`` fits
reward against compute with.
"""

from __future__ import annotations

import copy
import enum
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

import labtwin
from labtwin.agents.grpo import group_advantages, grpo_loss, loss_normaliser, zero_variance_mask
from labtwin.agents.policy import HFPolicy, build_tiny_model, build_tiny_tokenizer
from labtwin.agents.policy.hf import load_causal_lm, save_pretrained
from labtwin.agents.rollout import Episode, run_episodes
from labtwin.agents.train_config import TrainConfig
from labtwin.campaign import derive_seeds
from labtwin.experiment import field_bounds
from labtwin.registry import short_id
from labtwin.runs import RunStore
from labtwin.tools import PROPOSE, SUBMIT, ChatLabEnv, format_tool_call, lab_tools

__all__ = ["Compute", "SeedStreams", "TrainConfig", "TrainResult", "train"]


# ---- seeding, in one place -----------------------------------------------------------


class Stream(enum.IntEnum):
    """The named seed streams of a run. The numbers are part of every run's seeds: never
    renumber them (and never use 0: a trailing 0 key would alias a shorter key)."""

    MODEL_INIT = 1
    WARM_START = 2
    TRAIN_CAMPAIGNS = 3
    TRAIN_SAMPLING = 4
    EVAL_CAMPAIGNS = 5
    EVAL_SAMPLING = 6
    ENGINE = 7


@dataclass(frozen=True)
class SeedStreams:
    """Every seed of a run, derived from ``TrainConfig.seed``.

    Stream ``s`` with keys ``k...`` is ``numpy.random.SeedSequence([seed, s, *k])``
    (:func:`labtwin.campaign.derive_seeds`, the engine's rule), so the streams
    are independent of each other, every seed is a non-negative int below
    2**63, and a step's seeds depend only on (seed, step): a resumed run draws
    exactly what an uninterrupted one draws.

    >>> s = SeedStreams(0)
    >>> s.train_campaigns(1, 2) == SeedStreams(0).train_campaigns(1, 2) != s.train_campaigns(2, 2)
    True
    """

    seed: int

    def model_init(self) -> int:
        """The tiny model's weights and its tokenizer's corpus; also seeds torch's global RNG."""
        return self._one(Stream.MODEL_INIT)

    def warm_start_replies(self) -> np.random.Generator:
        """The warm start's scripted tool calls (random valid experiments and answers)."""
        return np.random.default_rng(self._one(Stream.WARM_START, 1))

    def warm_start_campaigns(self, step: int, n: int) -> list[int]:
        """The ``n`` campaign seeds of warm-start step ``step`` (from 0)."""
        return derive_seeds(self.seed, n, Stream.WARM_START, 2, step)

    def train_campaigns(self, step: int, n: int) -> list[int]:
        """The ``n`` campaign seeds (one per GRPO group) of GRPO step ``step`` (from 1)."""
        return derive_seeds(self.seed, n, Stream.TRAIN_CAMPAIGNS, step)

    def train_sampling(self, step: int) -> int:
        """The sampling seed of GRPO step ``step`` (turn ``k`` of the rollout samples with it + k)."""
        return self._one(Stream.TRAIN_SAMPLING, step)

    def eval_campaigns(self, n: int) -> list[int]:
        """The fixed evaluation campaigns: the same before warm start, after it and after GRPO."""
        return derive_seeds(self.seed, n, Stream.EVAL_CAMPAIGNS)

    def eval_sampling(self) -> int:
        """The sampling seed of every evaluation (so evaluations differ only by the weights)."""
        return self._one(Stream.EVAL_SAMPLING)

    def engine(self) -> int:
        """The generation engine's own RNG (vLLM); every request carries its own seed too."""
        return self._one(Stream.ENGINE)

    def _one(self, *keys: int) -> int:
        return derive_seeds(self.seed, 1, *keys)[0]


@dataclass
class Compute:
    """Cumulative compute of a training run, by phase.

    CPU-seconds are ``time.process_time`` (every thread of this process; worker processes
    of isolated labs and a vLLM engine process are not in it), wall seconds are
    ``time.perf_counter``; on a GPU the wall seconds of a phase bound its GPU-seconds.
    Generation is the policy's ``generate`` calls; simulation is the rest of a rollout
    (the lab's simulator, parsing tool calls, rendering tool results); update is the
    GRPO loss, backward pass, optimizer step and weight sync. ``tokens_generated`` counts
    sampled tokens, ``tokens_trained`` the tokens through the update's forward pass
    (prompt and completion of each kept episode). The warm start is counted apart: the
    reward-vs-compute curve is about RL compute. A resumed run continues the counters of
    the checkpoint it resumes from (steps run again after a crash are not counted twice).
    """

    generation_cpu_s: float = 0.0
    simulation_cpu_s: float = 0.0
    update_cpu_s: float = 0.0
    generation_s: float = 0.0
    simulation_s: float = 0.0
    update_s: float = 0.0
    tokens_generated: int = 0
    tokens_trained: int = 0
    warmstart_cpu_s: float = 0.0

    @property
    def cpu_s(self) -> float:
        """GRPO CPU-seconds: generation + simulation + update."""
        return self.generation_cpu_s + self.simulation_cpu_s + self.update_cpu_s

    def metrics(self) -> dict[str, float]:
        """``compute_<field>`` for every field, and ``compute_cpu_s`` (their GRPO total)."""
        out = {f"compute_{k}": v for k, v in asdict(self).items()}
        out["compute_cpu_s"] = self.cpu_s
        return out


class CPUTimed:
    """A generation engine whose ``generate`` calls are timed in CPU-seconds (an observer:
    everything else is the engine's own)."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator
        self.cpu_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.generator, name)

    def generate(self, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return self.generator.generate(*args, **kwargs)
        finally:
            self.cpu_s += time.process_time() - start


@dataclass
class TrainResult:
    run_dir: Path
    eval_before: dict[str, float]
    eval_warm: dict[str, float] | None
    eval_after: dict[str, float]
    history: list[dict[str, Any]] = field(default_factory=list)


# ---- policy and data ---------------------------------------------------------------


def make_policy(cfg: TrainConfig) -> HFPolicy:
    """The policy to train: the tiny model (built from ``cfg``), or a local Hugging Face model."""
    if cfg.model != "tiny":
        policy = HFPolicy.from_pretrained(cfg.model, dtype=torch.float32)
        policy.share_prompt = cfg.share_prompt
        return policy
    seed = SeedStreams(cfg.seed).model_init()
    # a tokenizer that knows the lab's words keeps prompts short
    task = labtwin.load_task(cfg.task, budget=cfg.budget)
    env = ChatLabEnv(task)
    rng = np.random.default_rng(seed)
    texts = [env.system_prompt(), json.dumps(env.tools)]
    texts += [random_reply(task, rng, submit=False) for _ in range(64)]
    tokenizer = build_tiny_tokenizer(cfg.vocab_size, extra_texts=texts)
    model = build_tiny_model(
        tokenizer,
        seed=seed,
        hidden_size=cfg.hidden_size,
        intermediate_size=2 * cfg.hidden_size,
        num_hidden_layers=cfg.layers,
    )
    return HFPolicy(model, tokenizer, share_prompt=cfg.share_prompt)


def random_reply(task: labtwin.Task, rng: np.random.Generator, submit: bool) -> str:
    """A valid tool call: a random experiment, or (if ``submit``) a random answer."""
    if submit and task.answer_model is not None:
        answer = {}
        for name, f in task.answer_model.model_fields.items():
            low, high = field_bounds(f) or (0.0, 1.0)  # unbounded fields: a unit range
            answer[name] = _round(rng.uniform(low, high))
        return format_tool_call(SUBMIT, answer)
    experiment = task.random_experiment(rng).model_dump(mode="json")
    return format_tool_call(PROPOSE, _round(experiment))


def _round(value: Any) -> Any:
    """Floats to 3 significant digits, inside lists and nested objects too."""
    if isinstance(value, float):
        return float(f"{value:.3g}")
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def padded(rows: list[list[float]], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    width = max(max(len(r) for r in rows), 1)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=dtype, device=device)


# ---- generation engine, evaluation and warm start --------------------------------------


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
    policy: HFPolicy, task: labtwin.Task, cfg: TrainConfig, run_dir: Path, streams: SeedStreams
) -> tuple[Any, dict[str, Any]]:
    """The engine that samples rollouts, and the keyword arguments of its ``generate``.

    ``hf``: the training model itself, constrained by the xgrammar tool-call
    grammar. ``vllm``: a vLLM engine loaded from the same weights (saved under
    the run), constrained by vLLM's structured outputs, synced after each update.
    """
    if cfg.ray is not None:  # the same engine, built in each Ray actor by this function
        from labtwin.agents.ray_generation import RayGenerator

        return RayGenerator(
            policy,
            cfg,
            cfg.generation_engines,
            timeout_s=cfg.generation_timeout_s,
            startup_timeout_s=cfg.generation_startup_timeout_s,
        ), {}
    if cfg.backend == "hf":
        return policy, {"logits_processor": make_grammar(policy, task, cfg)}
    from labtwin.agents.policy.vllm_policy import VLLMPolicy, tool_call_schema

    path = save_pretrained(run_dir / "generator_init", policy.model, policy.tokenizer)
    generator = VLLMPolicy(str(path), seed=streams.engine())
    return generator, (
        {"json_schema": tool_call_schema(lab_tools(task))} if cfg.constrained else {}
    )


def start_ray(task: labtwin.Task, cfg: TrainConfig) -> tuple[bool, Any, Any]:
    """Join Ray where ``cfg`` asks for it (``ray``, ``lab_workers``): whether this started
    Ray, the rollouts' campaign engine on the lab workers (None: in this process) and the
    workers."""
    if cfg.ray is None and not cfg.lab_workers:
        return False, None, None
    import functools

    from labtwin.distributed import LabWorkers, RayCampaignBatch, connect

    started = connect(cfg.ray or "auto")
    if not cfg.lab_workers:
        return started, None, None
    workers = LabWorkers(task, cfg.lab_workers, task_spec=(cfg.task, {"budget": cfg.budget}))
    return started, functools.partial(RayCampaignBatch, workers=workers), workers


def stop_ray(cfg: TrainConfig, generator: Any, lab_workers: Any, started: bool) -> None:
    """End the Ray actors of a run (and Ray, if the run started it)."""
    if cfg.ray is not None:
        generator.close()
    if lab_workers is not None:
        lab_workers.close()
    if started:
        import ray

        ray.shutdown()


def sync_generator(generator: Any, policy: HFPolicy) -> None:
    """After an update, the generation engine samples from the new weights."""
    if generator is not policy:
        generator.load_weights(policy.model)


def evaluate(
    generator: Any,
    task: labtwin.Task,
    cfg: TrainConfig,
    streams: SeedStreams,
    gen_kwargs: dict[str, Any],
    batch_factory: Any = None,
) -> dict[str, float]:
    """Mean campaign reward, success rate and share of valid calls on the fixed evaluation
    campaigns (``batch_factory``: their campaign engine, e.g. Ray lab workers)."""
    episodes, _ = run_episodes(
        generator,
        task,
        streams.eval_campaigns(cfg.eval_campaigns),
        1,
        cfg.invalid_penalty,
        cfg.max_new_tokens,
        cfg.temperature,
        seed=streams.eval_sampling(),
        generate_kwargs=gen_kwargs,
        batch_factory=batch_factory,
    )
    return summarise(episodes, task)


def summarise(episodes: list[Episode], task: labtwin.Task | None = None) -> dict[str, float]:
    """Reward mean and std, share of valid calls, and (given the lab) the share of
    campaigns that succeeded by the lab's predicate (:meth:`labtwin.Task.success`)."""
    measurements = [m for e in episodes for m in e.measurements]
    scores = [e.reward for e in episodes]
    out = {
        "reward_mean": float(np.mean(scores)),
        "reward_std": float(np.std(scores)),
        "valid_fraction": float(np.mean([m.status != "invalid" for m in measurements] or [0.0])),
    }
    if task is not None:
        out["success_rate"] = float(
            np.mean([task.success(e.records, e.conditions) for e in episodes])
        )
    return out


def warm_start(
    policy: HFPolicy,
    task: labtwin.Task,
    cfg: TrainConfig,
    streams: SeedStreams,
    progress: Progress,
) -> None:
    """Supervised steps on scripted campaigns of random valid tool calls."""
    rng = streams.warm_start_replies()
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.warmstart_learning_rate)
    job = progress.add_task("warm start", total=cfg.warmstart_steps)

    def script(live: list[int], env: ChatLabEnv) -> list[str]:
        return [
            random_reply(task, rng, submit=env.conversations[i].campaign.remaining == 1)
            for i in live
        ]

    policy.model.train()
    for step in range(cfg.warmstart_steps):
        seeds = streams.warm_start_campaigns(step, cfg.warmstart_batch)
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
    """Accumulate the GRPO loss over micro-batches and take one optimizer step.

    ``reference`` is the frozen model of the KL term (None: no KL); it is
    scored by ``policy.logprobs(..., model=reference)``, with the policy's
    tokenizer and padding.
    """
    device = policy.device
    masks = [padded([e.completion_mask], torch.float32, device) for e in episodes]
    longest = max(len(e.completion_ids) for e in episodes)
    normaliser = loss_normaliser(masks, cfg.aggregation, max_completion_length=longest)
    totals: dict[str, float] = {}
    policy.model.train()
    optimizer.zero_grad()
    for start, end in micro_batches(episodes, cfg.micro_batch_size):
        batch = episodes[start:end]
        prompts, completions = [e.prompt_ids for e in batch], [e.completion_ids for e in batch]
        out = policy.logprobs(prompts, completions, cfg.temperature, with_entropy=True)
        mask = padded([e.completion_mask for e in batch], torch.float32, device) * out.mask
        old = padded([e.old_logprobs for e in batch], torch.float32, device)
        ref = None
        if reference is not None:
            with torch.no_grad():
                ref = policy.logprobs(prompts, completions, cfg.temperature, model=reference)
            ref = ref.logprobs
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


def micro_batches(episodes: Sequence[Episode], size: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each micro-batch of ``episodes``: at most ``size`` rows, in order,
    with each run of consecutive rows that share a prompt (a GRPO group) kept in one
    micro-batch where it fits, so that its prompt is run once (:meth:`HFPolicy.logprobs`
    shares it only within a call). Whole runs are packed while they fit; a run longer than
    ``size`` is cut into micro-batches of ``size`` rows, its last rows packed with what
    follows. The loss is normalised over the whole batch, so the partition changes the
    gradient only by float summation order."""
    runs: list[list[int]] = []  # [start, end) of each run of one prompt
    for i, episode in enumerate(episodes):
        if runs and episode.prompt_ids == episodes[i - 1].prompt_ids:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    slices: list[tuple[int, int]] = []
    start = end = 0  # the micro-batch being packed: [start, end)
    for run_start, run_end in runs:
        if run_end - start > size and end > start:  # the run does not fit beside the others
            slices.append((start, end))
            start = run_start
        while run_end - start > size:  # a run longer than a micro-batch: cut it
            slices.append((start, start + size))
            start += size
        end = run_end
    if end > start:
        slices.append((start, end))
    return slices


# ---- run directory, reference model and checkpoints ----------------------------------------


def resolve_run(cfg: TrainConfig) -> tuple[Path, Path | None]:
    """The run directory and the checkpoint to resume from (None: a new run).

    Raises FileNotFoundError when ``resume`` finds no checkpoint, and
    FileExistsError when a new run would write into an existing one.
    """
    run_dir = (
        Path(cfg.out)
        if cfg.out
        else Path("runs") / f"train-{short_id(cfg.task)}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    if cfg.resume:
        checkpoint = latest_checkpoint(run_dir)
        if checkpoint is None:
            raise FileNotFoundError(f"nothing to resume: {run_dir} has no checkpoint")
        return run_dir, checkpoint
    if (run_dir / "config.json").exists():
        raise FileExistsError(
            f"{run_dir} already holds a run: resume it (resume=True) or choose another out"
        )
    return run_dir, None


def save_reference(run_dir: Path, policy: HFPolicy) -> torch.nn.Module:
    """Freeze the starting policy as the KL reference, and save it so that a resume finds it."""
    save_pretrained(run_dir / "reference", policy.model)
    return copy.deepcopy(policy.model).eval().requires_grad_(False)


def load_reference(run_dir: Path, policy: HFPolicy) -> torch.nn.Module:
    """The reference a run saved; a run started without KL uses the policy it resumes from."""
    path = run_dir / "reference"
    if not path.exists():
        return copy.deepcopy(policy.model).eval().requires_grad_(False)
    model = load_causal_lm(path, dtype=torch.float32)
    return model.to(policy.device).eval().requires_grad_(False)


def save_warm_start(run_dir: Path, policy: HFPolicy) -> Path:
    """The policy after the warm start, before GRPO (model and tokenizer), so that it can be
    evaluated later (``labtwin eval``); a resume never reads it."""
    return save_pretrained(run_dir / "checkpoints" / "warm_start", policy.model, policy.tokenizer)


def save_checkpoint(
    run_dir: Path, policy: HFPolicy, optimizer: torch.optim.Optimizer, step: int, extra: dict
) -> Path:
    """Model, tokenizer and ``trainer.pt`` (tensors and plain types only: loads with
    ``weights_only=True``)."""
    path = save_pretrained(
        run_dir / "checkpoints" / f"step_{step:06d}", policy.model, policy.tokenizer
    )
    torch.save({"optimizer": optimizer.state_dict(), "step": step, **extra}, path / "trainer.pt")
    (run_dir / "checkpoints" / "latest").write_text(path.name)
    return path


def load_trainer_state(checkpoint: Path) -> dict[str, Any]:
    return torch.load(checkpoint / "trainer.pt", weights_only=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    marker = run_dir / "checkpoints" / "latest"
    return run_dir / "checkpoints" / marker.read_text().strip() if marker.exists() else None


# ---- the training run --------------------------------------------------------------------


def train(cfg: TrainConfig) -> TrainResult:
    """Evaluate, warm-start, train with GRPO, evaluate again; everything goes to the run dir."""
    cfg.validate()
    streams = SeedStreams(cfg.seed)
    torch.manual_seed(streams.model_init())
    torch.set_num_threads(cfg.threads)
    task = labtwin.load_task(cfg.task, budget=cfg.budget)
    run_dir, checkpoint = resolve_run(cfg)

    policy = (
        make_policy(cfg)
        if checkpoint is None
        else HFPolicy.from_pretrained(checkpoint, dtype=torch.float32)
    )
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)
    ray_started, lab_batch, lab_workers = start_ray(task, cfg)
    generator, gen_kwargs = make_generator(policy, task, cfg, run_dir, streams)
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
    compute = Compute()

    def log_eval(step: int, phase: str, result: dict[str, float]) -> None:
        store.log_metrics(step, phase=phase, **_prefixed(result, "eval_"), **compute.metrics())

    with Progress(*columns, disable=not cfg.progress) as progress:
        if checkpoint is None:
            start_step = 0
            eval_before = evaluate(generator, task, cfg, streams, gen_kwargs, lab_batch)
            log_eval(0, "eval_untrained", eval_before)
            eval_warm = None
            if cfg.warmstart_steps:
                cpu = time.process_time()
                warm_start(policy, task, cfg, streams, progress)
                compute.warmstart_cpu_s = time.process_time() - cpu
                save_warm_start(run_dir, policy)
                sync_generator(generator, policy)
                eval_warm = evaluate(generator, task, cfg, streams, gen_kwargs, lab_batch)
                log_eval(0, "eval_warm_start", eval_warm)
            reference = save_reference(run_dir, policy) if cfg.kl_coef > 0 else None
        else:
            state = load_trainer_state(checkpoint)
            optimizer.load_state_dict(state["optimizer"])
            start_step, eval_before, eval_warm = (
                state["step"],
                state["eval_before"],
                state["eval_warm"],
            )
            compute = Compute(**state.get("compute", {}))
            reference = load_reference(run_dir, policy) if cfg.kl_coef > 0 else None

        job = progress.add_task("GRPO", total=cfg.steps, completed=start_step)
        for step in range(start_step + 1, cfg.steps + 1):
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            timed = CPUTimed(generator)
            store.context = {"train_step": step}
            episodes, timing = run_episodes(
                timed,
                task,
                streams.train_campaigns(step, cfg.campaigns_per_step),
                cfg.group_size,
                cfg.invalid_penalty,
                cfg.max_new_tokens,
                cfg.temperature,
                seed=streams.train_sampling(step),
                generate_kwargs=gen_kwargs,
                recorder=store,  # every campaign's seed and conditions, every record
                first_campaign_id=(step - 1) * cfg.campaigns_per_step * cfg.group_size,
                batch_factory=lab_batch,
            )
            for episode in episodes:  # each conversation, for the run viewer's transcripts
                rewards = [r.reward for r in episode.records]
                store.log_transcript(episode.campaign_id, episode.messages, rewards)
            rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
            advantages = group_advantages(rewards, cfg.group_size, cfg.scale_std)
            keep = torch.ones_like(rewards, dtype=torch.bool)
            if cfg.drop_zero_variance:
                keep = ~zero_variance_mask(rewards, cfg.group_size)
            t1 = time.perf_counter()
            cpu1 = time.process_time()
            kept = [e for e, k in zip(episodes, keep.tolist()) if k]
            update = (
                grpo_update(policy, reference, optimizer, kept, advantages[keep], cfg)
                if kept
                else {}
            )
            if kept:
                sync_generator(generator, policy)
            t2 = time.perf_counter()
            compute.generation_cpu_s += timed.cpu_s
            compute.simulation_cpu_s += cpu1 - cpu0 - timed.cpu_s
            compute.update_cpu_s += time.process_time() - cpu1
            compute.generation_s += timing.generation_s
            compute.simulation_s += t1 - t0 - timing.generation_s
            compute.update_s += t2 - t1
            compute.tokens_generated += timing.tokens_generated
            compute.tokens_trained += sum(len(e.prompt_ids) + len(e.completion_ids) for e in kept)

            metrics = {
                **summarise(episodes, task),
                **update,
                "groups_kept": int(keep.sum().item()) // cfg.group_size,
                "tokens_per_s": timing.tokens_generated / max(timing.generation_s, 1e-9),
                "generation_s": timing.generation_s,
                "simulation_s": timing.simulation_s,
                "optimisation_s": t2 - t1,
                "simulation_share": timing.simulation_s / (t2 - t0),
                **compute.metrics(),
            }
            store.log_metrics(step, phase="train", **metrics)
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
            if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.steps:
                log_eval(
                    step,
                    "eval_checkpoint",
                    evaluate(generator, task, cfg, streams, gen_kwargs, lab_batch),
                )
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                save_checkpoint(
                    run_dir,
                    policy,
                    optimizer,
                    step,
                    {
                        "eval_before": eval_before,
                        "eval_warm": eval_warm,
                        "compute": asdict(compute),
                    },
                )
        store.context = {}

        eval_after = evaluate(generator, task, cfg, streams, gen_kwargs, lab_batch)
        log_eval(cfg.steps, "eval_trained", eval_after)
    store.close()
    if writer:
        writer.close()
    stop_ray(cfg, generator, lab_workers, ray_started)
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
