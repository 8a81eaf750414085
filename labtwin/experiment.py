"""Experiments: what an agent proposes.

A lab declares its experiment as a pydantic model. That one definition gives

- validation with readable messages (:func:`parse_experiment`),
- the JSON schema handed to an LLM as a tool (:func:`tool_schema`), and
- a Gymnasium ``Box`` action space for numeric agents, with the map from a
  vector in ``[-1, 1]^d`` back to an experiment (:class:`NumericView`).

Numeric knobs are declared with :func:`knob`, which records bounds, unit and
scale (linear or log) where both views can read them.
"""

from __future__ import annotations

import json
import math
import operator
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Literal, get_args, get_origin

import annotated_types
import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class Experiment(BaseModel):
    """Base class for a lab's experiment model.

    Unknown fields are rejected and NaN/inf are refused, so that a typo or a
    broken number from an agent becomes an ``invalid`` measurement.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


def knob(
    low: float,
    high: float,
    *,
    unit: str,
    description: str,
    log: bool = False,
    default: Any = ...,
) -> Any:
    """A bounded numeric experiment field.

    ``low``/``high`` are inclusive bounds in ``unit``; ``log=True`` makes the
    numeric view move on a log scale (rate constants, times spanning decades).
    """
    if not low < high:
        raise ValueError(f"knob bounds must satisfy low < high, got {low}, {high}")
    if log and low <= 0:
        raise ValueError("a log-scale knob needs low > 0")
    return Field(
        default,
        ge=low,
        le=high,
        description=f"{description} [{unit}], between {low:g} and {high:g}",
        json_schema_extra={"unit": unit, "scale": "log" if log else "linear"},
    )


@dataclass(frozen=True)
class Invalid:
    """Why a proposed experiment could not be run."""

    reason: str
    raw: Any = None


@dataclass(frozen=True)
class Answer:
    """A proposal that submits a campaign's final answer (labs with an ``answer_model``).

    ``value`` is the answer as a model instance, a dict or JSON text.
    """

    value: Any


@dataclass(frozen=True)
class Analysis:
    """A proposal that calls one of the lab's analysis tools (costs no experiment)."""

    name: str
    arguments: dict[str, Any]


#: characters of a text action (the experiment as JSON text): printable ASCII
TEXT_CHARSET = "".join(chr(c) for c in range(32, 127))
TEXT_MAX_LENGTH = 4096


def text_action_space() -> gym.spaces.Text:
    """Action space of a lab without a numeric view: the experiment as JSON text."""
    return gym.spaces.Text(max_length=TEXT_MAX_LENGTH, min_length=0, charset=TEXT_CHARSET)


MAX_REASON = 1000  # characters of an invalid proposal's reason
_SHOWN = 80  # characters of a rejected value shown in the reason


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # e.g. an int too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def cap_reason(reason: str) -> str:
    """A reason short enough to read (and to send back to an LLM)."""
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 3] + "..."


def _format_errors(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item["loc"]) or "experiment"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        elif item["type"] == "missing":
            message = "field required"
        value = item.get("input")
        shown = "" if item["type"] == "missing" else f" (got {_shown(value)})"
        parts.append(f"{where}: {message}{shown}")
    return cap_reason("; ".join(parts))


