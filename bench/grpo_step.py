"""The GRPO update with each group's prompt run once, where a step's time goes, and overlap.

Part 1, update: one GRPO update (labtwin's ``grpo_update``: loss over micro-batches,
backward, clipping, AdamW step) of ``--campaigns`` groups of ``--group-size``
completions of ``--max-new-tokens`` tokens after the lab's first prompt (the tiny
model's ~640 tokens for BatchReactor-v1), three ways on copies of the same model and
the same batch:

- labtwin, prompt shared: ``HFPolicy(share_prompt=True)`` (the default) runs each
  group's prompt once per micro-batch and its completions against its cached keys
  and values;
- labtwin, unshared: ``share_prompt=False``, every row runs its whole prompt;
- TRL ``GRPOTrainer``: its ``compute_loss`` (the "dapo" token-mean loss, entropies on)
  on the same token ids in micro-batches of the same size, ``accelerator.backward``,
  gradient clipping and its optimizer's step, as its training loop does once the
  completions are generated (generation is not timed).

Completions are random token ids (the update's cost does not depend on which tokens
they are), old log-probs the policy's own. The contenders alternate within each of
``--rounds`` rounds, after one warm-up round; the median is reported.

Part 2, phases: ``--steps`` GRPO steps built from labtwin's trainer
(``TrainConfig``, ``make_policy``, ``make_grammar``, ``run_episodes``,
``group_advantages``, ``grpo_update``) on the tiny model, split into

- generation: batched sampling of the tool calls (constrained by the grammar),
- simulation: the batched environment step (parse calls, one simulator call,
  describe the measurements),
- other rollout work: tokenising the tool results with the chat template,
- optimisation: the GRPO forward/backward passes and the optimizer step.

Part 3, overlap: the rollout of the same campaigns (same seeds) three ways,
each with the real rollout engine (``run_episodes``):

- ``1 batch``: one ``run_episodes`` over every campaign: generate for every
  live conversation, then step them all with one simulator call;
- ``2 halves``: the campaigns split in two halves, one ``run_episodes`` after
  the other (no overlap: isolates the cost of halving the generation batch);
- ``2 halves, overlapped``: the two halves' ``run_episodes`` in two threads
  that take turns at the model (one ``generate`` at a time), so that while one
  half's simulator step runs, the other half generates.

Each is timed with the reactor as it is (torch RK4 kinetics on the CPU) and
with ``--sim-delay`` seconds added to every simulator call by ``time.sleep``.
A sleep releases the GIL and uses no core, so it models a simulator that runs
outside the Python thread (a GPU kernel, an MD engine in C++, a remote
instrument): the best case for overlap. Sampling is stochastic and the
batches differ between layouts, so each layout reports its generated tokens;
layouts alternate over ``--repeats`` and the median is shown.

    python bench/grpo_step.py --smoke                  # under a minute, CI
    python bench/grpo_step.py                          # a few minutes on 2 CPU cores
    python bench/grpo_step.py --parts update           # the update comparison alone
    python bench/grpo_step.py --markdown out.md        # one markdown section

Every contender runs with one torch thread.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread for every contender

import numpy as np  # noqa: E402
import torch  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import labtwin  # noqa: E402
from labtwin.agents.grpo import group_advantages, zero_variance_mask  # noqa: E402
from labtwin.agents.policy import HFPolicy  # noqa: E402
from labtwin.agents.rollout import Episode, run_episodes  # noqa: E402
from labtwin.agents.train import (  # noqa: E402
    SeedStreams,
    TrainConfig,
    grpo_update,
    make_grammar,
    make_policy,
)
from labtwin.tools import ChatLabEnv  # noqa: E402

LAYOUTS = ("1 batch", "2 halves", "2 halves, overlapped")
PARTS = ("update", "phases", "overlap")
CONTENDERS = ("labtwin, prompt shared", "labtwin, unshared", "TRL GRPOTrainer")


@dataclass
class Config:
    rounds: int = 5  # rounds of part 1's update comparison (after one warm-up round)
    steps: int = 3  # GRPO steps timed in part 2 (after one warm-up step)
    campaigns: int = 4  # campaign seeds (GRPO groups) per step
    group_size: int = 8  # campaigns per seed
    budget: int = 2  # experiments (turns) per campaign
    max_new_tokens: int = 96  # tokens per reply (part 1: tokens per completion)
    micro_batch_size: int = 8  # episodes per forward/backward in part 1
    sim_delay: float = 0.5  # seconds added to each simulator call in part 3's second case
    repeats: int = 3  # rollouts per layout in part 3 (median reported)


# ---- part 1: the update, each group's prompt run once or in every row, and TRL's ---------


@dataclass
class UpdateResult:
    seconds: dict[str, float]  # median wall seconds per update, by contender
    cpu_seconds: dict[str, float]  # median CPU-seconds of this process per update
    rows: int
    prompt_tokens: int  # of one prompt
    completion_tokens: int  # of one completion
    trl_error: str | None = None  # why TRL did not run


def update_batch(
    policy: HFPolicy, cfg: Config, train_cfg: TrainConfig
) -> tuple[list[Episode], torch.Tensor]:
    """``campaigns`` groups of ``group_size`` episodes: each group the lab's first prompt of
    its campaign seed (as ``run_episodes`` encodes it), each completion ``max_new_tokens``
    random non-special token ids, old log-probs the policy's own; advantages of random
    rewards."""
    task = labtwin.load_task(train_cfg.task, budget=cfg.budget)
    env = ChatLabEnv(task)
    seeds = SeedStreams(train_cfg.seed).train_campaigns(1, cfg.campaigns)
    prompts = policy.encode_chats(env.reset(seeds), env.tools)
    rng = np.random.default_rng(0)
    first = max(policy.tokenizer.all_special_ids) + 1
    episodes = []
    for group, (seed, prompt) in enumerate(zip(seeds, prompts)):
        for _ in range(cfg.group_size):
            episode = Episode(group=group, seed=seed, prompt_ids=list(prompt))
            ids = rng.integers(first, policy.tokenizer.vocab_size, cfg.max_new_tokens).tolist()
            episode.extend(ids, True, [0.0] * len(ids))
            episodes.append(episode)
    with torch.no_grad():
        for start in range(0, len(episodes), cfg.micro_batch_size):
            batch = episodes[start : start + cfg.micro_batch_size]
            out = policy.logprobs([e.prompt_ids for e in batch], [e.completion_ids for e in batch])
            for episode, row in zip(batch, out.logprobs):
                episode.old_logprobs = row[: len(episode.completion_ids)].tolist()
    rewards = torch.from_numpy(rng.normal(size=len(episodes))).float()
    return episodes, group_advantages(rewards, cfg.group_size)


class LabtwinUpdate:
    """labtwin's ``grpo_update`` on its own copy of the model, with its own AdamW."""

    def __init__(self, policy: HFPolicy, episodes, advantages, train_cfg: TrainConfig) -> None:
        self.policy, self.episodes, self.advantages, self.cfg = (
            policy,
            episodes,
            advantages,
            train_cfg,
        )
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=train_cfg.learning_rate)

    def __call__(self) -> None:
        grpo_update(self.policy, None, self.optimizer, self.episodes, self.advantages, self.cfg)


