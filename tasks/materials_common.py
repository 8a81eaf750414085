"""What the EMT labs whose answer is the result share: LatticeConstant-v1,
VacancyFormation-v1 and SurfaceEnergy-v1.

In each, an experiment measures a protocol on a deterministic EMT model (a repeat reads
the same, so nothing is confirmed), experiments score 0 and the submitted answer scores
in [0, 1] against the lab's converged reference, a success from exp(-1/2) (inside the
tolerance). There is no impossible variant: an answer is a number or two, which a guess
can hit inside the tolerance by luck. :class:`AnswerLab` holds those rules, the Warp
device and a per-process cache of measured protocols.

**The campaign's material is hidden.** In v0 each campaign measured one of a few named EMT
crystals, so each answer came from a short, published table (docs/materials.md gives it):
an agent that had learnt the table scored 1 without an experiment. Since v1 a campaign
measures the named crystal's EMT model with every length multiplied by a hidden factor
``length_scale`` and every energy by ``energy_scale`` (:data:`LENGTH_SCALE_RANGE`,
:data:`ENERGY_SCALE_RANGE`, drawn per campaign). That is exact by corresponding states:
the scaled model's energy of a configuration x is ``energy_scale * E(x / length_scale)``,
so the lab runs the named crystal's model at lengths divided by ``length_scale`` (knobs in
Å, force tolerances in eV/Å: :meth:`AnswerLab.unscaled_length`,
:meth:`AnswerLab.unscaled_force`) and reports energies, forces, pressures, lengths and
surface energies scaled back; the references scale the same way. A protocol's steps,
atoms and cost do not change. ``nominal_conditions`` and ``conditions_of(name)`` keep both
factors at 1: the named crystal itself, for scientists who want EMT's own numbers.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar

import numpy as np

from labtwin import Measurement, Task
from labtwin.structures import structure_artifacts

#: an answer inside its tolerance (ellipse) scores at least this
SUCCESS_SCORE = math.exp(-0.5)
ATOMIC_NUMBERS = {"Al": 13, "Ni": 28, "Cu": 29, "Pd": 46, "Ag": 47, "Pt": 78, "Au": 79}
#: protocols kept in the per-process cache of measurements
CACHE_SIZE = 1024
#: a campaign's hidden length factor (lattice constants, gaps, positions), uniform; every
#: EMT crystal's a0 times these stays inside LatticeConstant's knob range
LENGTH_SCALE_RANGE = (0.96, 1.04)
#: a campaign's hidden energy factor, uniform (as the LJ equation-of-state lab's well depth)
ENERGY_SCALE_RANGE = (0.8, 1.2)


def draw_scales(rng: np.random.Generator) -> dict[str, float]:
    """A campaign's hidden ``length_scale`` and ``energy_scale`` (4 decimals, so that the
    conditions read plainly)."""
    return {
        "length_scale": round(float(rng.uniform(*LENGTH_SCALE_RANGE)), 4),
        "energy_scale": round(float(rng.uniform(*ENERGY_SCALE_RANGE)), 4),
    }


def scales_of(conditions: dict[str, Any]) -> tuple[float, float]:
    """(length_scale, energy_scale) of a campaign (1 and 1 where the conditions name none)."""
    return float(conditions.get("length_scale", 1.0)), float(conditions.get("energy_scale", 1.0))


#: what the brief says of the hidden material, for the three labs
HIDDEN_MATERIAL = (
    "The campaign's material is a variant of the named one: its EMT model with every length "
    f"multiplied by a hidden factor in {LENGTH_SCALE_RANGE[0]:g}-{LENGTH_SCALE_RANGE[1]:g} and "
    f"every energy by a hidden factor in {ENERGY_SCALE_RANGE[0]:g}-{ENERGY_SCALE_RANGE[1]:g} "
    "(the same factors for the whole campaign), so published EMT values are only a starting "
    "point: the answer is what you measure."
)


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

    @staticmethod
    def unscaled_length(length_A: float, conditions: dict[str, Any]) -> float:
        """A length of the campaign's material (Å) as a length of the named crystal."""
        return float(length_A) / scales_of(conditions)[0]

    @staticmethod
    def unscaled_force(force_eV_A: float, conditions: dict[str, Any]) -> float:
        """A force of the campaign's material (eV/Å) as a force of the named crystal: forces
        scale as energy / length."""
        length, energy = scales_of(conditions)
        return float(force_eV_A) * length / energy

    @staticmethod
    def structure_artifacts_of(
        species: Sequence[str], positions: Any, cell: Any, conditions: dict[str, Any]
    ) -> dict[str, Any]:
        """The structure artifacts of a cell of the named crystal (``species``, positions and
        cell in Å), drawn at the lengths of the campaign's material."""
        length = scales_of(conditions)[0]
        return structure_artifacts(
            [ATOMIC_NUMBERS[s] for s in species],
            np.asarray(positions, dtype=float) * length,
            np.asarray(cell, dtype=float) * length,
        )
