"""A generation engine that dies or hangs is replaced, with the weights synced before.

The engine's process is killed with SIGKILL (as the out-of-memory killer would), or
stopped with SIGSTOP (alive, never answering: past the generator's timeout); the
next call goes to a new engine, which must sample what the dead one sampled for the same
prompts and seed (same weights, same code), and those weights must be the synced ones,
not the ones the engines were built with.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest
import torch
from ray_labs import SLOW_START_MARKER, SlowStartEngine

from labtwin.agents.ray_generation import RayGenerator
from labtwin.agents.train import TrainConfig, make_policy

pytestmark = pytest.mark.timeout(300)


def sampled(completions) -> list[tuple[list[int], list[float]]]:
    return [(list(c.completion_ids), [float(x) for x in c.logprobs]) for c in completions]


def test_a_killed_engine_is_replaced_and_samples_with_the_synced_weights(ray_cluster) -> None:
    cfg = TrainConfig(budget=1, progress=False)
    policy = make_policy(cfg)
    generator = RayGenerator(policy, cfg, engines=2)
    try:
        words = ["run the reactor hotter", "measure the yield", "stop", "cool it down"]
        prompts = [policy.tokenizer(w, add_special_tokens=False)["input_ids"] for w in words]
        ask = {"n": 2, "max_new_tokens": 12, "temperature": 1.0, "seed": 11}
        as_built = sampled(generator.generate(prompts, **ask))
        with torch.no_grad():  # an update: the engines must sample from these weights now
            for parameter in policy.model.parameters():
                parameter.mul_(1.05)
        generator.load_weights(policy.model)
        synced = sampled(generator.generate(prompts, **ask))
        assert synced != as_built  # the sync changes what is sampled

        killed = generator.info[1]["pid"]
        os.kill(killed, signal.SIGKILL)
        assert sampled(generator.generate(prompts, **ask)) == synced
        assert len(generator.replacements) == 1
        engine, reason = generator.replacements[0]
        assert engine == 1 and "generation engine process died" in reason
        assert generator.info[1]["pid"] != killed  # a new process holds engine 1

        generator.timeout_s = 20.0  # a call takes well under a second here
        hung = generator.info[0]["pid"]
        os.kill(hung, signal.SIGSTOP)  # alive, never answering
        try:
            assert sampled(generator.generate(prompts, **ask)) == synced
        finally:
            with contextlib.suppress(ProcessLookupError):  # ray.kill ends it; if not, this does
                os.kill(hung, signal.SIGKILL)
        assert generator.replacements[-1] == (
            0,
            "the generation engine did not answer within 20 s",
        )

        generator.max_replacements = 0  # no second chance: the run stops with the reason
        os.kill(generator.info[0]["pid"], signal.SIGKILL)
        with pytest.raises(
            RuntimeError, match="generation engine 0 failed, with its 0 replacement"
        ):
            generator.generate(prompts, **ask)
    finally:
        generator.close()


def test_an_engine_that_does_not_come_up_is_replaced_or_stops_the_start(ray_cluster) -> None:
    """With ``startup_timeout_s``, a replacement whose build hangs is killed once the
    deadline passes and counts as a replacement; the next one, which comes up, samples what
    the first engine sampled. At the start, engines that do not come up stop the run."""
    cfg = TrainConfig(budget=1, progress=False)
    policy = make_policy(cfg)
    marker = Path(SLOW_START_MARKER)
    marker.unlink(missing_ok=True)
    generator = RayGenerator(policy, cfg, engines=1, engine_class=SlowStartEngine)
    try:
        prompts = [policy.tokenizer("heat it", add_special_tokens=False)["input_ids"]]
        ask = {"n": 2, "max_new_tokens": 8, "temperature": 1.0, "seed": 5}
        first = sampled(generator.generate(prompts, **ask))
        generator.startup_timeout_s = 20.0  # an engine is up in a few seconds here
        marker.touch()  # the next engine hangs in its build (the one after it does not)
        os.kill(generator.info[0]["pid"], signal.SIGKILL)
        assert sampled(generator.generate(prompts, **ask)) == first
        reasons = [reason for _, reason in generator.replacements]
        assert reasons[0].startswith("the generation engine process died")
        assert reasons[1:] == ["the new generation engine was not up within 20 s"]
    finally:
        generator.close()
        marker.unlink(missing_ok=True)

    marker.touch()
    try:
        with pytest.raises(RuntimeError, match="were not up within 2 s"):
            RayGenerator(
                policy, cfg, engines=1, engine_class=SlowStartEngine, startup_timeout_s=2.0
            )
    finally:
        marker.unlink(missing_ok=True)