class TRLUpdate:
    """TRL ``GRPOTrainer``'s update on the same batch: ``compute_loss`` and
    ``accelerator.backward`` per micro-batch, then clipping and the optimizer step, as
    ``Trainer``'s loop does after ``_prepare_inputs`` has generated the completions."""

    def __init__(self, policy: HFPolicy, episodes, advantages, cfg: Config, train_cfg, workdir):
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        micro = min(cfg.micro_batch_size, len(episodes))
        if len(episodes) % micro:
            raise ValueError(f"{len(episodes)} rows do not split into micro-batches of {micro}")
        steps = len(episodes) // micro
        args = GRPOConfig(
            output_dir=workdir,
            use_cpu=True,
            report_to="none",
            save_strategy="no",
            disable_tqdm=True,
            per_device_train_batch_size=micro,
            gradient_accumulation_steps=steps,
            num_generations=cfg.group_size,
            max_completion_length=cfg.max_new_tokens,
            beta=0.0,
            loss_type="dapo",  # labtwin's token_mean
            epsilon=train_cfg.clip_low,
            epsilon_high=train_cfg.clip_high,
            learning_rate=train_cfg.learning_rate,
            max_grad_norm=train_cfg.max_grad_norm,
            temperature=train_cfg.temperature,
        )
        self.trainer = GRPOTrainer(
            model=copy.deepcopy(policy.model),
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),  # never called
            args=args,
            train_dataset=Dataset.from_list([{"prompt": "unused"}] * len(episodes)),
            processing_class=policy.tokenizer,
        )
        self.trainer.create_optimizer()
        self.trainer.current_gradient_accumulation_steps = steps  # as Trainer's loop sets it
        self.max_grad_norm = train_cfg.max_grad_norm
        tokens = float(sum(sum(e.completion_mask) for e in episodes))
        self.micro_batches = []
        for start in range(0, len(episodes), micro):
            batch = episodes[start : start + micro]
            prompt_ids, prompt_mask = _left_pad([e.prompt_ids for e in batch], policy.pad_token_id)
            self.micro_batches.append(
                {
                    "prompt_ids": prompt_ids,
                    "prompt_mask": prompt_mask,
                    "completion_ids": torch.tensor([e.completion_ids for e in batch]),
                    "completion_mask": torch.tensor([e.completion_mask for e in batch]),
                    "advantages": advantages[start : start + micro],
                    "num_items_in_batch": torch.tensor(tokens),
                }
            )

    def __call__(self) -> None:
        trainer = self.trainer
        trainer.model.train()
        for inputs in self.micro_batches:
            loss = trainer.compute_loss(trainer.model, inputs)
            trainer.accelerator.backward(loss)
        trainer.accelerator.clip_grad_norm_(trainer.model.parameters(), self.max_grad_norm)
        trainer.optimizer.step()
        trainer.optimizer.zero_grad()


