"""``labtwin.testing.check_lab`` passes on every registered lab and catches broken labs."""

from __future__ import annotations

import numpy as np
import pytest

import labtwin
import labtwin.calibration
from labtwin.registry import short_id
from labtwin.testing import check_lab

ALL_CHECKS = [
    "gymnasium",
    "seeding",
    "batching",
    "declared_observables",
    "bad_proposals",
    "hostile_inputs",
    "chat",
    "run_store",
    "cost_budget",
    "calibration",
]


#: lighter settings for labs whose experiments take seconds: the checks are about the
#: contract, not the physics. LJEquationOfState-v2 equilibrates 100 steps instead of 800;
#: WaterDensity-v2 runs 2 replicas of 0.1 ps equilibration from a stock grown 0.5 ps per
#: state (instead of 4 of 2 ps from 3 ps)
LIGHT_SETTINGS = {
    "LJEquationOfState-v2": {"equilibration_steps": 100},
    "WaterDensity-v2": {"n_replicas": 2, "equilibration_ps": 0.1, "stock_ps": (0.5, 0.25)},
}
#: checked in the slow suite: still about 5 minutes on 2 cores (every check spreads
#: experiments over the knob box, and the hostile-input check measures about 60)
SLOW_CHECKS = {"WaterDensity-v2"}


@pytest.mark.parametrize(
    "task_id",
    [
        pytest.param(t, marks=pytest.mark.slow) if short_id(t) in SLOW_CHECKS else t
        for t in labtwin.list_tasks()
    ],
)
def test_every_registered_lab_passes(task_id: str) -> None:
    settings = LIGHT_SETTINGS.get(short_id(task_id), {})
    assert check_lab(task_id, budget=3, **settings) == ALL_CHECKS


Reactor = type(labtwin.load_task("BatchReactor-v1"))


class UndeclaredObservable(Reactor):
    """Returns an observable it never declared."""

    id = "UndeclaredObservable-v0"

    def simulate(self, experiments, conditions, rngs):
        out = super().simulate(experiments, conditions, rngs)
        for m in out:
            m.observables["secret"] = labtwin.Value(1.0, "")
        return out


class BatchDependent(Reactor):
    """Its noise depends on the batch it is measured in."""

    id = "BatchDependent-v0"

    def simulate(self, experiments, conditions, rngs):
        shared = np.random.default_rng(len(experiments))
        return super().simulate(experiments, conditions, [shared] * len(experiments))


class RaisesOnStrings(Reactor):
    """Lets a bad proposal escape as an exception."""

    id = "RaisesOnStrings-v0"

    def parse(self, proposal):
        if isinstance(proposal, str) and proposal.startswith("["):
            raise ValueError("boom")
        return super().parse(proposal)


class Uncalibrated(Reactor):
    """Reports error bars but says nowhere where they were checked."""

    id = "Uncalibrated-v0"

    def calibration_points(self):
        return []


class HalfCalibrated(Reactor):
    """Checks some of its error bars and not the others."""

    id = "HalfCalibrated-v0"

    def calibration_points(self):
        return [
            labtwin.calibration.CalibrationPoint(p.label, p.experiment, p.conditions, ("yield_B",))
            for p in super().calibration_points()
        ]


@pytest.mark.parametrize(
    "lab, message",
    [
        (UndeclaredObservable, "undeclared \\['secret'\\]"),
        (BatchDependent, "vector != single|differs between vector and single"),
        (RaisesOnStrings, "boom"),
        (Uncalibrated, "declares 0 calibration points"),
        (HalfCalibrated, "no calibration point checks"),
    ],
)
def test_broken_labs_fail(lab, message: str) -> None:
    with pytest.raises((AssertionError, RuntimeError, ValueError), match=message):
        check_lab(lab(budget=3))
