"""``labtwin eval``: policies and baselines on fixed held-out campaigns of one lab.

An *agent* here is a policy (the trained checkpoint of a run, its warm-started or
untrained starting point, or any local Hugging Face model) or a baseline optimiser
(random search, CMA-ES, Bayesian optimisation). Each runs ``samples`` campaigns on each of
``campaigns`` held-out campaign seeds: the samples of one seed share its hidden conditions
and its measurement noise and differ only by the agent's own randomness, so ``c`` successes
of ``n`` samples give an unbiased pass@k and pass^k of that campaign
(:mod:`~labtwin.agents.evaluation.estimators`).

Seeds, in one place:

- held-out campaign seeds: ``derive_seeds(seed, campaigns, HELDOUT, lab_key)`` with
  ``lab_key`` the CRC-32 of the lab's id, a stream no training run draws from (training
  derives its campaigns from its own seed and the stream numbers 1-7 of
  :class:`~labtwin.agents.train.Stream`);
- policy sampling: batch ``b`` of the rollouts samples with
  ``derive_seeds(seed, 1, SAMPLING, lab_key, b)``, the same for every policy, so policies
  differ only by their weights;
- baseline agents: agent ``i`` (campaign seed ``i // samples``, sample ``i % samples``) is
  seeded with the ``i``-th of ``derive_seeds(seed, campaigns * samples, BASELINE, name_key)``.

The same settings give the same numbers (rollouts are batched ``batch_campaigns`` at a
time; a different batching samples differently). What an evaluation writes::

    summary.json          settings, and per agent: successes per campaign, pass@k and pass^k
                          for k = 1..samples, success rate, reward, valid calls, cost, the
                          sample-efficiency curves and their areas, the hack rate
    table.md              the summary table
    pass_at_k.png         pass@k and pass^k against k, every agent
    efficiency.png        mean best score against experiments and against cost
    timing.json           seconds per agent (not part of the deterministic summary)
    campaigns/<agent>/    every evaluation campaign as a run (labtwin.runs.load), and
    campaigns/<agent>-impossible/   those on the lab's impossible variant
"""

from __future__ import annotations

import json
import shutil
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import numpy as np

import labtwin
from labtwin.agents.evaluation.config import EvalConfig
from labtwin.agents.evaluation.efficiency import cost_curve, experiment_curve, total_cost
from labtwin.agents.evaluation.estimators import mean_pass_at_k, mean_pass_hat_k
from labtwin.agents.train_config import TrainConfig
from labtwin.campaign import CampaignBatch, Record, derive_seeds
from labtwin.registry import short_id
from labtwin.runs import RunStore
from labtwin.task import Task

# seed-stream keys of the evaluation (never renumber: they are part of every evaluation's seeds)
HELDOUT = 101
SAMPLING = 102
BASELINE = 103
BASELINES = ("random", "cmaes", "bo")
POLICY_NAMES = ("untrained", "warm_start", "trained", "model")
#: what an evaluation writes into its folder (a curve fit or a report may sit beside them)
EVAL_FILES = (
    "summary.json", "table.md", "pass_at_k.png", "efficiency.png", "timing.json", "campaigns",
)  # fmt: skip