def _left_pad(rows: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def time_update(cfg: Config) -> UpdateResult:
    """Median seconds of one GRPO update per contender, alternating within each round."""
    train_cfg = TrainConfig(
        campaigns_per_step=cfg.campaigns,
        group_size=cfg.group_size,
        budget=cfg.budget,
        max_new_tokens=cfg.max_new_tokens,
        micro_batch_size=cfg.micro_batch_size,
        progress=False,
    )
    shared = make_policy(train_cfg)  # share_prompt=True, the default
    unshared = HFPolicy(copy.deepcopy(shared.model), shared.tokenizer, share_prompt=False)
    episodes, advantages = update_batch(shared, cfg, train_cfg)
    contenders: dict[str, Any] = {
        CONTENDERS[0]: LabtwinUpdate(shared, episodes, advantages, train_cfg),
        CONTENDERS[1]: LabtwinUpdate(unshared, episodes, advantages, train_cfg),
    }
    trl_error = None
    with tempfile.TemporaryDirectory() as workdir:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # transformers 5 renames inside TRL
                contenders[CONTENDERS[2]] = TRLUpdate(
                    unshared, episodes, advantages, cfg, train_cfg, workdir
                )
        except ImportError as error:  # TRL is in the bench extra
            trl_error = f"TRL not installed ({error})"
        torch.set_num_threads(1)
        times: dict[str, list[float]] = {name: [] for name in contenders}
        cpu_times: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for round_ in range(cfg.rounds + 1):  # round 0 warms up
            for k in range(len(names)):  # a different contender first in each round
                name = names[(round_ + k) % len(names)]
                wall, cpu = time.perf_counter(), time.process_time()
                contenders[name]()
                if round_:
                    times[name].append(time.perf_counter() - wall)
                    cpu_times[name].append(time.process_time() - cpu)
    if shared.unshared_reason is not None or unshared.unshared_reason != "share_prompt is off":
        raise RuntimeError(f"sharing was not as intended: {shared.unshared_reason!r}")
    return UpdateResult(
        {name: statistics.median(v) for name, v in times.items()},
        {name: statistics.median(v) for name, v in cpu_times.items()},
        rows=len(episodes),
        prompt_tokens=len(episodes[0].prompt_ids),
        completion_tokens=cfg.max_new_tokens,
        trl_error=trl_error,
    )


# ---- part 2: the phases of a GRPO step --------------------------------------------------


def time_phases(cfg: Config) -> dict[str, float]:
    """Mean seconds per GRPO step of each phase."""
    train_cfg = TrainConfig(
        campaigns_per_step=cfg.campaigns,
        group_size=cfg.group_size,
        budget=cfg.budget,
        max_new_tokens=cfg.max_new_tokens,
        warmstart_steps=0,
        progress=False,
    )
    task = labtwin.load_task(train_cfg.task, budget=cfg.budget)
    policy = make_policy(train_cfg)
    grammar = make_grammar(policy, task, train_cfg)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=train_cfg.learning_rate)
    streams = SeedStreams(train_cfg.seed)
    totals: dict[str, list[float]] = {}
    for step in range(1, cfg.steps + 2):  # step 1 warms up (allocations, grammar caches)
        start = time.perf_counter()
        episodes, timing = run_episodes(
            policy,
            task,
            streams.train_campaigns(step, cfg.campaigns),
            cfg.group_size,
            train_cfg.invalid_penalty,
            cfg.max_new_tokens,
            train_cfg.temperature,
            grammar,
            seed=streams.train_sampling(step),
        )
        rollout_s = time.perf_counter() - start
        rewards = torch.tensor([e.reward for e in episodes], dtype=torch.float32)
        advantages = group_advantages(rewards, cfg.group_size)
        keep = ~zero_variance_mask(rewards, cfg.group_size)
        kept = [e for e, k in zip(episodes, keep.tolist()) if k]
        start = time.perf_counter()
        if kept:
            grpo_update(policy, None, optimizer, kept, advantages[keep], train_cfg)
        optimisation_s = time.perf_counter() - start
        if step == 1:
            continue
        phases = {
            "generation": timing.generation_s,
            "simulation": timing.simulation_s,
            "other rollout work": rollout_s - timing.generation_s - timing.simulation_s,
            "optimisation": optimisation_s,
        }
        for name, seconds in phases.items():
            totals.setdefault(name, []).append(seconds)
    return {name: float(np.mean(v)) for name, v in totals.items()}


