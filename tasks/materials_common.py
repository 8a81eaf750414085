"""What the EMT labs whose answer is the result share: LatticeConstant-v0,
VacancyFormation-v0 and SurfaceEnergy-v0.

In each, an experiment measures a protocol on a deterministic EMT model (a repeat reads
the same, so nothing is confirmed), experiments score 0 and the submitted answer scores
in [0, 1] against the lab's converged reference, a success from exp(-1/2) (inside the
tolerance). There is no impossible variant: an answer is a number or two, which a guess
can hit inside the tolerance by luck. :class:`AnswerLab` holds those rules, the Warp
device and a per-process cache of measured protocols.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

from labtwin import Measurement, Task

#: an answer inside its tolerance (ellipse) scores at least this
SUCCESS_SCORE = math.exp(-0.5)
ATOMIC_NUMBERS = {"Al": 13, "Ni": 28, "Cu": 29, "Pd": 46, "Ag": 47, "Pt": 78, "Au": 79}
#: protocols kept in the per-process cache of measurements
CACHE_SIZE = 1024


class AnswerLab(Task):
    """A lab whose answer is the result (see the module docstring); ``device`` is the Warp
    device (default: cuda when present). Not registered: its subclasses are the labs."""

    default_budget = 8
    score_range: ClassVar[tuple[float, float]] = (0.0, 1.0)
    success_threshold = SUCCESS_SCORE
    #: a repeat measures the same protocol and reads the same: nothing to confirm
    confirm_best = False

    def __init__(
        self, budget: int | None = None, impossible: bool = False, device: str | None = None
    ) -> None:
        if impossible:
            raise ValueError(f"{self.id} has no impossible variant: {self.no_impossible_variant}")
        super().__init__(budget)
        self.device = device
        self._cache: OrderedDict[Hashable, Any] = OrderedDict()

    def cached(self, protocols: Sequence[Hashable], measure: Callable[..., list]) -> list:
        """Every protocol's result: cached ones from the cache (least recently used out past
        :data:`CACHE_SIZE`), the others from one call ``measure(new protocols, device=...)``."""
        todo = list(dict.fromkeys(p for p in protocols if p not in self._cache))
        if todo:
            for p, result in zip(todo, measure(todo, device=self.device), strict=True):
                self._cache[p] = result
        out = []
        for p in protocols:
            self._cache.move_to_end(p)
            out.append(self._cache[p])
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return out

    def reward(self, measurement: Measurement, conditions: dict[str, Any]) -> float:
        return 0.0  # the answer is the result