def parse_experiment(model: type[Experiment], proposal: Any) -> Experiment | Invalid:
    """Turn a proposal (model instance, dict or JSON text) into a validated experiment.

    Never raises for bad input: returns :class:`Invalid` with a readable reason.

    >>> from pydantic import BaseModel
    >>> class Heat(Experiment):
    ...     temperature_K: float = knob(250, 400, unit="K", description="bath temperature")
    >>> parse_experiment(Heat, '{"temperature_K": 300}')
    Heat(temperature_K=300.0)
    >>> parse_experiment(Heat, {"temperature_K": 900}).reason
    'temperature_K: Input should be less than or equal to 400 (got 900)'
    """
    raw = proposal
    if isinstance(proposal, bytes):
        try:
            proposal = proposal.decode("utf-8")
        except UnicodeDecodeError:
            return Invalid("an experiment must be UTF-8 JSON text", raw)
    if isinstance(proposal, str):
        try:
            proposal = json.loads(proposal)
        except json.JSONDecodeError as err:
            return Invalid(
                f"malformed JSON: {err.msg} at line {err.lineno} column {err.colno}", raw
            )
        except (ValueError, RecursionError) as err:  # 5,000-digit numbers, deep nesting
            return Invalid(f"unreadable JSON: {type(err).__name__}: {str(err)[:120]}", raw)
    if isinstance(proposal, BaseModel):
        # revalidate every instance: model_construct and model_copy(update=...) skip validation
        try:
            proposal = proposal.model_dump()
        except (ValueError, TypeError, RecursionError) as err:
            return Invalid(f"the experiment could not be read: {type(err).__name__}", raw)
    if not isinstance(proposal, dict):
        return Invalid(
            f"an experiment must be a JSON object with fields {sorted(model.model_fields)}, "
            f"got {type(proposal).__name__}",
            raw,
        )
    try:
        return model.model_validate(proposal)
    except ValidationError as err:
        return Invalid(_format_errors(err), raw)
    except (ValueError, TypeError, OverflowError, RecursionError) as err:
        return Invalid(f"the experiment could not be read: {type(err).__name__}", raw)


@cache
def list_adapter(model: type[BaseModel]) -> TypeAdapter:
    """``TypeAdapter(list[model])``: validates or dumps many experiments in one pydantic call,
    each exactly as ``model.model_validate`` / ``model_dump`` would (the same core schema)."""
    return TypeAdapter(list[model])


def validate_many(model: type[Experiment], dicts: list[dict[str, Any]]) -> list[Any]:
    """``parse_experiment(model, d)`` for each dict: one pydantic call for the valid ones,
    the one-at-a-time path for those that fail (so their reasons are the same)."""
    out: list[Any] = [None] * len(dicts)
    todo = list(range(len(dicts)))
    for _ in range(2):  # the valid ones pass in the second try at the latest
        try:
            validated = list_adapter(model).validate_python([dicts[i] for i in todo])
        except ValidationError as err:
            failed = {
                e["loc"][0] for e in err.errors() if e["loc"] and isinstance(e["loc"][0], int)
            }
            if not failed:
                break
            for j in sorted(failed):
                out[todo[j]] = parse_experiment(model, dicts[todo[j]])
            todo = [i for j, i in enumerate(todo) if j not in failed]
            continue
        except (ValueError, TypeError, OverflowError, RecursionError):
            break
        for i, e in zip(todo, validated):
            out[i] = e
        todo = []
        break
    for i in todo:  # whatever a batch call could not settle
        out[i] = parse_experiment(model, dicts[i])
    return out


def tool_schema(model: type[Experiment]) -> dict[str, Any]:
    """JSON schema of the experiment's arguments, ready for an OpenAI-style tool.

    Titles are dropped everywhere (nested models included: they only cost
    tokens), and every object forbids unknown fields.
    """
    schema = model.model_json_schema()
    _strip_titles(schema)
    schema["additionalProperties"] = False
    return schema