# ---- part 3: overlapping simulation with generation ----------------------------------------


def with_delay(task: labtwin.Task, delay: float) -> labtwin.Task:
    """The same lab, with ``delay`` seconds of GIL-free waiting added to each simulator call."""
    if delay <= 0:
        return task
    simulate = task.simulate

    def slow_simulate(experiments, conditions, rngs):
        time.sleep(delay)
        return simulate(experiments, conditions, rngs)

    task.simulate = slow_simulate  # type: ignore[method-assign]
    return task


class SerialGeneration:
    """The policy with one ``generate`` at a time, for rollouts that run in threads.

    Two ``run_episodes`` in two threads, each on half the campaigns, then take
    turns at the model: while one half's simulator step runs, the other half
    generates. Generation itself never overlaps generation, as in one process
    with one model.
    """

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.stop_token_ids = policy.stop_token_ids
        self._lock = threading.Lock()

    def encode_chats(self, *args: Any, **kwargs: Any) -> list[list[int]]:
        return self.policy.encode_chats(*args, **kwargs)

    def generate(self, *args: Any, **kwargs: Any) -> list[Any]:
        with self._lock:
            return self.policy.generate(*args, **kwargs)


def rollout(
    policy: Any,
    task: labtwin.Task,
    grammar: Any,
    seeds: list[int],
    cfg: Config,
    layout: str,
    pool: ThreadPoolExecutor,
    sample_seed: int,
) -> tuple[float, int]:
    """Run the campaigns of ``seeds`` to their end with ``run_episodes``; (seconds, tokens).

    Every layout runs the same campaigns (each seed ``group_size`` times);
    ``layout`` is one of :data:`LAYOUTS`.
    """
    campaign_seeds = [s for s in seeds for _ in range(cfg.group_size)]
    halves = [[int(s) for s in half] for half in np.array_split(campaign_seeds, 2)]

    def run(engine: Any, part: list[int], k: int) -> int:
        _, timing = run_episodes(
            engine,
            task,
            part,
            1,  # the seeds are already repeated per group
            max_new_tokens=cfg.max_new_tokens,
            logits_processor=grammar,
            seed=sample_seed + 1000 * k,
        )
        return timing.tokens_generated

    start = time.perf_counter()
    if layout == "1 batch":
        tokens = run(policy, campaign_seeds, 0)
    elif layout == "2 halves":
        tokens = sum(run(policy, half, k) for k, half in enumerate(halves))
    else:  # "2 halves, overlapped"
        engine = SerialGeneration(policy)
        futures = [pool.submit(run, engine, half, k) for k, half in enumerate(halves)]
        tokens = sum(f.result() for f in futures)
    return time.perf_counter() - start, tokens


