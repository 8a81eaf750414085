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

An engine that dies (a native crash in vLLM or torch, the out-of-memory killer, a lost
node: Ray's ``ActorDiedError``) is replaced by a new actor built the same way, loaded
with the latest synced weights, and the call it was running goes to the new engine:
sampling is a function of the weights, the prompts and the call's seed, so the retried
block of a seeded call (the trainer seeds every call) gives what the dead engine would
have given, and the run goes on. Up to ``max_replacements`` replacements per engine
and call; ``replacements`` lists each (engine index, reason). An exception raised inside
an engine (bad arguments) is not a death: it is re-raised on the driver, as in one
process. With ``timeout_s``, an engine that has not answered a call within it (hung: a
deadlock, a stopped process) is killed and replaced the same way. With
``startup_timeout_s``, an engine that is not up (built, and loaded with the synced
weights) within it is killed too: at the start the run stops with the reason, and a
replacement that does not come up counts as one more replacement of that engine (a vLLM
engine takes minutes to start, so neither deadline is set by default).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import ray
import torch
from ray.exceptions import GetTimeoutError, RayActorError

from labtwin.agents.train_config import TrainConfig
from labtwin.distributed import actor_death


class _NotUp(Exception):
    """A new engine was not up within the generator's ``startup_timeout_s``."""


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
    cluster has a GPU per engine); ``max_replacements``: how many times one call may
    replace a dead engine before the run stops with the reason; ``timeout_s``: seconds an
    engine may take to answer a call before it is taken for hung and replaced (None: no
    deadline); ``startup_timeout_s``: seconds a new engine may take to be up (None: no
    deadline); ``engine_class``: the actor class (:class:`GenerationEngine`; a test may
    pass one that misbehaves). Ray must be initialised.
    """

    def __init__(
        self,
        policy: Any,
        cfg: TrainConfig,
        engines: int = 1,
        num_gpus: float | None = None,
        max_replacements: int = 2,
        timeout_s: float | None = None,
        startup_timeout_s: float | None = None,
        engine_class: type = GenerationEngine,
    ) -> None:
        if engines < 1:
            raise ValueError(f"engines must be at least 1, got {engines}")
        self.policy = policy
        self.max_replacements = max_replacements
        self.timeout_s = timeout_s
        self.startup_timeout_s = startup_timeout_s
        #: (engine index, reason) of each replacement, in order
        self.replacements: list[tuple[int, str]] = []
        if num_gpus is None:
            num_gpus = 1.0 if ray.cluster_resources().get("GPU", 0.0) >= engines else 0.0
        self._actor = ray.remote(engine_class).options(
            num_cpus=1, num_gpus=num_gpus, max_restarts=0
        )
        # the policy's parts, not the policy: it keeps caches (weak references) that do not pickle
        self._parts = ray.put(
            {
                "model": policy.model,
                "tokenizer": policy.tokenizer,
                "share_prompt": getattr(policy, "share_prompt", True),
            }
        )
        self._cfg = asdict(cfg)
        self._weights: Any = None  # the last synced weights in the object store (None: as built)
        self.engines = [self._actor.remote(self._parts, self._cfg) for _ in range(engines)]
        try:
            self.info = ray.get(
                [e.ready.remote() for e in self.engines], timeout=self.startup_timeout_s
            )
        except GetTimeoutError:
            self.close()
            raise RuntimeError(
                f"the generation engines were not up within {self.startup_timeout_s:g} s"
            ) from None

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
        parts = self._on_engines(
            [
                lambda engine, block=block: engine.generate.remote(
                    [prompts[i] for i in block], n=n, **kwargs
                )
                for block in blocks
            ]
        )
        return [c for part in parts for c in part]

    def load_weights(self, model: torch.nn.Module) -> None:
        """Every engine samples from ``model``'s weights from now on (one upload)."""
        self._weights = ray.put({k: v.detach().cpu() for k, v in model.state_dict().items()})
        self._on_engines(
            [lambda engine: engine.load_weights.remote(self._weights)] * len(self.engines)
        )

    def _on_engines(self, calls: list[Callable[[Any], Any]]) -> list[Any]:
        """``calls[k](engine k)`` for each k, all submitted at once, their results in order;
        an engine that died, or did not answer within ``timeout_s``, is replaced by a new one
        loaded with the last synced weights, and its call made again there, up to
        ``max_replacements`` times."""
        pending = [call(engine) for call, engine in zip(calls, self.engines)]
        submitted = time.monotonic()
        results = []
        for k, (call, ref) in enumerate(zip(calls, pending)):
            tries, sent = 0, submitted  # each call's own clock, restarted on its new engine
            while True:
                try:
                    if ref is None:
                        ref, sent = call(self._new_engine(k)), time.monotonic()
                    results.append(ray.get(ref, timeout=self._time_left(sent, self.timeout_s)))
                    break
                except (RayActorError, GetTimeoutError, _NotUp) as err:
                    if isinstance(err, _NotUp):
                        reason = str(err)
                    elif isinstance(err, GetTimeoutError):
                        reason = f"the generation engine did not answer within {self.timeout_s:g} s"
                    else:
                        reason = actor_death(err, "generation engine")
                    if tries == self.max_replacements:
                        raise RuntimeError(
                            f"generation engine {k} failed, with its {tries} replacement(s) "
                            f"for this call used up: {reason}"
                        ) from err
                    tries += 1
                    ray.kill(self.engines[k], no_restart=True)  # a hung one ends here
                    self.replacements.append((k, reason))
                    ref = None
        return results

    @staticmethod
    def _time_left(since: float, limit_s: float | None) -> float | None:
        """Seconds left of ``limit_s`` counted from ``since`` (None: no deadline)."""
        if limit_s is None:
            return None
        return max(0.0, since + limit_s - time.monotonic())

    def _new_engine(self, k: int) -> Any:
        """A new engine in place of engine ``k``, built as the others were and loaded with
        the last synced weights, within ``startup_timeout_s`` (else :class:`_NotUp`)."""
        engine = self.engines[k] = self._actor.remote(self._parts, self._cfg)
        started = time.monotonic()
        try:
            self.info[k] = ray.get(
                engine.ready.remote(), timeout=self._time_left(started, self.startup_timeout_s)
            )
            if self._weights is not None:
                ray.get(
                    engine.load_weights.remote(self._weights),
                    timeout=self._time_left(started, self.startup_timeout_s),
                )
        except GetTimeoutError:
            raise _NotUp(
                f"the new generation engine was not up within {self.startup_timeout_s:g} s"
            ) from None
        return engine

    def close(self) -> None:
        for engine in self.engines:
            ray.kill(engine, no_restart=True)
        self.engines = []
