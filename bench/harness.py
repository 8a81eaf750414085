"""Gymnasium harness overhead: microseconds per env-step outside the simulator.

labtwin's ``VectorLabEnv`` steps many campaigns of a trivial lab (defined here: a ``Task``
subclass whose ``simulate`` draws one normal per experiment, like the third-party example
in ``docs/concepts.md``), so what is left after subtracting the simulate call's own time is
the harness: numeric actions to experiments, seeds and generators, campaign bookkeeping,
the observation and the infos. The peers are Gymnasium's ``SyncVectorEnv`` of CartPole-v1
(the loop over envs; its overhead is its step time less CartPole's own ``step``, timed
alone on one unwrapped env) and Gymnasium's vectorised ``CartPoleVectorEnv`` (physics and
harness in one numpy step, no split). Everything runs in one thread, side by side in one
run, median of ``--rounds`` rounds.

    python bench/harness.py                      # 64 and 1,024 envs
    python bench/harness.py --smoke              # seconds
    python bench/harness.py --markdown out.md    # one markdown section
    python bench/harness.py --profile            # also a cProfile listing of one round
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread for every contender

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

import labtwin  # noqa: E402
from labtwin.vector import VectorLabEnv  # noqa: E402


class Mix(labtwin.Experiment):
    """Three knobs of the kinds a numeric view maps: linear, log-scale and a choice."""

    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath temperature")
    time_s: float = labtwin.knob(1.0, 1000.0, unit="s", description="hold time", log=True)
    catalyst: Literal["Pd", "Pt", "Ni"] = "Pd"


class TrivialLab(labtwin.Task):
    """A lab whose simulator does almost nothing, so the harness is what is timed.

    ``simulate_s`` accumulates the wall time of its own ``simulate`` calls, which the bench
    subtracts from a step's time.
    """

    id = "TrivialHarness-v0"
    experiment_model = Mix
    observables = (labtwin.ObservableSpec("signal", "", "a noisy reading", scale=1.0),)
    public_conditions = (labtwin.ObservableSpec("target_K", "K", "target", scale=100.0),)
    brief = "Find the best mix."
    default_budget = 20

    def __init__(self, budget: int | None = None) -> None:
        super().__init__(budget)
        self.simulate_s = 0.0
        self.simulating = False

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        return {"target_K": float(rng.uniform(300.0, 360.0))}

    def simulate(self, experiments, conditions, rngs):
        self.simulating = True
        start = time.perf_counter()
        out = [
            labtwin.Measurement(
                "ok",
                {
                    "signal": labtwin.Value(
                        e.temperature_K / 380.0 + 0.01 * r.standard_normal(), "", 0.01
                    )
                },
            )
            for e, r in zip(experiments, rngs)
        ]
        self.simulate_s += time.perf_counter() - start
        self.simulating = False
        return out

    def reward(self, measurement, conditions):
        return measurement["signal"]


@dataclass
class Config:
    envs: list[int] = field(default_factory=lambda: [64, 1024])
    env_steps: int = 200_000  # env-steps timed per round and contender (steps = this / envs)
    rounds: int = 3
    seed: int = 0


# ---- labtwin ---------------------------------------------------------------------------------


PHASES = {  # phase -> [(owner, method name)] timed by wrapping the owner's bound methods
    "conversion": [("task", "_parse_batch_dumped")],  # numeric actions to experiments
    "generators": [("task", "experiment_rngs")],  # one seeded generator per experiment
    "results": [("task", "_dump"), ("task", "_finish_all")],  # the lab's measurements checked
    "records": [("batch", "_experiments"), ("batch", "_append_all")],  # scores, rewards, records
    "observation": [("env", "_observations")],
    "infos": [("env", "_step_infos")],
}
OWNERS = {"task": lambda env: env.task, "batch": lambda env: env.batch, "env": lambda env: env}


def _timed(owner: Any, name: str, totals: dict[str, float], phase: str, clock: GcClock) -> None:
    """Wrap ``owner.name`` (an instance's bound method) to add its wall time to ``totals``,
    less the collector's time in it (counted apart)."""
    method = getattr(owner, name, None)
    if method is None:
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, collected = time.perf_counter(), clock.total
        try:
            return method(*args, **kwargs)
        finally:
            totals[phase] += time.perf_counter() - start - (clock.total - collected)

    setattr(owner, name, wrapper)


def _timed_lending(
    owner: Any, name: str, totals: dict[str, float], phase: str, clock: GcClock
) -> None:
    """Wrap ``owner.name`` (a method returning a context manager) to time its entering."""
    method = getattr(owner, name, None)
    if method is None:
        return

    @contextmanager
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, collected = time.perf_counter(), clock.total
        manager = method(*args, **kwargs)
        value = manager.__enter__()
        totals[phase] += time.perf_counter() - start - (clock.total - collected)
        try:
            yield value
        finally:
            manager.__exit__(None, None, None)

    setattr(owner, name, wrapper)


class GcClock:
    """Time in the cyclic garbage collector, and how much of it fell inside ``simulate``.

    Collections are set off by everything allocated so far, most of it by the harness, so
    the bench counts a collection inside the lab's ``simulate`` as harness time.
    """

    def __init__(self, task: TrivialLab) -> None:
        self.task, self.total, self.in_simulate, self._start = task, 0.0, 0.0, 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        spent = time.perf_counter() - self._start
        self.total += spent
        if self.task.simulating:
            self.in_simulate += spent


def labtwin_round(n_envs: int, steps: int, seed: int, phases: bool) -> dict[str, float]:
    """One round: seconds per env-step in all, in simulate (less the collector's time
    there), in the garbage collector, and (with ``phases``) per phase."""
    task = TrivialLab()
    env = VectorLabEnv(task, n_envs)
    totals = dict.fromkeys(PHASES, 0.0)
    clock = GcClock(task)
    if phases:
        for phase, methods in PHASES.items():
            wrap = _timed_lending if phase == "generators" else _timed
            for who, name in methods:
                wrap(OWNERS[who](env), name, totals, phase, clock)
    actions = np.random.default_rng(seed).uniform(-1, 1, (steps, n_envs, 3)).astype(np.float32)
    env.reset(seed=seed)
    task.simulate_s = 0.0
    gc.callbacks.append(clock)
    try:
        start = time.perf_counter()
        for t in range(steps):
            env.step(actions[t])
        total = time.perf_counter() - start
    finally:
        gc.callbacks.remove(clock)
    n = steps * n_envs
    out = {
        "total": total / n,
        "simulate": (task.simulate_s - clock.in_simulate) / n,
        "gc": clock.total / n,
    }
    out.update({k: v / n for k, v in totals.items()})
    return out


# ---- peers -----------------------------------------------------------------------------------


def cartpole_raw_step(steps: int, seed: int) -> float:
    """Seconds of CartPole-v1's own ``step`` (one unwrapped env): the peer's simulator."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    env = CartPoleEnv()
    env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, 2, steps)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    return elapsed / steps  # the few resets are counted in; they cost about a step


def _vector_round(env: Any, n_envs: int, steps: int, seed: int) -> float:
    """Seconds per env-step of a Gymnasium vector env of CartPole, random actions."""
    env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, 2, (steps, n_envs))
    start = time.perf_counter()
    for t in range(steps):
        env.step(actions[t])
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed / (steps * n_envs)


def sync_round(n_envs: int, steps: int, seed: int) -> float:
    """Seconds per env-step of ``SyncVectorEnv`` over CartPole-v1."""
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n_envs)])
    return _vector_round(env, n_envs, steps, seed)


def vector_cartpole_round(n_envs: int, steps: int, seed: int) -> float | None:
    """Seconds per env-step of Gymnasium's numpy-vectorised ``CartPoleVectorEnv``."""
    try:
        from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
    except ImportError:
        return None
    return _vector_round(CartPoleVectorEnv(num_envs=n_envs), n_envs, steps, seed)


# ---- running and reporting ---------------------------------------------------------------------


@dataclass
class Row:
    envs: int
    labtwin: dict[str, float]  # medians, seconds per env-step
    sync_total: float
    cartpole_step: float
    vector_total: float | None

    @property
    def labtwin_outside(self) -> float:
        return self.labtwin["total"] - self.labtwin["simulate"]

    @property
    def sync_outside(self) -> float:
        return self.sync_total - self.cartpole_step


def run(cfg: Config) -> list[Row]:
    rows = []
    for n in cfg.envs:
        steps = max(2, cfg.env_steps // n)
        lab_rounds, sync, raw, vec = [], [], [], []
        labtwin_round(n, 2, cfg.seed, phases=False)  # warm-up: imports, caches
        for r in range(cfg.rounds):  # contenders interleaved, so load shifts hit all of them
            lab_rounds.append(labtwin_round(n, steps, cfg.seed + r, phases=False))
            sync.append(sync_round(n, steps, cfg.seed + r))
            raw.append(cartpole_raw_step(steps * n, cfg.seed + r))
            v = vector_cartpole_round(n, steps, cfg.seed + r)
            if v is not None:
                vec.append(v)
        phased = [labtwin_round(n, steps, cfg.seed + r, phases=True) for r in range(cfg.rounds)]
        medians = {k: statistics.median(d[k] for d in lab_rounds) for k in lab_rounds[0]}
        for k in PHASES:
            medians[k] = statistics.median(d[k] for d in phased)
        medians["phased_total"] = statistics.median(d["total"] - d["simulate"] for d in phased)
        medians["phased_gc"] = statistics.median(d["gc"] for d in phased)
        rows.append(
            Row(
                n,
                medians,
                statistics.median(sync),
                statistics.median(raw),
                statistics.median(vec) if vec else None,
            )
        )
    return rows


def us(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e6:.2f}"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| envs | contender | µs / env-step | simulator µs | outside the simulator µs | vs labtwin |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        mine = row.labtwin_outside
        lines.append(
            f"| {row.envs:,} | labtwin `VectorLabEnv` (trivial lab) | {us(row.labtwin['total'])} | "
            f"{us(row.labtwin['simulate'])} | {us(mine)} | 1.00x |"
        )
        lines.append(
            f"| {row.envs:,} | Gymnasium `SyncVectorEnv` CartPole-v1 | {us(row.sync_total)} | "
            f"{us(row.cartpole_step)} | {us(row.sync_outside)} | {row.sync_outside / mine:.2f}x |"
        )
        if row.vector_total is not None:
            lines.append(
                f"| {row.envs:,} | Gymnasium `CartPoleVectorEnv` | {us(row.vector_total)} | "
                f"(in the step) | — | {row.vector_total / mine:.2f}x (whole step) |"
            )
    return lines


def profile_lines(rows: list[Row]) -> list[str]:
    lines = [
        "| envs | conversion | generators | results | records | observation | infos | "
        "garbage collector | bookkeeping (rest) | outside the simulator |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        m = row.labtwin
        rest = m["phased_total"] - sum(m[k] for k in PHASES) - m["phased_gc"]
        lines.append(
            f"| {row.envs:,} | {' | '.join(us(m[k]) for k in PHASES)} | "
            f"{us(m['phased_gc'])} | {us(rest)} | {us(m['phased_total'])} |"
        )
    return lines


def markdown(rows: list[Row], cfg: Config, argv: list[str]) -> str:
    shown = []
    skip = False
    for a in argv:  # the command without where it writes
        if skip or a.startswith("--markdown="):
            skip = False
            continue
        if a == "--markdown":
            skip = True
            continue
        shown.append(a)
    args = " ".join(shown)
    command = f"python bench/harness.py{' ' + args if args else ''}"
    lines = [
        f"## Gymnasium harness overhead per env-step (`{command}`)",
        "",
        "Microseconds per env-step spent outside the simulator, one thread, contenders "
        f"interleaved in one run, median of {cfg.rounds} rounds of about {cfg.env_steps:,} "
        "env-steps each. labtwin: `VectorLabEnv` over a trivial numeric lab defined in the "
        "bench (three knobs: linear, log-scale, a choice; `simulate` draws one normal per "
        "experiment), the lab's own `simulate` time subtracted (less any garbage collection "
        "that ran inside it, which the harness's allocations set off). `SyncVectorEnv`: its step "
        "time less CartPole-v1's own `step` timed alone on one unwrapped env. "
        "`CartPoleVectorEnv` does physics and bookkeeping in one numpy step, so its whole "
        "step is shown. The ratio is the peer's figure over labtwin's (above 1: labtwin "
        "spends less).",
        "",
        *table(rows),
        "",
        "Where labtwin's time goes (µs per env-step, from rounds with each phase timed; "
        "conversion: numeric actions to validated experiments; generators: a seeded generator "
        "per experiment; results: the lab's measurements checked and stamped (`Task._finish_all`); "
        "records: scores, rewards and the campaign records; the collector's time is counted "
        "apart, wherever it ran, a collection inside the lab's `simulate` included; "
        "bookkeeping is the rest: seeds, slot checks, the numeric view of each measured "
        "experiment, confirmations, autoreset, and the timing wrappers' own calls):",
        "",
        *profile_lines(rows),
        "",
        "Reading. " + reading(rows),
        "",
    ]
    return "\n".join(lines)


#: the aim for 1,024 envs: at most 20 µs per env-step outside the simulator, set where
#: `SyncVectorEnv` over CartPole-v1 took 10 µs per env-step, whole step; on a machine whose
#: speed moves, the same aim as a ratio taken side by side is that step over labtwin's
#: outside-the-simulator time of at least 10 / 20
AIM_US, AIM_PEER_US = 20.0, 10.0


def reading(rows: list[Row]) -> str:
    big = rows[-1]
    text = (
        f"At {big.envs:,} envs labtwin spends {us(big.labtwin_outside)} µs per env-step "
        f"outside its simulator against {us(big.sync_outside)} µs for `SyncVectorEnv`'s loop "
        "over CartPole; a labtwin step also validates every action into an experiment, seeds "
        "a generator per experiment and records a measurement per campaign, which CartPole "
        "does not. "
    )
    if big.envs == 1024:
        ratio, aim = big.sync_total / big.labtwin_outside, AIM_PEER_US / AIM_US
        text += (
            f"Against the aim of {AIM_US:g} µs, set where `SyncVectorEnv`'s whole CartPole "
            f"step took {AIM_PEER_US:g} µs: this run's whole step of {us(big.sync_total)} µs "
            f"over labtwin's {us(big.labtwin_outside)} µs is {ratio:.2f} (aim at least "
            f"{aim:.2f}: {'met' if ratio >= aim else 'NOT met'}), and "
            f"{us(big.labtwin_outside)} µs against {AIM_US:g} µs is "
            f"{'met' if big.labtwin_outside * 1e6 <= AIM_US else 'NOT met'} on this machine "
            "as it ran. "
        )
    return text + (
        "Load on the machine and its speed move these figures; the ratios, taken side by "
        "side, move less."
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=Config().envs)
    parser.add_argument("--env-steps", type=int, default=Config.env_steps)
    parser.add_argument("--rounds", type=int, default=Config.rounds)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--markdown", metavar="FILE", help="write one markdown section to FILE")
    parser.add_argument("--profile", action="store_true", help="cProfile one labtwin round")
    args = parser.parse_args(argv)
    cfg = Config(args.envs, args.env_steps, args.rounds)
    if args.smoke:
        cfg.envs, cfg.env_steps, cfg.rounds = [8, 64], 2_000, 3
    rows = run(cfg)
    print("\n".join(table(rows)))
    print()
    print("\n".join(profile_lines(rows)))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, cfg, argv))
    if args.profile:
        import cProfile
        import pstats

        n = cfg.envs[-1]
        cProfile.runctx(
            "labtwin_round(n, max(2, cfg.env_steps // n), 0, False)",
            globals(),
            {"n": n, "cfg": cfg, "labtwin_round": labtwin_round},
            "/tmp/harness.prof",
        )
        pstats.Stats("/tmp/harness.prof").sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