def time_overlap(cfg: Config, delay: float) -> dict[str, tuple[float, int]]:
    """Median seconds and tokens of one rollout per layout."""
    train_cfg = TrainConfig(budget=cfg.budget, max_new_tokens=cfg.max_new_tokens)
    task = with_delay(labtwin.load_task(train_cfg.task, budget=cfg.budget), delay)
    policy = make_policy(train_cfg)
    grammar = make_grammar(policy, task, train_cfg)
    seeds = SeedStreams(train_cfg.seed).eval_campaigns(cfg.campaigns)
    times: dict[str, list[float]] = {name: [] for name in LAYOUTS}
    tokens: dict[str, list[int]] = {name: [] for name in LAYOUTS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        rollout(policy, task, grammar, seeds, cfg, LAYOUTS[-1], pool, 0)  # warm-up
        for repeat in range(cfg.repeats):
            for name in LAYOUTS:
                seconds, n = rollout(policy, task, grammar, seeds, cfg, name, pool, repeat)
                times[name].append(seconds)
                tokens[name].append(n)
    return {name: (statistics.median(times[name]), int(np.mean(tokens[name]))) for name in LAYOUTS}


# ---- report ----------------------------------------------------------------------------------


UPDATE_COLUMNS = ("contender", "s / update", "CPU s / update", "vs labtwin shared", "CPU vs shared")


def update_rows(result: UpdateResult) -> list[tuple[str, ...]]:
    """Per contender: wall and CPU seconds per update, and each over labtwin's with the
    prompt shared."""
    labels = {
        CONTENDERS[0]: "labtwin `grpo_update`, each group's prompt run once",
        CONTENDERS[1]: "labtwin `grpo_update`, every row runs its prompt (`share_prompt=False`)",
        CONTENDERS[2]: "TRL `GRPOTrainer` (`compute_loss`, backward, optimizer step)",
    }
    wall, cpu = result.seconds, result.cpu_seconds
    base, cpu_base = wall[CONTENDERS[0]], cpu[CONTENDERS[0]]
    rows = [
        (
            labels[name],
            f"{wall[name]:.3f}",
            f"{cpu[name]:.3f}",
            f"{wall[name] / base:.2f}x",
            f"{cpu[name] / cpu_base:.2f}x",
        )
        for name in wall
    ]
    if result.trl_error:
        rows.append((labels[CONTENDERS[2]], "—", "—", result.trl_error, "—"))
    return rows


def update_table(result: UpdateResult, cfg: Config) -> Table:
    table = Table(
        title=f"One GRPO update, tiny model: {result.rows} completions x "
        f"{result.completion_tokens} tokens after a {result.prompt_tokens}-token prompt, "
        f"groups of {cfg.group_size}",
    )
    for k, column in enumerate(UPDATE_COLUMNS):
        table.add_column(column, justify="right" if k else "left")
    for row in update_rows(result):
        table.add_row(*row)
    return table


def phase_table(phases: dict[str, float], cfg: Config) -> Table:
    total = sum(phases.values())
    table = Table(
        min_width=60,
        title=f"GRPO step, tiny model: {cfg.campaigns} x {cfg.group_size} campaigns "
        f"of {cfg.budget} experiments",
    )
    table.add_column("phase")
    table.add_column("s / step", justify="right")
    table.add_column("share", justify="right")
    for name, seconds in phases.items():
        table.add_row(name, f"{seconds:.2f}", f"{seconds / total:.0%}")
    table.add_row("total", f"{total:.2f}", "100%", style="bold")
    return table


def overlap_table(results: dict[float, dict[str, tuple[float, int]]]) -> Table:
    table = Table(title="One rollout: simulator step in a background thread vs in line")
    table.add_column("simulator")
    table.add_column("layout")
    table.add_column("s / rollout", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("vs 1 batch", justify="right")
    for delay, rows in results.items():
        base = rows["1 batch"][0]
        label = "reactor as is" if delay <= 0 else f"reactor + {delay:g} s sleep / call"
        for name, (seconds, tokens) in rows.items():
            table.add_row(label, name, f"{seconds:.2f}", str(tokens), f"{base / seconds:.2f}x")
            label = ""
    return table


def markdown(
    cfg: Config,
    argv: list[str],
    update: UpdateResult | None,
    phases: dict[str, float] | None,
    overlap: dict[float, dict[str, tuple[float, int]]] | None,
) -> str:
    shown, skip = [], False
    for arg in argv:  # how to rerun it, without where this run wrote its section
        if skip or arg == "--markdown":
            skip = not skip
            continue
        if not arg.startswith("--markdown="):
            shown.append(arg)
    args = " ".join(shown)
    command = f"python bench/grpo_step.py{' ' + args if args else ''}"
    lines = [
        f"## GRPO update with each group's prompt run once, step phases and overlap (`{command}`)"
    ]
    lines.append("")
    paragraph = []
    if update is not None:
        share = update.prompt_tokens / (update.prompt_tokens + update.completion_tokens)
        paragraph.append(
            f"One GRPO update of the tiny model (labtwin `make_policy`, BatchReactor-v1): "
            f"{update.rows} completions of {update.completion_tokens} random tokens in groups "
            f"of {cfg.group_size}, each group after its campaign's {update.prompt_tokens}-token "
            f"first prompt ({share:.0%} of a row), micro-batches of {cfg.micro_batch_size}, "
            "no KL term, old log-probs the policy's own. Three contenders on copies of the same "
            "model, side by side in one run, one torch thread each, alternating within each "
            f"round, median of {cfg.rounds} rounds after a warm-up round: labtwin's "
            "`grpo_update` (loss, backward, clipping, AdamW step) with each group's prompt run "
            "once per micro-batch and its completions against its cached keys and values, the "
            "same with every row running its whole prompt, and TRL's `GRPOTrainer` "
            "(`compute_loss` with its token-mean `dapo` loss and entropies, "
            "`accelerator.backward` per micro-batch, clipping and its optimizer's step, on the "
            "same token ids; generation not timed). Wall seconds and this process's CPU-seconds "
            "(`time.process_time`; on a busy machine a one-thread contender's CPU time moves "
            "less than its wall time); the ratios are the contender's seconds over labtwin's "
            "with the prompt shared (above 1: labtwin's shared update is faster)."
        )
    if phases is not None:
        paragraph.append(
            f"Below it, where a whole GRPO step's time goes ({cfg.campaigns} x "
            f"{cfg.group_size} campaigns of {cfg.budget} experiments, constrained tool calls, "
            f"{cfg.max_new_tokens} new tokens per reply, mean of {cfg.steps} steps)"
            + (" and" if overlap is not None else ".")
        )
    if overlap is not None:
        paragraph.append(
            "one rollout with the simulator step in line or in a background thread while the "
            f"other half of the campaigns generates (median of {cfg.repeats})."
        )
    lines += [" ".join(paragraph), ""]
    if update is not None:
        lines += [
            "| " + " | ".join(UPDATE_COLUMNS) + " |",
            "| --- |" + " ---: |" * (len(UPDATE_COLUMNS) - 1),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in update_rows(update)]
        lines.append("")
    if phases is not None:
        total = sum(phases.values())
        lines += ["| phase | s / step | share |", "| --- | ---: | ---: |"]
        lines += [f"| {n} | {s:.2f} | {s / total:.0%} |" for n, s in phases.items()]
        lines += [f"| total | {total:.2f} | 100% |", ""]
    if overlap is not None:
        lines += [
            "| simulator | layout | s / rollout | tokens | vs 1 batch |",
            "| --- | --- | ---: | ---: | ---: |",
        ]
        for delay, rows in overlap.items():
            label = "reactor as is" if delay <= 0 else f"reactor + {delay:g} s sleep / call"
            base = rows["1 batch"][0]
            for name, (seconds, tokens) in rows.items():
                lines.append(
                    f"| {label} | {name} | {seconds:.2f} | {tokens} | {base / seconds:.2f}x |"
                )
        lines.append("")
    lines += ["Reading. " + reading(cfg, update, phases, overlap), ""]
    return "\n".join(lines)


def reading(
    cfg: Config,
    update: UpdateResult | None,
    phases: dict[str, float] | None,
    overlap: dict[float, dict[str, tuple[float, int]]] | None,
) -> str:
    sentences = []
    if update is not None:
        wall, cpu = update.seconds, update.cpu_seconds
        shared, unshared, trl = CONTENDERS
        sentences.append(
            f"Running each group's prompt once makes labtwin's update "
            f"{wall[unshared] / wall[shared]:.2f}x as fast as running it in every row "
            f"({wall[shared]:.2f} s against {wall[unshared]:.2f} s; "
            f"{cpu[unshared] / cpu[shared]:.2f}x in CPU-seconds): with "
            f"{min(cfg.group_size, cfg.micro_batch_size)} rows of a group in a micro-batch the "
            f"prompt's {update.prompt_tokens} tokens go through the layers once instead of "
            f"{min(cfg.group_size, cfg.micro_batch_size)} times, while every completion token "
            "still attends to all of them."
        )
        if trl in wall:
            sentences.append(
                f"TRL's `GRPOTrainer`, which also runs every row's whole prompt, takes "
                f"{wall[trl] / wall[shared]:.2f}x labtwin's shared time "
                f"({cpu[trl] / cpu[shared]:.2f}x in CPU-seconds) and "
                f"{wall[trl] / wall[unshared]:.2f}x the unshared one on the same model and batch."
            )
    if phases is not None:
        total = sum(phases.values())
        sentences.append(
            f"In a whole step (real multi-turn rollouts) the update is "
            f"{phases['optimisation'] / total:.0%} of {total:.2f} s and generation "
            f"{phases['generation'] / total:.0%}."
        )
    if overlap is not None:
        ratios = {
            delay: rows["1 batch"][0] / rows["2 halves, overlapped"][0]
            for delay, rows in overlap.items()
        }
        plain, *slow = ratios.items()
        sentences.append(
            f"Overlapping the reactor's step with generation runs at {plain[1]:.2f}x one batch"
            + "".join(f", {r:.2f}x with a {d:g} s GIL-free wait per call" for d, r in slow)
            + "."
        )
    sentences.append(
        "Load on the machine moves these figures, wall seconds most; compare runs on an idle "
        "machine."
    )
    return " ".join(sentences)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for name, value in vars(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument(
        "--parts", nargs="+", choices=PARTS, default=list(PARTS), help="which parts to run"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, under a minute")
    parser.add_argument("--markdown", metavar="FILE", help="write one markdown section to FILE")
    args = parser.parse_args(argv)
    cfg = Config(**{k: getattr(args, k) for k in vars(defaults)})
    if args.smoke:
        cfg = Config(
            rounds=3,
            steps=1,
            campaigns=2,
            group_size=2,
            budget=2,
            max_new_tokens=16,
            micro_batch_size=2,
            sim_delay=0.2,
            repeats=1,
        )
    torch.set_num_threads(1)  # the tiny model is fastest on one thread on a busy machine
    torch.manual_seed(0)

    console = Console(width=110)
    update = phases = overlap = None
    if "update" in args.parts:
        update = time_update(cfg)
        console.print(update_table(update, cfg))
    if "phases" in args.parts:
        phases = time_phases(cfg)
        console.print(phase_table(phases, cfg))
    if "overlap" in args.parts:
        overlap = {delay: time_overlap(cfg, delay) for delay in (0.0, cfg.sim_delay)}
        console.print(overlap_table(overlap))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(cfg, argv, update, phases, overlap))
        console.print(f"wrote {args.markdown}")


if __name__ == "__main__":
    main()
