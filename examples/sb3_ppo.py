"""Train Stable-Baselines3 PPO on a lab's numeric view, one batched simulator call per step.

    python examples/sb3_ppo.py                      # ~2 minutes on 2 CPU cores
    python examples/sb3_ppo.py --smoke              # seconds, as CI runs it

Each PPO environment is one campaign of ``--budget`` experiments; an action is
an experiment in ``[-1, 1]^4`` and the reward is the improvement of the
campaign's best measured yield, so a campaign's return is its best yield.
``labtwin.agents.interop.SB3VecEnv`` runs all ``--envs`` campaigns with one
kinetics call per step (SB3's ``DummyVecEnv`` would call the simulator once
per campaign). Prints the mean campaign return on fixed evaluation campaigns
for random experiments, the untrained policy and the trained one, and saves
the model under ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch


def mean_return(model, task: str, budget: int, campaigns: int, seed: int) -> float:
    """Mean return of ``campaigns`` fixed campaigns; ``model=None`` proposes random experiments."""
    from labtwin.agents.interop import SB3VecEnv

    env = SB3VecEnv(task, campaigns, budget=budget)
    env.seed(seed)
    obs = env.reset()
    rng = np.random.default_rng(seed)
    returns = np.zeros(campaigns)
    for _ in range(budget):  # every campaign ends after exactly `budget` experiments
        if model is None:
            actions = rng.uniform(-1.0, 1.0, (campaigns, *env.action_space.shape))
        else:
            actions, _ = model.predict(obs, deterministic=True)
        obs, rewards, _, _ = env.step(actions)
        returns += rewards
    return float(returns.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="BatchReactor-v1")
    parser.add_argument("--budget", type=int, default=5, help="experiments per campaign")
    parser.add_argument("--envs", type=int, default=32, help="campaigns stepped together")
    parser.add_argument("--timesteps", type=int, default=8000, help="experiments to train on")
    parser.add_argument("--eval-campaigns", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/sb3_ppo"))
    parser.add_argument("--smoke", action="store_true", help="a few seconds: tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.budget, args.envs, args.timesteps, args.eval_campaigns = 2, 8, 64, 8
    try:
        from stable_baselines3 import PPO
        from stable_baselines3.common.vec_env import VecMonitor
    except ImportError:
        print("skipped: this example needs stable-baselines3 (pip install stable-baselines3)")
        return
    from labtwin.agents.interop import SB3VecEnv

    torch.set_num_threads(1)  # small MLPs and the kinetics batch: one thread is fastest
    eval_seed = 10_000
    env = VecMonitor(SB3VecEnv(args.task, args.envs, budget=args.budget))
    n_steps = 2 * args.budget  # experiments per campaign slot per rollout: two campaigns
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=n_steps,
        batch_size=min(64, n_steps * args.envs),
        n_epochs=10,
        learning_rate=1e-3,
        gamma=1.0,  # a campaign's return is its best score: no discounting
        ent_coef=0.0,
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    random_return = mean_return(None, args.task, args.budget, args.eval_campaigns, eval_seed)
    before = mean_return(model, args.task, args.budget, args.eval_campaigns, eval_seed)
    start = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    elapsed = time.perf_counter() - start
    after = mean_return(model, args.task, args.budget, args.eval_campaigns, eval_seed)

    args.out.mkdir(parents=True, exist_ok=True)
    model.save(args.out / "ppo_model")
    print(
        f"{args.task}, budget {args.budget}: mean campaign return (best measured score) "
        f"over {args.eval_campaigns} evaluation campaigns"
    )
    print(f"  random experiments : {random_return:.4f}")
    print(f"  PPO before training: {before:.4f}")
    print(f"  PPO after training : {after:.4f}  ({args.timesteps} experiments, {elapsed:.0f} s)")
    print(f"model: {args.out / 'ppo_model.zip'}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
