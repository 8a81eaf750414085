"""GRPO with generation on a Ray actor and campaigns on a lab worker equals the local run.

Seeded sampling on one engine is deterministic (the same code, weights, seed and
batch as the local engine), so every metric that is not a clock reading must be
equal, float for float, and so must the run store's records and the final weights.
"""

from __future__ import annotations

import pytest
import torch

import labtwin
from labtwin.agents.train import TrainConfig, train

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # two training runs, ~1 min each

CLOCKS = ("_s", "tokens_per_s", "simulation_share")  # metric names that read a clock


def small(out, **changes) -> TrainConfig:
    return TrainConfig(
        steps=2,
        campaigns_per_step=2,
        group_size=4,
        budget=1,
        eval_campaigns=4,
        warmstart_steps=2,
        warmstart_batch=4,
        max_new_tokens=72,
        checkpoint_every=2,
        out=str(out),
        progress=False,
        learning_rate=3e-3,
        **changes,
    )


def unclocked(metrics: list[dict]) -> list[dict]:
    return [{k: v for k, v in m.items() if k != "time" and not k.endswith(CLOCKS)} for m in metrics]


def test_ray_generation_and_lab_worker_give_the_local_metrics(ray_cluster, tmp_path) -> None:
    local = train(small(tmp_path / "local"))
    on_ray = train(small(tmp_path / "ray", ray="auto", lab_workers=1))
    a, b = labtwin.runs.load(local.run_dir), labtwin.runs.load(on_ray.run_dir)
    assert (b.config["ray"], b.config["lab_workers"]) == ("auto", 1)
    assert [m["phase"] for m in b.metrics] == [m["phase"] for m in a.metrics]
    assert unclocked(b.metrics) == unclocked(a.metrics)
    assert any("loss" in m for m in a.metrics)  # the updates ran, so the sync mattered
    assert on_ray.eval_after == local.eval_after
    assert [r.to_dict(False) for r in b.records] == [r.to_dict(False) for r in a.records]
    from safetensors.torch import load_file

    final = "checkpoints/step_000002/model.safetensors"
    wa, wb = load_file(local.run_dir / final), load_file(on_ray.run_dir / final)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
