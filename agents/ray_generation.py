"""Generation on Ray: the trainer's generation engines as actors, synced after each update.

:class:`RayGenerator` stands where the trainer's generation engine stands
(:func:`labtwin.agents.train.make_generator`): it has the policy's ``tokenizer``,
``stop_token_ids`` and ``encode_chats`` (prompts are tokenised on the driver) and a
``generate`` that runs on ``engines`` :class:`GenerationEngine` actors, each built by
the trainer's own :func:`make_generator` in its process (the ``hf`` backend: a copy of
the policy constrained by the tool-call grammar; ``vllm``: a vLLM engine, on the
actor's GPU where the cluster has one per engine). ``load_weights(model)`` puts the
trained weights in Ray's object store once and loads them into every engine (the
``sync_generator`` step after an update); the trainer stays on the driver.

With one engine a seeded ``generate`` samples exactly what the local engine samples
(same code, weights, seed and batch), so a run with Ray generation has the local
run's rollouts and metrics. With several, a call's prompts are split into
contiguous blocks, one per engine, each sampled with the call's seed: sampling
then differs from the single-engine run (greedy decoding does not depend on it,
up to the padding of smaller batches).
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch

from labtwin.agents.train_config import TrainConfig


class GenerationEngine:
    """A Ray actor holding one generation engine (the trainer's ``make_generator``)."""

    def __init__(self, parts: dict[str, Any], cfg: dict[str, Any]) -> None:
        import labtwin
        from labtwin.agents.policy import HFPolicy
        from labtwin.agents.train import SeedStreams, make_generator

        config = replace(TrainConfig(**cfg), ray=None)
        torch.set_num_threads(config.threads)
        task = labtwin.load_task(config.task, budget=config.budget)
        policy = HFPolicy(parts["model"], parts["tokenizer"], share_prompt=parts["share_prompt"])
        self.policy = policy
        self.run_dir = Path(tempfile.mkdtemp(prefix="labtwin-engine-"))  # vLLM's weights
        self.engine, self.kwargs = make_generator(
            policy, task, config, self.run_dir, SeedStreams(config.seed)
        )

    def ready(self) -> dict[str, Any]:
        import os

        return {"pid": os.getpid(), "gpus": [str(g) for g in ray.get_gpu_ids()]}

    def generate(self, prompt_ids: list[list[int]], **kwargs: Any) -> list[Any]:
        """The engine's ``generate``; its own keyword arguments (the grammar) unless given."""
        given = {k: v for k, v in kwargs.items() if v is not None}
        return self.engine.generate(prompt_ids, **{**self.kwargs, **given})

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """The trainer's weights into the policy copy, then into the engine."""
        from labtwin.agents.train import sync_generator

        self.policy.model.load_state_dict(state)
        sync_generator(self.engine, self.policy)


class RayGenerator:
    """The trainer's generation engine on ``engines`` Ray actors (see the module docstring).

    ``policy`` is the trainer's :class:`~labtwin.agents.policy.HFPolicy`, copied to each
    engine through the object store; ``num_gpus`` per engine (None: one each where the
    cluster has a GPU per engine). Ray must be initialised.
    """

    def __init__(
        self, policy: Any, cfg: TrainConfig, engines: int = 1, num_gpus: float | None = None
    ) -> None:
        if engines < 1:
            raise ValueError(f"engines must be at least 1, got {engines}")
        self.policy = policy
        if num_gpus is None:
            num_gpus = 1.0 if ray.cluster_resources().get("GPU", 0.0) >= engines else 0.0
        actor = ray.remote(GenerationEngine).options(num_cpus=1, num_gpus=num_gpus)
        # the policy's parts, not the policy: it keeps caches (weak references) that do not pickle
        shipped = ray.put(
            {
                "model": policy.model,
                "tokenizer": policy.tokenizer,
                "share_prompt": getattr(policy, "share_prompt", True),
            }
        )
        self.engines = [actor.remote(shipped, asdict(cfg)) for _ in range(engines)]
        self.info = ray.get([e.ready.remote() for e in self.engines])

    @property
    def tokenizer(self) -> Any:
        return self.policy.tokenizer

    @property
    def stop_token_ids(self) -> list[int]:
        return self.policy.stop_token_ids

    def encode_chats(self, *args: Any, **kwargs: Any) -> Any:
        return self.policy.encode_chats(*args, **kwargs)

    def generate(self, prompt_ids: list[list[int]], n: int = 1, **kwargs: Any) -> list[Any]:
        """Completions in the local engine's order: blocks of prompts, one per engine."""
        prompts = [list(p) for p in prompt_ids]
        blocks = [b for b in np.array_split(np.arange(len(prompts)), len(self.engines)) if len(b)]
        calls = [
            engine.generate.remote([prompts[i] for i in block], n=n, **kwargs)
            for engine, block in zip(self.engines, blocks)
        ]
        return [c for part in ray.get(calls) for c in part]

    def load_weights(self, model: torch.nn.Module) -> None:
        """Every engine samples from ``model``'s weights from now on (one upload)."""
        state = ray.put({k: v.detach().cpu() for k, v in model.state_dict().items()})
        ray.get([engine.load_weights.remote(state) for engine in self.engines])

    def close(self) -> None:
        for engine in self.engines:
            ray.kill(engine, no_restart=True)
        self.engines = []
