"""Measurements: what a lab returns for one experiment.

A measurement is returned for every proposal, good or bad: ``ok`` carries
observables, ``invalid`` says why the proposal could not be run, ``failed``
says why a valid experiment did not produce a result (the simulation blew up).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Status = Literal["ok", "invalid", "failed"]


@dataclass(frozen=True)
class ObservableSpec:
    """What a lab measures: name, unit, meaning, and a typical magnitude.

    ``scale`` divides the value in the numeric observation, so that a network
    sees numbers of order one.
    """

    name: str
    unit: str
    description: str
    scale: float = 1.0


@dataclass(frozen=True, slots=True)
class Value:
    """One measured value with its unit and standard uncertainty (1 sigma)."""

    value: float
    unit: str
    uncertainty: float = 0.0

    def __str__(self) -> str:
        if self.uncertainty > 0:
            return f"{self.value:.4g} ± {self.uncertainty:.2g} {self.unit}".rstrip()
        return f"{self.value:.4g} {self.unit}".rstrip()


@dataclass(slots=True)
class Measurement:
    """The outcome of one experiment.

    Attributes:
        status: ``ok``, ``invalid`` (the proposal was rejected) or ``failed``
            (the experiment ran and produced no usable result).
        observables: name -> :class:`Value`, empty unless ``ok``.
        cost: what the experiment consumed, in ``cost_unit`` (simulated
            instrument time, compute); invalid proposals cost nothing.
        reason: a human-readable explanation for ``invalid`` and ``failed``.
        experiment: the validated experiment as a dict (``None`` if invalid).
        proposal: the raw proposal, kept for invalid ones so nothing is lost.
        provenance: simulator, device, seed, package versions.
        artifacts: name -> array (trajectories, time courses); the run store
            writes them to files.
        notes: caveats a reader of an ``ok`` measurement must know (a state where
            the lab's model may not hold); shown with the values. A sequence of
            strings: a lab passes a list; the default is an empty tuple, which (unlike
            an empty list) is no object for the garbage collector to track, and a
            vector env keeps thousands of measurements alive.
    """

    status: Status
    observables: dict[str, Value] = field(default_factory=dict)
    cost: float = 0.0
    cost_unit: str = ""
    reason: str = ""
    experiment: dict[str, Any] | None = None
    proposal: Any = None
    provenance: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, np.ndarray] = field(default_factory=dict)
    notes: Sequence[str] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def __getitem__(self, name: str) -> float:
        return self.observables[name].value

    @classmethod
    def invalid(cls, reason: str, proposal: Any = None, **provenance: Any) -> Measurement:
        from labtwin.experiment import cap_reason

        return cls(
            "invalid",
            reason=cap_reason(reason),
            proposal=to_jsonable(proposal),
            provenance=provenance,
        )

    @classmethod
    def failed(cls, reason: str, experiment: dict | None = None, **kw: Any) -> Measurement:
        return cls("failed", reason=reason, experiment=experiment, **kw)

    def to_dict(self, with_artifacts: bool = False) -> dict[str, Any]:
        """JSON-ready dict; artifacts are listed by shape unless ``with_artifacts``."""
        out: dict[str, Any] = {
            "status": self.status,
            "observables": {
                k: {"value": v.value, "unit": v.unit, "uncertainty": v.uncertainty}
                for k, v in self.observables.items()
            },
            "cost": self.cost,
            "cost_unit": self.cost_unit,
            "reason": self.reason,
            "experiment": self.experiment,
            "proposal": to_jsonable(self.proposal),
            "provenance": to_jsonable(self.provenance),
        }
        if self.notes:  # absent when empty, so records without notes read as before
            out["notes"] = list(self.notes)
        out["artifacts"] = {k: list(np.shape(v)) for k, v in self.artifacts.items()}
        if with_artifacts:
            out["artifact_data"] = {k: np.asarray(v).tolist() for k, v in self.artifacts.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(
            status=data["status"],
            observables={k: Value(**v) for k, v in data.get("observables", {}).items()},
            cost=data.get("cost", 0.0),
            cost_unit=data.get("cost_unit", ""),
            reason=data.get("reason", ""),
            experiment=data.get("experiment"),
            proposal=data.get("proposal"),
            provenance=data.get("provenance", {}),
            artifacts={k: np.asarray(v) for k, v in (data.get("artifact_data") or {}).items()},
            notes=[str(n) for n in data.get("notes") or []],
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Measurement):
            return NotImplemented
        return self.to_dict(with_artifacts=True) == other.to_dict(with_artifacts=True)

    def describe(self) -> str:
        """One line a person (or an LLM) can read."""
        if self.status != "ok":
            return f"{self.status}: {self.reason}"
        values = ", ".join(f"{k} = {v}" for k, v in self.observables.items())
        cost = f" (cost {self.cost:.3g} {self.cost_unit})" if self.cost else ""
        notes = "".join(f" Note: {n}" for n in self.notes)
        return values + cost + notes


_MAX_DEPTH = 64  # nesting kept in a recorded proposal; deeper parts become text


def pool(measurements: list[Measurement], log_normal: Collection[str] = ()) -> Measurement:
    """Repeated measurements of one experiment combined into one (the last one's other fields).

    Each observable becomes the inverse-variance weighted mean with standard
    error ``1 / sqrt(sum 1/sigma^2)``; where an uncertainty is zero, the plain
    mean with ``mean(sigma) / sqrt(n)``. Scoring a repeat from the pooled value
    is what keeps repeats from harvesting instrument noise.

    Observables named in ``log_normal`` scatter log-normally, their error bars a
    fixed fraction of the reading: weighting those by the reading's own error bar
    would favour the low readings (pooled ignition delays read 4 % short at a 15 %
    scatter). They are pooled in log space instead (:func:`pool_log_normal`) where
    every reading and error bar is positive, else as above.
    """
    last = measurements[-1]
    if len(measurements) == 1:
        return last
    observables = {}
    for name, value in last.observables.items():
        values = np.array([m.observables[name].value for m in measurements])
        sigmas = np.array([m.observables[name].uncertainty for m in measurements])
        if name in log_normal and np.all(values > 0) and np.all(sigmas > 0):
            mean, error = pool_log_normal(values, sigmas)
        elif np.all(sigmas > 0):
            weights = 1.0 / sigmas**2
            mean = float(np.sum(weights * values) / np.sum(weights))
            error = float(1.0 / math.sqrt(np.sum(weights)))
        else:
            mean, error = float(values.mean()), float(sigmas.mean() / math.sqrt(len(values)))
        observables[name] = Value(mean, value.unit, error)
    return Measurement(
        "ok",
        observables,
        cost=last.cost,
        cost_unit=last.cost_unit,
        experiment=last.experiment,
        provenance={**last.provenance, "pooled_repeats": len(measurements)},
        notes=list(last.notes),
    )


def pool_log_normal(values: np.ndarray, sigmas: np.ndarray) -> tuple[float, float]:
    """The mean and standard error of positive readings ``r_i = mu exp(s_i z_i - s_i^2 / 2)``
    (log-normal, mean ``mu``; ``z_i`` standard normal) reported with error bars
    ``sigma_i = r_i sqrt(exp(s_i^2) - 1)``: the convention of a single reading, kept.

    Each ``ln r_i + s_i^2 / 2`` estimates ``ln mu`` with variance ``s_i^2``; their
    inverse-variance mean ``m`` has variance ``S^2 = 1 / sum(1 / s_i^2)``, and
    ``exp(m - S^2 / 2)`` is an unbiased estimate of ``mu`` with standard deviation
    ``exp(m - S^2 / 2) sqrt(exp(S^2) - 1)`` (that of a single reading with ``s = S``).
    One reading pools to itself, its error bar unchanged."""
    s2 = np.log1p((sigmas / values) ** 2)
    weights = 1.0 / s2
    variance = 1.0 / float(np.sum(weights))
    m = float(np.sum(weights * (np.log(values) + s2 / 2.0))) * variance
    mean = math.exp(m - variance / 2.0)
    return mean, mean * math.sqrt(math.expm1(variance))


def to_jsonable(value: Any, _depth: int = 0) -> Any:
    """Best-effort conversion of a proposal or provenance value to JSON types.

    Never raises: integers too long for JSON's readers and nesting deeper than
    64 levels are kept as (truncated) text.
    """
    if _depth > _MAX_DEPTH:
        return "<nested deeper than 64 levels>"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**63 else f"<integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist(), _depth + 1) if value.ndim else to_jsonable(value.item())
    if isinstance(value, np.generic):
        return to_jsonable(value.item(), _depth)
    if isinstance(value, dict):
        return {str(k)[:200]: to_jsonable(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, _depth + 1) for v in value]
    if hasattr(value, "model_dump"):
        try:
            return to_jsonable(value.model_dump(), _depth + 1)
        except (ValueError, TypeError, RecursionError):
            return f"<{type(value).__name__}>"
    try:
        return repr(value)[:200]
    except (ValueError, RecursionError):
        return f"<{type(value).__name__}>"