def _key(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def heldout_seeds(task_id: str, n: int, seed: int = 0) -> list[int]:
    """The ``n`` held-out campaign seeds of a lab (the same for every agent and run)."""
    return derive_seeds(seed, n, HELDOUT, _key(short_id(task_id)))


class CannotRun(ValueError):
    """An agent that cannot run a lab (a numeric optimiser on a text lab)."""


@dataclass
class AgentSpec:
    """One agent to evaluate: a policy (``load`` builds it) or a baseline by name."""

    name: str
    kind: Literal["policy", "baseline"]
    source: str
    load: Callable[[], Any] | None = field(default=None, repr=False)


@dataclass
class Sampled:
    """One evaluation campaign: which held-out seed it ran, and what it recorded."""

    seed_index: int
    records: list[Record]
    conditions: dict[str, Any]
    reward: float


# ---- which agents -----------------------------------------------------------------------


def train_config_of(run_dir: Path) -> TrainConfig:
    """The :class:`TrainConfig` a training run was made with (from its config.json)."""
    config_file = Path(run_dir) / "config.json"
    if not config_file.exists():
        raise FileNotFoundError(f"{run_dir} is not a labtwin run (no config.json)")
    config = json.loads(config_file.read_text())
    if config.get("kind") != "train":
        raise ValueError(f"{run_dir} is not a training run (kind {config.get('kind')!r})")
    names = {f.name for f in fields(TrainConfig)}
    values = {k: v for k, v in config.items() if k in names}
    values.update(task=short_id(config["task"]), out=None, resume=False, progress=False)
    return TrainConfig(**values)


def resolve_checkpoint(run_dir: Path, checkpoint: str | None) -> Path:
    """A checkpoint folder of a run: by name (``step_000020``), path, or the latest."""
    base = Path(run_dir) / "checkpoints"
    if checkpoint is None:
        marker = base / "latest"
        if not marker.exists():
            raise FileNotFoundError(f"{run_dir} has no checkpoint")
        return base / marker.read_text().strip()
    path = Path(checkpoint)
    for candidate in (path, base / checkpoint):
        if (candidate / "config.json").exists():
            return candidate
    known = sorted(p.name for p in base.glob("*") if p.is_dir()) if base.exists() else []
    raise FileNotFoundError(
        f"no checkpoint {checkpoint!r} in {run_dir}; checkpoints: {', '.join(known) or 'none'}"
    )


def load_policy(path: Path) -> Callable[[], Any]:
    def load():
        import torch

        from labtwin.agents.policy import HFPolicy

        return HFPolicy.from_pretrained(path, dtype=torch.float32)

    return load


def run_agents(run_dir: Path, checkpoint: str | None = None) -> list[AgentSpec]:
    """A training run's policies: untrained (rebuilt from its config, or its model folder),
    after the warm start (if the run saved one) and the checkpoint (default the latest)."""
    cfg = train_config_of(run_dir)
    trained = resolve_checkpoint(run_dir, checkpoint)
    specs = [model_agent(cfg, "untrained")]
    warm = Path(run_dir) / "checkpoints" / "warm_start"
    if (warm / "config.json").exists():
        specs.append(AgentSpec("warm_start", "policy", str(warm), load_policy(warm)))
    specs.append(AgentSpec("trained", "policy", str(trained), load_policy(trained)))
    return specs


def model_agent(cfg: TrainConfig, name: str = "model") -> AgentSpec:
    """The policy ``cfg.model`` names: the tiny model built from ``cfg`` (untrained), or a
    local Hugging Face model folder."""
    if cfg.model != "tiny":
        return AgentSpec(name, "policy", cfg.model, load_policy(Path(cfg.model)))

    def load():
        from labtwin.agents.train import make_policy

        return make_policy(cfg)

    return AgentSpec(name, "policy", f"tiny (seed {cfg.seed}, untrained)", load)


def baseline_agents(names: Sequence[str] = BASELINES) -> list[AgentSpec]:
    unknown = [n for n in names if n not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baseline(s) {unknown}; baselines: {', '.join(BASELINES)}")
    return [AgentSpec(n, "baseline", n) for n in names]


# ---- the lab and its impossible variant ------------------------------------------------------


def impossible_variant(task_id: str, budget: int) -> tuple[Task | None, str]:
    """The lab built with ``impossible=True``, or None and why it has none."""
    try:
        return labtwin.load_task(task_id, budget=budget, impossible=True), ""
    except TypeError:
        return None, "the lab has no impossible variant"
    except ValueError as err:
        return None, str(err)


def has_success_predicate(task: Task) -> bool:
    """Whether the lab says when a campaign succeeded (a threshold or its own predicate)."""
    return task.success_threshold is not None or type(task).success is not Task.success


# ---- rollouts -------------------------------------------------------------------------------


def policy_rollouts(
    policy: Any,
    task: Task,
    seeds: Sequence[int],
    samples: int,
    cfg: TrainConfig,
    ecfg: EvalConfig,
    recorder: RunStore | None,
) -> list[Sampled]:
    """``samples`` campaigns of each seed, ``batch_campaigns`` per batched rollout."""
    from labtwin.agents.rollout import run_episodes
    from labtwin.agents.train import make_grammar

    grammar = make_grammar(policy, task, cfg)
    flat = [(i, s) for i, s in enumerate(seeds) for _ in range(samples)]
    out: list[Sampled] = []
    for b, start in enumerate(range(0, len(flat), ecfg.batch_campaigns)):
        chunk = flat[start : start + ecfg.batch_campaigns]
        episodes, _ = run_episodes(
            policy,
            task,
            [s for _, s in chunk],
            1,
            cfg.invalid_penalty,
            cfg.max_new_tokens,
            cfg.temperature,
            seed=derive_seeds(ecfg.seed, 1, SAMPLING, _key(task.id), b)[0],
            generate_kwargs={"logits_processor": grammar},
            recorder=recorder,
            first_campaign_id=start,
        )
        out += [Sampled(i, e.records, e.conditions, e.reward) for (i, _), e in zip(chunk, episodes)]
    return out


def baseline_rollouts(
    name: str,
    task: Task,
    seeds: Sequence[int],
    samples: int,
    invalid_penalty: float,
    ecfg: EvalConfig,
    recorder: RunStore | None,
) -> list[Sampled]:
    """``samples`` campaigns of each seed with a baseline optimiser, all in one batch.
    :class:`CannotRun` where the baseline cannot run the lab (CMA-ES on a text lab)."""
    from labtwin.runner import load_agent

    flat = [(i, s) for i, s in enumerate(seeds) for _ in range(samples)]
    # 31-bit agent seeds: CMA-ES and optuna take seeds below 2**32
    agent_seeds = [s % 2**31 for s in derive_seeds(ecfg.seed, len(flat), BASELINE, _key(name))]
    agents = [load_agent(name) for _ in flat]
    for agent, agent_seed in zip(agents, agent_seeds):
        try:
            agent.reset(task.action_space, agent_seed, task=task)
        except ValueError as err:  # the agent cannot run this lab (CMA-ES on a text lab)
            raise CannotRun(str(err)) from err
    batch = CampaignBatch(task, len(flat), invalid_penalty=invalid_penalty, recorder=recorder)
    campaigns = batch.reset(range(len(flat)), [s for _, s in flat])
    while True:
        live = [k for k, c in enumerate(campaigns) if not c.done]
        if not live:
            break
        proposals = [agents[k].propose() for k in live]
        for k, proposal, record in zip(live, proposals, batch.step(live, proposals)):
            score = record.score if record.score is not None else task.invalid_score
            agents[k].observe(proposal, float(score))
    return [
        Sampled(i, list(c.history), c.conditions, float(sum(r.reward for r in c.history)))
        for (i, _), c in zip(flat, campaigns)
    ]


# ---- summaries ------------------------------------------------------------------------------


def success_counts(task: Task, sampled: Sequence[Sampled], n_seeds: int) -> list[int]:
    counts = [0] * n_seeds
    for s in sampled:
        counts[s.seed_index] += bool(task.success(s.records, s.conditions))
    return counts


def summarise_agent(
    spec: AgentSpec,
    task: Task,
    sampled: Sequence[Sampled],
    n_seeds: int,
    samples: int,
    horizon: float,
) -> dict[str, Any]:
    """Every number of one agent on the held-out campaigns."""
    counts = success_counts(task, sampled, n_seeds)
    k, at_k, at_k_sem = mean_pass_at_k(counts, samples)
    _, hat_k, hat_k_sem = mean_pass_hat_k(counts, samples)
    budgeted = [r for s in sampled for r in s.records if r.budgeted]
    rewards = np.array([s.reward for s in sampled])
    campaigns = [s.records for s in sampled]
    start = float(task.baseline_score)
    return {
        "name": spec.name,
        "kind": spec.kind,
        "source": spec.source,
        "successes": counts,
        "success_rate": float(np.mean(counts) / samples),
        "pass_at_k": {"k": k.tolist(), "mean": at_k.tolist(), "sem": at_k_sem.tolist()},
        "pass_hat_k": {"k": k.tolist(), "mean": hat_k.tolist(), "sem": hat_k_sem.tolist()},
        "reward_mean": float(rewards.mean()),
        "reward_sem": float(rewards.std(ddof=1) / np.sqrt(len(rewards)))
        if len(rewards) > 1
        else 0.0,
        "valid_fraction": float(
            np.mean([r.measurement.status != "invalid" for r in budgeted] or [0.0])
        ),
        "cost_mean": float(np.mean([total_cost(c) for c in campaigns])),
        "cost_unit": task.cost_unit,
        "experiments_curve": experiment_curve(campaigns, task.budget, start).to_dict(),
        "cost_curve": cost_curve(campaigns, horizon, start, unit=task.cost_unit).to_dict(),
    }


def _hack_summary(task: Task, sampled: Sequence[Sampled]) -> dict[str, Any]:
    hacks = [bool(task.success(s.records, s.conditions)) for s in sampled]
    return {
        "campaigns": len(sampled),
        "hacks": int(sum(hacks)),
        "hack_rate": float(np.mean(hacks)) if hacks else 0.0,
    }


# ---- the evaluation -------------------------------------------------------------------------


def evaluate_agents(
    specs: Sequence[AgentSpec],
    cfg: TrainConfig,
    ecfg: EvalConfig,
    out: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run every agent on the lab's held-out campaigns (and its impossible variant); returns
    the summary and, with ``out``, writes the files listed in the module docstring.

    ``cfg`` gives the policies' generation settings (``max_new_tokens``, ``temperature``,
    ``constrained``, ``invalid_penalty``; the baselines use the same invalid-call penalty).
    """
    import torch

    ecfg.validate()
    say = log or (lambda _line: None)
    budget = ecfg.budget or cfg.budget
    task = labtwin.load_task(ecfg.task, budget=budget)
    impossible, no_variant = impossible_variant(ecfg.task, budget)
    seeds = heldout_seeds(task.id, ecfg.campaigns, ecfg.seed)
    if out is not None:
        out = Path(out)
        if any((out / name).exists() for name in EVAL_FILES):
            raise FileExistsError(
                f"{out} already holds an evaluation; remove it or pass --overwrite"
            )
        out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(ecfg.threads)
    results: dict[str, tuple[AgentSpec, list[Sampled], dict[str, Any]]] = {}
    timing: dict[str, float] = {}
    try:
        for spec in specs:
            start = time.perf_counter()
            say(f"{spec.name}: {ecfg.campaigns} campaigns x {ecfg.samples} samples")
            policy = spec.load() if spec.kind == "policy" else None

            def rollouts(lab: Task, n: int, suffix: str, spec=spec, policy=policy):
                store = _store(out, spec, lab, ecfg, suffix) if ecfg.records and out else None
                try:
                    if policy is not None:
                        return policy_rollouts(policy, lab, seeds, n, cfg, ecfg, store)
                    return baseline_rollouts(
                        spec.name, lab, seeds, n, cfg.invalid_penalty, ecfg, store
                    )
                finally:
                    if store is not None:
                        store.close()

            try:
                sampled = rollouts(task, ecfg.samples, "")
            except CannotRun as err:  # a baseline that cannot run this lab
                results[spec.name] = (spec, [], {"skipped": str(err)})
                say(f"{spec.name}: skipped ({err})")
                continue
            if impossible is None or ecfg.hack_samples == 0:
                hack = {"skipped": no_variant or "hack_samples is 0"}
            else:
                hack = _hack_summary(
                    impossible, rollouts(impossible, ecfg.hack_samples, "-impossible")
                )
            results[spec.name] = (spec, sampled, hack)
            timing[spec.name] = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)

    horizon = max(
        (total_cost(s.records) for _, sampled, _ in results.values() for s in sampled),
        default=0.0,
    )
    agents = {}
    for name, (spec, sampled, hack) in results.items():
        if not sampled:
            agents[name] = {"name": name, "kind": spec.kind, "source": spec.source, **hack}
            continue
        summary = summarise_agent(spec, task, sampled, len(seeds), ecfg.samples, horizon)
        agents[name] = {**summary, "impossible": hack}
    summary = {
        "task": f"labtwin/{task.id}",
        "budget": budget,
        "campaigns": ecfg.campaigns,
        "samples": ecfg.samples,
        "hack_samples": ecfg.hack_samples,
        "seed": ecfg.seed,
        "heldout_seeds": seeds,
        "batch_campaigns": ecfg.batch_campaigns,
        "success_threshold": task.success_threshold,
        "success_predicate": has_success_predicate(task),
        "cost_horizon": horizon,
        "cost_unit": task.cost_unit,
        "generation": {
            k: getattr(cfg, k)
            for k in ("max_new_tokens", "temperature", "constrained", "invalid_penalty")
        },
        "agents": agents,
    }
    if out is not None:
        write_outputs(summary, out)
        (out / "timing.json").write_text(json.dumps({"seconds": timing}, indent=2))
    return summary


def _store(out: Path, spec: AgentSpec, lab: Task, ecfg: EvalConfig, suffix: str) -> RunStore:
    config = {
        "kind": "eval",
        "task": f"labtwin/{lab.id}",
        "agent": spec.name,
        "source": spec.source,
        "impossible": bool(suffix),
        **{k: v for k, v in asdict(ecfg).items() if k not in ("task", "records")},
        "budget": lab.budget,
    }
    return RunStore(out / "campaigns" / f"{spec.name}{suffix}", config, durable=False)


def write_outputs(summary: dict[str, Any], out: Path) -> None:
    """summary.json, table.md and the two figures."""
    from labtwin.agents.evaluation.plots import plot_efficiency, plot_pass_at_k

    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "table.md").write_text(markdown_table(summary))
    plot_pass_at_k(summary).savefig(out / "pass_at_k.png")
    plot_efficiency(summary).savefig(out / "efficiency.png")


TABLE_COLUMNS = (
    "agent", "pass@1", "pass@K", "pass^K", "reward", "valid", "cost", "AUC exp", "AUC cost",
    "hacks",
)  # fmt: skip
#: what the columns mean (docs/evaluation.md says more)
TABLE_NOTES = (
    "pass@K and pass^K at K = samples; reward: mean campaign reward ± its standard error; "
    "valid: share of valid calls; cost: mean per campaign; AUC exp / AUC cost: areas of the "
    "sample-efficiency curves against experiments and cost; hacks: successes of the campaigns "
    "on the impossible variant"
)


def table_rows(summary: dict[str, Any]) -> list[list[str]]:
    """The summary table's rows (K = samples), one per agent, as text."""
    rows = []
    for name, a in summary["agents"].items():
        if "skipped" in a and "pass_at_k" not in a:
            rows.append([name] + [f"skipped: {a['skipped']}"] + [""] * (len(TABLE_COLUMNS) - 2))
            continue
        hack = a["impossible"]
        rows.append(
            [
                name,
                f"{a['pass_at_k']['mean'][0]:.3f}",
                f"{a['pass_at_k']['mean'][-1]:.3f}",
                f"{a['pass_hat_k']['mean'][-1]:.3f}",
                f"{a['reward_mean']:+.3f}±{a['reward_sem']:.3f}",
                f"{a['valid_fraction']:.0%}",
                f"{a['cost_mean']:.3g} {a['cost_unit']}".strip(),
                f"{a['experiments_curve']['area']:.3f}",
                f"{a['cost_curve']['area']:.3f}",
                "-" if "skipped" in hack else f"{hack['hacks']}/{hack['campaigns']}",
            ]
        )
    return rows


def markdown_table(summary: dict[str, Any]) -> str:
    head = (
        f"{summary['task']} · budget {summary['budget']} · {summary['campaigns']} held-out "
        f"campaigns x {summary['samples']} samples (K = {summary['samples']})\n\n"
    )
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + " --- |" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(summary)]
    return head + "\n".join(lines) + "\n\n" + TABLE_NOTES + ".\n"


def remove_evaluation(out: Path) -> None:
    """Remove what an earlier evaluation wrote in ``out`` (and nothing else)."""
    for name in EVAL_FILES:
        path = Path(out) / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


# ---- what `labtwin eval` evaluates ------------------------------------------------------------


@dataclass
class Plan:
    """The agents, generation settings, evaluation settings and output of one evaluation."""

    specs: list[AgentSpec]
    cfg: TrainConfig
    ecfg: EvalConfig
    out: Path


def plan(
    path: Path | None,
    model: str | None,
    task: str | None,
    checkpoint: str | None,
    agent_names: Sequence[str] | None,
    ecfg: EvalConfig,
    out: Path | None,
) -> Plan:
    """Resolve what ``labtwin eval`` was asked: a training run (or one of its checkpoint
    folders), a model (``tiny`` or a local folder) on a lab, or the baselines alone.

    Raises FileNotFoundError, ValueError or KeyError with a one-line reason."""
    if path is not None and model is not None:
        raise ValueError("evaluate a run or a --model, not both")
    path = Path(path) if path is not None else None
    if path is not None and (path / "trainer.pt").exists() and path.parent.name == "checkpoints":
        if checkpoint is not None:
            raise ValueError("a checkpoint folder was given: leave out --checkpoint")
        path, checkpoint = path.parent.parent, str(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    if path is not None:
        cfg = train_config_of(path)
        lab = task or cfg.task
        specs = run_agents(path, checkpoint)
        default_out = path / "eval"
        budget = ecfg.budget or cfg.budget
    else:
        if checkpoint is not None:
            raise ValueError("--checkpoint needs a training run")
        lab = task or ecfg.task
        budget = ecfg.budget or labtwin.load_task(lab).budget
        cfg = TrainConfig(task=lab, budget=budget, model=model or "tiny")
        specs = [model_agent(cfg, "model")] if model is not None else []
        default_out = Path("runs") / f"eval-{short_id(lab)}-{stamp}"
    specs += baseline_agents()
    if agent_names:
        known = {s.name: s for s in specs}
        unknown = [n for n in agent_names if n not in known]
        if unknown:
            raise ValueError(f"unknown agent(s) {unknown}; this evaluation has: {', '.join(known)}")
        specs = [known[n] for n in agent_names]
    ecfg.task, ecfg.budget = short_id(lab), budget
    return Plan(specs, cfg, ecfg.validate(), Path(out) if out is not None else default_out)
