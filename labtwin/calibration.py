"""Calibration: does a lab's error bar promise what its measurements deliver?

An error bar is a promise about the spread of a measurement over repeats. For a fixed
experiment measured with many seeds, :func:`calibrate` compares

- the empirical standard deviation of the values with the mean reported uncertainty
  (their ratio must lie in :data:`RATIO_BAND`), and
- the mean of the values with the lab's independent reference (analytic kinetics, a
  second engine, a published equation of state): the deviation must stay within
  :data:`MEAN_SEMS` standard errors of the mean plus the reference's own stated error.

A lab declares where it is checked with :meth:`~labtwin.task.Task.calibration_points`
(three or more points spread over the range it offers) and what each point should read
with :meth:`~labtwin.task.Task.calibration_reference`. An observable that is reported with
an uncertainty but is not a repeat measurement of one quantity (the energy of whichever
minimum a stochastic search found) is listed with its reason in
:attr:`~labtwin.task.Task.calibration_exempt`.

Tolerances: with 64 seeds the ratio of a sample standard deviation to its expectation has
a relative standard error of about 1 / sqrt(2 * 63) = 9 %, so [0.8, 1.25] is roughly
+-2.5 of those about 1; four standard errors of the mean leave a false alarm about once
in 16,000 points.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from labtwin.task import Task

RATIO_BAND = (0.8, 1.25)
MEAN_SEMS = 4.0
DEFAULT_SEEDS = 64


@dataclass(frozen=True)
class CalibrationPoint:
    """A fixed experiment (and campaign conditions) at which a lab is calibrated.

    ``observables`` limits the check to those names (default: every observable the
    measurement reports with a positive uncertainty, less the lab's exempt ones).
    """

    label: str
    experiment: dict[str, Any]
    conditions: dict[str, Any] | None = None
    observables: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Reference:
    """What an observable should read on average: a value, its own standard error, and
    where it comes from (``"analytic"``, ``"OpenMM run"``, ``"JZG EOS"``)."""

    value: float
    error: float = 0.0
    source: str = ""


@dataclass
class ObservableCalibration:
    """One observable at one calibration point: spread against error bars, mean against
    the reference."""

    lab: str
    point: str
    observable: str
    n_seeds: int
    n_ok: int
    mean: float
    spread: float
    mean_uncertainty: float
    reference: float | None = None
    reference_error: float = 0.0
    reference_source: str = ""

    @property
    def ratio(self) -> float:
        """Empirical spread over the mean reported uncertainty (1 is a calibrated bar)."""
        if self.mean_uncertainty <= 0:
            return math.inf if self.spread > 0 else 1.0
        return self.spread / self.mean_uncertainty

    @property
    def sem(self) -> float:
        """Standard error of ``mean``."""
        return self.spread / math.sqrt(max(self.n_ok, 1))

    @property
    def deviation(self) -> float | None:
        """``mean - reference`` (None without a reference)."""
        return None if self.reference is None else self.mean - self.reference

    @property
    def allowed_deviation(self) -> float:
        return MEAN_SEMS * self.sem + self.reference_error

    @property
    def ratio_ok(self) -> bool:
        return RATIO_BAND[0] <= self.ratio <= RATIO_BAND[1]

    @property
    def mean_ok(self) -> bool:
        return self.reference is None or abs(self.deviation) <= self.allowed_deviation

    @property
    def ok(self) -> bool:
        return self.n_ok == self.n_seeds and self.ratio_ok and self.mean_ok

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(ratio=self.ratio, sem=self.sem, deviation=self.deviation, ok=self.ok)
        return out

    def problems(self) -> list[str]:
        where = f"{self.lab} {self.point} {self.observable}"
        out = []
        if self.n_ok != self.n_seeds:
            out.append(f"{where}: {self.n_seeds - self.n_ok} of {self.n_seeds} runs not ok")
        if not self.ratio_ok:
            out.append(
                f"{where}: spread {self.spread:.4g} / mean error bar {self.mean_uncertainty:.4g}"
                f" = {self.ratio:.3f}, outside {RATIO_BAND}"
            )
        if not self.mean_ok:
            out.append(
                f"{where}: mean {self.mean:.5g} vs reference {self.reference:.5g} "
                f"({self.reference_source}): off by {self.deviation:+.3g}, allowed "
                f"{self.allowed_deviation:.3g} ({MEAN_SEMS:g} SEM + reference error)"
            )
        return out


def calibration_seeds(seed: int, n: int) -> list[int]:
    """The ``n`` measurement seeds of a calibration (independent children of ``seed``)."""
    from labtwin.campaign import derive_seeds

    return derive_seeds(seed, n, 0xCA1)


def calibrate(
    task: Task,
    point: CalibrationPoint,
    n_seeds: int = DEFAULT_SEEDS,
    seed: int = 0,
    batch_size: int | None = None,
    reference: bool = True,
) -> list[ObservableCalibration]:
    """Measure ``point.experiment`` with ``n_seeds`` seeds and compare with the reference.

    Experiments run through :meth:`Task.run` (validation, isolation, failures as
    measurements) in batches of ``batch_size`` (default: all at once); a lab's result does
    not depend on the batch. With ``reference=False`` the reference is not computed (it
    may be an expensive second-engine run).
    """
    conditions = point.conditions if point.conditions is not None else task.nominal_conditions()
    seeds = calibration_seeds(seed, n_seeds)
    size = batch_size or n_seeds
    measurements = []
    for start in range(0, n_seeds, size):
        chunk = seeds[start : start + size]
        measurements += task.run(
            [dict(point.experiment)] * len(chunk), [conditions] * len(chunk), chunk
        )
    ok = [m for m in measurements if m.ok]
    names = point.observables
    if names is None:
        names = tuple(
            name
            for name, value in (ok[0].observables.items() if ok else ())
            if value.uncertainty > 0 and name not in task.calibration_exempt
        )
    references = task.calibration_reference(point) if reference else {}
    out = []
    for name in names:
        values = np.array([m.observables[name].value for m in ok])
        sigmas = np.array([m.observables[name].uncertainty for m in ok])
        ref = references.get(name)
        out.append(
            ObservableCalibration(
                lab=task.id,
                point=point.label,
                observable=name,
                n_seeds=n_seeds,
                n_ok=len(ok),
                mean=float(values.mean()) if len(values) else math.nan,
                spread=float(values.std(ddof=1)) if len(values) > 1 else math.nan,
                mean_uncertainty=float(sigmas.mean()) if len(sigmas) else math.nan,
                reference=None if ref is None else float(ref.value),
                reference_error=0.0 if ref is None else float(ref.error),
                reference_source="" if ref is None else ref.source,
            )
        )
    return out


def calibrate_lab(
    task: Task, n_seeds: int | None = None, seed: int = 0, progress: bool = False
) -> list[ObservableCalibration]:
    """:func:`calibrate` at every point the lab declares, with ``n_seeds`` seeds each
    (default: the lab's ``calibration_n_seeds``)."""
    n_seeds = n_seeds or task.calibration_n_seeds
    points = task.calibration_points()
    out: list[ObservableCalibration] = []
    if progress:
        from rich.progress import track

        points = track(points, description=f"calibrating {task.id}")
    for point in points:
        out += calibrate(task, point, n_seeds=n_seeds, seed=seed)
    return out


def markdown_table(results: list[ObservableCalibration]) -> str:
    """A Markdown table of calibration results (one row per lab, point and observable)."""
    rows = [
        "| lab | point | observable | seeds | mean | spread / error bar | reference | "
        "deviation (SEM) | ok |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        if r.reference is None:
            ref, dev = "none", "-"
        else:
            ref = f"{r.reference:.5g} ± {r.reference_error:.2g} ({r.reference_source})"
            dev = f"{r.deviation:+.3g} ({r.deviation / r.sem if r.sem else math.inf:+.1f})"
        rows.append(
            f"| {r.lab} | {r.point} | {r.observable} | {r.n_ok}/{r.n_seeds} | {r.mean:.5g} | "
            f"{r.spread:.3g} / {r.mean_uncertainty:.3g} = **{r.ratio:.2f}** | {ref} | {dev} | "
            f"{'yes' if r.ok else 'NO'} |"
        )
    return "\n".join(rows)