def _strip_titles(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("title", None)
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop in value.values():  # a field may be *named* "title": keep the name
                    _strip_titles(prop)
            else:
                _strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            _strip_titles(item)


@dataclass(frozen=True)
class _Axis:
    name: str
    kind: Literal["float", "int", "choice"]
    low: float = 0.0
    high: float = 1.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def from_unit(self, u: float) -> Any:
        """Map u in [-1, 1] to a field value."""
        s = (u + 1.0) / 2.0
        if self.kind == "choice":
            index = min(int(s * len(self.choices)), len(self.choices) - 1)
            return self.choices[index]
        if self.log:
            value = math.exp(math.log(self.low) + s * (math.log(self.high) - math.log(self.low)))
        else:
            value = self.low + s * (self.high - self.low)
        value = min(max(value, self.low), self.high)
        return int(round(value)) if self.kind == "int" else float(value)

    def from_units(self, u: np.ndarray) -> list[Any]:
        """:meth:`from_unit` of every element of ``u`` (float64 in [-1, 1]), the same values:
        numpy's ``+ - * /`` round as Python's do, and ``exp`` stays Python's."""
        s = (u + 1.0) / 2.0
        if self.kind == "choice":
            n = len(self.choices)
            return [self.choices[k] for k in np.minimum((s * n).astype(np.int64), n - 1).tolist()]
        if self.log:
            low_log = math.log(self.low)
            exponents = (low_log + s * (math.log(self.high) - low_log)).tolist()
            value = np.array([math.exp(x) for x in exponents], dtype=np.float64)
        else:
            value = self.low + s * (self.high - self.low)
        value = np.minimum(np.maximum(value, self.low), self.high)
        if self.kind == "int":
            return [int(round(v)) for v in value.tolist()]
        return value.tolist()

    @cached_property
    def choice_units(self) -> dict[tuple[type, Any], float]:
        """``(type(c), c) -> to_unit(c)`` for each choice ``c`` (the first of equal ones)."""
        n = len(self.choices)
        return {(type(c), c): 2.0 * (self.choices.index(c) + 0.5) / n - 1.0 for c in self.choices}

    def to_units(self, values: list[Any]) -> np.ndarray:
        """:meth:`to_unit` of many values, as float64."""
        if self.kind == "choice":
            n = len(self.choices)
            return np.array([2.0 * (self.choices.index(v) + 0.5) / n - 1.0 for v in values])
        if self.log:
            low_log = math.log(self.low)
            logs = np.array(list(map(math.log, values)), dtype=np.float64)
            s = (logs - low_log) / (math.log(self.high) - low_log)
        else:
            s = (np.array(values, dtype=np.float64) - self.low) / (self.high - self.low)
        return 2.0 * s - 1.0

    def to_unit(self, value: Any) -> float:
        """Map a field value to [-1, 1] (centre of the bin for choices)."""
        if self.kind == "choice":
            index = self.choices.index(value)
            return 2.0 * (index + 0.5) / len(self.choices) - 1.0
        if self.log:
            s = (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        else:
            s = (value - self.low) / (self.high - self.low)
        return 2.0 * s - 1.0


def field_bounds(field: Any) -> tuple[float, float] | None:
    """Inclusive ``(low, high)`` of a pydantic field from its ge/gt/le/lt constraints, or None."""
    low = high = None
    for meta in field.metadata:
        if getattr(meta, "ge", None) is not None:
            low = float(meta.ge)
        if getattr(meta, "gt", None) is not None:
            low = float(meta.gt)
        if getattr(meta, "le", None) is not None:
            high = float(meta.le)
        if getattr(meta, "lt", None) is not None:
            high = float(meta.lt)
    if low is None or high is None:
        return None
    return low, high


def _plain_axes(model: type[Experiment], names: list[str]) -> bool:
    """Whether validating a model's JSON dump returns the dumped values of these fields
    unchanged: no validators anywhere on the model, no aliases, only bounds as constraints."""
    decorators = model.__pydantic_decorators__
    if (
        decorators.validators
        or decorators.field_validators
        or decorators.root_validators
        or decorators.model_validators
    ):
        return False
    bounds = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)
    for name in names:
        field = model.model_fields[name]
        if field.alias or field.validation_alias:
            return False
        if not all(isinstance(meta, bounds) for meta in field.metadata):
            return False
    return True


_JSON_ATOMS = (str, int, float, bool)


def _inputs_are_dumps(model: type[Experiment], fixed: dict[str, Any], axes: list[_Axis]) -> bool:
    """Whether ``model_dump(mode="json")`` of a model validated from a dict of the view's
    values (in the model's field order) gives that dict back: the same keys in the same
    order, the same values of the same types. Needs a model with plain axes
    (:func:`_plain_axes`), no serializers, computed fields or dump of its own, every field
    an axis or fixed, fixed values of JSON's atomic types; then checked on probes: each
    axis at its low end, middle and high end, every choice."""
    decorators = model.__pydantic_decorators__
    if (
        decorators.field_serializers
        or decorators.model_serializers
        or decorators.computed_fields
        or model.model_dump is not BaseModel.model_dump
    ):
        return False
    names = [axis.name for axis in axes]
    if set(model.model_fields) != set(names) | set(fixed) or set(names) & set(fixed):
        return False
    for value in fixed.values():
        if type(value) not in _JSON_ATOMS or (type(value) is float and not math.isfinite(value)):
            return False
    width = max([3] + [len(axis.choices) for axis in axes if axis.kind == "choice"])
    probe = np.linspace(-1.0, 1.0, width)
    column_of = {axis.name: axis.from_units(probe) for axis in axes}
    try:
        for k in range(width):
            d = {
                name: column_of[name][k] if name in column_of else fixed[name]
                for name in model.model_fields
            }
            dumped = model.model_validate(d).model_dump(mode="json")
            if list(dumped) != list(d) or any(
                type(dumped[key]) is not type(value) or dumped[key] != value
                for key, value in d.items()
            ):
                return False
    except (ValidationError, ValueError, TypeError):
        return False
    return True


class NoNumericReading(TypeError):
    """The experiment model has a field that no number can stand for."""


class NumericView:
    """The experiment model seen as a ``Box(-1, 1, (d,))`` action space.

    Bounded float and int fields and ``Literal`` choices become one axis each.
    A model with any other field (a SMILES string, a list of protocol steps)
    has no automatic numeric reading: constructing the view raises
    :class:`NoNumericReading`, and the lab is a text lab unless it builds a
    view of its own (:meth:`labtwin.Task.make_numeric_view`). ``fixed`` holds
    values that a custom view adds to every experiment.
    """

    def __init__(self, model: type[Experiment], fixed: dict[str, Any] | None = None):
        self.model = model
        self.axes: list[_Axis] = []
        self.fixed: dict[str, Any] = dict(fixed or {})
        for name, field in model.model_fields.items():
            if name in self.fixed:
                continue
            annotation = field.annotation
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            bounds = field_bounds(field)
            if get_origin(annotation) is Literal:
                self.axes.append(_Axis(name, "choice", choices=tuple(get_args(annotation))))
            elif annotation in (float, int) and bounds is not None:
                kind = "int" if annotation is int else "float"
                log = extra.get("scale") == "log"
                self.axes.append(_Axis(name, kind, bounds[0], bounds[1], log))
            else:
                raise NoNumericReading(
                    f"{model.__name__}.{name} has no numeric reading (a bounded float/int or a "
                    "Literal); pass it in `fixed` or let the lab be a text lab"
                )
        if not self.axes:
            raise NoNumericReading(f"{model.__name__} has no numeric field")
        self.space = gym.spaces.Box(-1.0, 1.0, shape=(len(self.axes),), dtype=np.float32)
        self._plain = _plain_axes(model, self.names)
        self._inputs_are_dumps = self._plain and _inputs_are_dumps(model, self.fixed, self.axes)

    @property
    def names(self) -> list[str]:
        return [axis.name for axis in self.axes]

    def to_experiment(self, action: np.ndarray) -> Experiment | Invalid:
        """Map a vector in ``[-1, 1]^d`` to an experiment; bad vectors are :class:`Invalid`."""
        vector = np.asarray(action, dtype=np.float64)
        if vector.shape != (len(self.axes),):  # a 0-d or (1, d) array is no action either
            return Invalid(
                f"action must have shape ({len(self.axes)},), got {vector.shape}",
                vector.tolist(),
            )
        if not np.all(np.isfinite(vector)):
            bad = [self.axes[i].name for i in np.flatnonzero(~np.isfinite(vector))]
            return Invalid(f"action is not finite for {bad}", vector.tolist())
        tol = 1e-6  # float32 round-off at the boundary
        outside = np.flatnonzero((vector < -1 - tol) | (vector > 1 + tol))
        if outside.size:
            i = int(outside[0])
            return Invalid(
                f"action[{i}] ({self.axes[i].name}) = {vector[i]:.4g} lies outside [-1, 1]",
                vector.tolist(),
            )
        values = {
            axis.name: axis.from_unit(float(np.clip(u, -1, 1)))
            for axis, u in zip(self.axes, vector)
        }
        return parse_experiment(self.model, {**self.fixed, **values})

    def to_experiments(self, actions: np.ndarray) -> list[Experiment | Invalid]:
        """:meth:`to_experiment` of every row of an ``(n, d)`` array, computed for all rows
        at once: the same experiments, and for bad rows the same :class:`Invalid` (a bad
        row takes the one-at-a-time path, so its reason is that path's)."""
        return self.to_experiments_dumped(actions)[0]

    def to_experiments_dumped(
        self, actions: np.ndarray
    ) -> tuple[list[Experiment | Invalid], list[dict[str, Any] | None] | None]:
        """:meth:`to_experiments`, and each experiment's ``model_dump(mode="json")`` where
        the view knows it without dumping: the dict it validated, for a model whose dump
        of such a dict is that dict, key order and types included (checked once, on
        probes, when the view is made: :func:`_inputs_are_dumps`). None for a bad row;
        None for all where the model is not such a model."""
        matrix = np.asarray(actions, dtype=np.float64)
        if matrix.ndim != 2 or matrix.shape[1] != len(self.axes):
            return [self.to_experiment(row) for row in matrix], None
        tol = 1e-6  # as in to_experiment
        good = np.isfinite(matrix).all(axis=1) & ((matrix >= -1 - tol) & (matrix <= 1 + tol)).all(
            axis=1
        )
        out: list[Any] = [None] * len(matrix)
        for i in np.flatnonzero(~good).tolist():
            out[i] = self.to_experiment(matrix[i])
        rows = np.flatnonzero(good).tolist()
        dumps: list[dict[str, Any] | None] | None = None
        if not rows:
            return out, dumps
        unit = np.clip(matrix[rows], -1, 1)
        columns = [axis.from_units(unit[:, j]) for j, axis in enumerate(self.axes)]
        fixed = self.fixed
        if self._inputs_are_dumps:  # filled in the model's field order: the dump's order
            dicts: list[dict[str, Any]] = [{} for _ in rows]
            column_of = dict(zip(self.names, columns))
            for name in self.model.model_fields:
                column = column_of[name] if name in column_of else [fixed[name]] * len(rows)
                for d, value in zip(dicts, column):
                    d[name] = value
        else:  # {**fixed, **dict(zip(names, row))} for every row, filled a column at a time
            dicts = [{**fixed} for _ in rows] if fixed else [{} for _ in rows]
            for name, column in zip(self.names, columns):
                for d, value in zip(dicts, column):
                    d[name] = value
        for i, e in zip(rows, validate_many(self.model, dicts)):
            out[i] = e
        if self._inputs_are_dumps:
            dumps = [None] * len(matrix)
            for i, d in zip(rows, dicts):
                if not isinstance(out[i], Invalid):
                    dumps[i] = d
        return out, dumps

    def vectors_of(self, experiments: list[dict[str, Any]]) -> np.ndarray | None:
        """:meth:`to_vectors` of the experiments these JSON dicts (``model_dump(mode="json")``)
        validate to, read from the dicts themselves where validation cannot change a value:
        a model without validators, plain float/int/``Literal`` axes, and values of the
        field's own type. None where that does not hold (validate them then)."""
        if not self._plain:
            return None
        columns = []
        for axis in self.axes:
            try:
                values = list(map(operator.itemgetter(axis.name), experiments))
            except (KeyError, TypeError):
                return None
            if axis.kind == "choice":  # to_units, from a table of the choices (type, value)
                units = axis.choice_units
                try:
                    columns.append(np.array([units[(type(v), v)] for v in values]))
                except (KeyError, TypeError):  # not one of the choices, or unhashable
                    return None
                continue
            kind = float if axis.kind == "float" else int
            if values and set(map(type, values)) != {kind}:
                return None
            columns.append(axis.to_units(values))
        return np.stack(columns, axis=1).astype(np.float32)

    def to_vectors(self, experiments: list[Experiment]) -> np.ndarray:
        """:meth:`to_vector` of many experiments, as an ``(n, d)`` float32 array."""
        if not experiments:
            return np.zeros((0, len(self.axes)), dtype=np.float32)
        columns = [
            axis.to_units([getattr(e, axis.name) for e in experiments]) for axis in self.axes
        ]
        return np.stack(columns, axis=1).astype(np.float32)

    def to_vector(self, experiment: Experiment) -> np.ndarray:
        """Map an experiment to its point in ``[-1, 1]^d``."""
        return np.array(
            [axis.to_unit(getattr(experiment, axis.name)) for axis in self.axes], dtype=np.float32
        )
