"""An array of numeric actions is converted whole, with what its rows give one at a time.

``VectorLabEnv.step`` hands its ``(num_envs, d)`` actions to ``CampaignBatch.step`` and
``Task.run`` as one array, and ``Task.parse_batch`` gives a numeric matrix of the view's
width to ``NumericView.to_experiments`` without splitting it into rows and stacking them
again. These tests hold that path to the row path it replaces: the same experiments, the
same ``Invalid`` reasons and raw values for bad rows, the same measurements, and the same
steps of a vector env (observations, rewards, infos, records). All comparisons are exact.
"""

from __future__ import annotations

import enum
import json
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import computed_field, field_serializer
from test_harness_batching import (
    EDGES,
    EXAMPLES,
    PlainLab,
    PlainRecipe,
    Recipe,
    RecipeLab,
    _same,
)
from test_harness_records import NoisyLab, _actions

import labtwin
from labtwin.campaign import Record
from labtwin.experiment import Invalid, NumericView
from labtwin.registry import list_tasks, load_task
from labtwin.vector import VectorLabEnv

DTYPES = [np.float16, np.float32, np.float64, np.int64, np.uint8, np.bool_]


def _matrices(d: int) -> Any:
    values = st.sampled_from(EDGES) | st.floats(-1.5, 1.5) | st.floats(allow_nan=True)
    rows = st.lists(st.lists(values, min_size=d, max_size=d), min_size=1, max_size=10)
    return st.tuples(rows, st.sampled_from(DTYPES))


@pytest.mark.parametrize("lab", [RecipeLab, PlainLab])
def test_matrix_converts_as_its_rows(lab: type[RecipeLab]) -> None:
    task = lab()
    d = task.numeric_view.space.shape[0]

    @EXAMPLES
    @given(_matrices(d))
    def check(drawn: tuple[list[list[float]], Any]) -> None:
        values, dtype = drawn
        with np.errstate(all="ignore"):  # NaN and 1.5 cast to integers: whatever numpy makes
            matrix = np.array(values).astype(dtype)
        together = task.parse_batch(matrix)
        rows = task.parse_batch(list(matrix))
        alone = [task.parse(row) for row in matrix]
        assert len(together) == len(rows) == len(alone) == len(matrix)
        for row, a, b, c in zip(matrix, together, rows, alone):
            assert _same(a, b) and _same(a, c), (row, a, b)

    check()


def test_matrix_reasons_for_bad_rows_are_the_row_path_reasons() -> None:
    task = RecipeLab()
    matrix = np.array(
        [
            [0.0, 0.0, 0.0, 0.0],
            [1.0, 1.0, 0.0, 0.0],  # within bounds, fails the model's own rule
            [np.nan, 0.0, np.inf, 0.0],
            [0.0, 1.5, -2.0, 0.0],
            [1 + 1e-6, -1 - 1e-6, 1.0, -1.0],  # round-off at the bounds: valid
        ]
    )
    out = task.parse_batch(matrix)
    assert isinstance(out[0], task.experiment_model) and isinstance(out[4], task.experiment_model)
    assert "too hot for that long" in out[1].reason
    assert out[2].reason == "action is not finite for ['temperature_K', 'stirs']"
    assert out[3].reason == "action[1] (time_s) = 1.5 lies outside [-1, 1]"
    assert out[3].raw == [0.0, 1.5, -2.0, 0.0]
    for row, a in zip(matrix, out):
        assert _same(a, task.parse(row))


@pytest.mark.parametrize(
    "matrix",
    [
        np.zeros((3, 3)),  # too narrow
        np.zeros((3, 5)),  # too wide
        np.zeros((3, 1, 4)),  # rows that are matrices
        np.zeros((1, 4)),  # one row
        np.zeros((0, 4)),  # no rows
        np.full((2, 4), 0.5, dtype=object),  # numbers, but not a numeric dtype
        np.array([["a", "b", "c", "d"], ["0", "0", "0", "0"]]),
    ],
)
def test_arrays_the_matrix_path_does_not_take_are_read_row_by_row(matrix: np.ndarray) -> None:
    task = RecipeLab()
    out = task.parse_batch(matrix)
    assert len(out) == len(matrix)
    for row, a in zip(matrix, out):
        assert _same(a, task.parse(row))
    if matrix.shape[1:] != (4,):
        assert all(isinstance(e, Invalid) for e in out)


def test_run_with_a_matrix_measures_as_with_its_rows() -> None:
    task = RecipeLab()
    matrix = np.random.default_rng(3).uniform(-1.2, 1.2, (40, 4)).astype(np.float32)
    matrix[5, 2] = np.nan
    seeds = list(range(100, 140))
    conditions = [{"target_K": 320.0}] * 40
    a = task.run(matrix, conditions, seeds)
    b = task.run(list(matrix), conditions, seeds)
    assert [m.to_dict(with_artifacts=True) for m in a] == [
        m.to_dict(with_artifacts=True) for m in b
    ]
    assert {m.status for m in a} == {"ok", "invalid"}


def _records(env: VectorLabEnv) -> list[dict[str, Any]]:
    return [r.to_dict() for c in env.campaigns for r in c.history]


def _same_records(a: list[Record], b: list[Record]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x == y
        assert type(x.vector) is type(y.vector)
        assert x.vector is None or x.vector.dtype == y.vector.dtype


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_vector_env_steps_an_array_as_a_list_of_its_rows(mode: str) -> None:
    """Autoreset included: NEXT_STEP hands the lab only the live rows of the array."""
    n = 6
    envs = [VectorLabEnv(NoisyLab(), n, autoreset_mode=mode) for _ in range(2)]
    for env in envs:
        env.reset(seed=5)
    rng = np.random.default_rng(1)
    for _ in range(15):
        actions = _actions(rng, n).astype(np.float32)
        (o1, r1, t1, u1, i1), (o2, r2, t2, u2, i2) = (
            envs[0].step(actions),
            envs[1].step(list(actions)),
        )
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(t1, t2)
        np.testing.assert_array_equal(u1, u2)
        assert i1.keys() == i2.keys()
        for key in i1:
            if isinstance(i1[key], dict):
                assert i1[key].keys() == i2[key].keys()
            else:
                assert repr(i1[key]) == repr(i2[key]), key
    for c1, c2 in zip(envs[0].campaigns, envs[1].campaigns):
        _same_records(c1.history, c2.history)
    assert _records(envs[0]) == _records(envs[1])


def test_a_lab_with_its_own_run_gets_a_list() -> None:
    seen = []

    class OwnRun(NoisyLab):
        def run(self, proposals, conditions, seeds):
            seen.append(type(proposals))
            return super().run(proposals, conditions, seeds)

    env = VectorLabEnv(OwnRun(), 3)
    env.reset(seed=0)
    env.step(np.zeros((3, 3), dtype=np.float32))
    assert seen == [list]


def test_wrong_number_of_actions_says_so() -> None:
    env = VectorLabEnv(NoisyLab(), 3)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="expected 3 actions, got 2"):
        env.step(np.zeros((2, 3)))


@pytest.mark.parametrize(
    "slots, error, message",
    [
        ([0, 3], IndexError, "slot 3 out of range for 3 slots"),
        ([-1], IndexError, "slot -1 out of range for 3 slots"),
        ([1, 2], RuntimeError, "reset\\(\\) a slot before stepping it"),
        ([0, 1], RuntimeError, "step called on a finished campaign; reset it first"),
    ],
)
def test_slots_that_cannot_step_say_why(slots: list[int], error: type, message: str) -> None:
    """A slot that cannot step says why, with an array of actions as with a list."""
    from labtwin.campaign import CampaignBatch

    batch = CampaignBatch(NoisyLab(budget=1), 3)
    batch.reset([0, 1], [0, 1])
    if slots == [0, 1]:
        batch.step([1], [np.zeros(3)])  # a budget of one: campaign 1 is done
    with pytest.raises(error, match=message):
        batch.step(slots, np.zeros((len(slots), 3)))
    with pytest.raises(error, match=message):
        batch.step(slots, list(np.zeros((len(slots), 3))))


# ---- the dumps the view knows: the dicts it validated, where they are the dumps ---------------


class Grade(enum.Enum):
    A = "A"
    B = "B"


class Serialized(PlainRecipe):
    """A field serializer changes the dump: the validated dict is not it."""

    @field_serializer("temperature_K")
    def _rounded(self, value: float) -> float:
        return round(value, 1)


class Computed(PlainRecipe):
    """A computed field adds a key to the dump."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hot(self) -> bool:
        return self.temperature_K > 330.0


class Graded(labtwin.Experiment):
    """A Literal of enum members dumps as their values (another type than the input's)."""

    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath")
    grade: Literal[Grade.A, Grade.B] = Grade.A


class Scaled(labtwin.Experiment):
    """A float field fixed to an int: validation makes it a float."""

    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath")
    pressure_bar: float = 1.0


def _views() -> list[tuple[str, NumericView]]:
    views = [
        (task_id, load_task(task_id).numeric_view)
        for task_id in list_tasks()
        if load_task(task_id).numeric_view is not None
    ]
    return views + [
        ("PlainRecipe", NumericView(PlainRecipe, fixed={"solvent": "water"})),
        ("Recipe", NumericView(Recipe, fixed={"solvent": "water"})),
        ("Serialized", NumericView(Serialized, fixed={"solvent": "water"})),
        ("Computed", NumericView(Computed, fixed={"solvent": "water"})),
        ("Graded", NumericView(Graded)),
        ("Scaled", NumericView(Scaled, fixed={"pressure_bar": 2})),
    ]


@pytest.mark.parametrize(("name", "view"), _views(), ids=[name for name, _ in _views()])
def test_known_dumps_are_the_dumps_byte_for_byte(name: str, view: NumericView) -> None:
    d = view.space.shape[0]
    matrix = np.random.default_rng(7).uniform(-1.1, 1.1, (64, d))
    matrix[3, 0] = np.nan
    matrix[4] = [-1.0] * d
    matrix[5] = [1.0] * d
    experiments, dumps = view.to_experiments_dumped(matrix)
    assert all(_same(a, b) for a, b in zip(experiments, view.to_experiments(matrix)))
    if dumps is None:
        return
    assert len(dumps) == len(experiments)
    for e, known in zip(experiments, dumps):
        if isinstance(e, Invalid):
            assert known is None
            continue
        assert json.dumps(known) == json.dumps(e.model_dump(mode="json")), name
        assert [type(v) for v in known.values()] == [
            type(v) for v in e.model_dump(mode="json").values()
        ]


@pytest.mark.parametrize(
    ("model", "fixed", "expected"),
    [
        (PlainRecipe, {"solvent": "water"}, True),
        (Recipe, {"solvent": "water"}, False),  # a model validator: not plain
        (Serialized, {"solvent": "water"}, False),
        (Computed, {"solvent": "water"}, False),
        (Graded, {}, False),
        (Scaled, {"pressure_bar": 2}, False),
        (Scaled, {"pressure_bar": 2.0}, True),
    ],
)
def test_views_know_dumps_only_where_the_dict_is_the_dump(
    model: type, fixed: dict[str, Any], expected: bool
) -> None:
    assert NumericView(model, fixed=fixed)._inputs_are_dumps is expected


@pytest.mark.parametrize("model", [PlainRecipe, Serialized, Computed])
def test_measured_experiments_are_the_experiments_dumps(model: type) -> None:
    """What ``Task.run`` stamps on a measurement from a matrix is each experiment's own
    ``model_dump(mode="json")``, as JSON text, whether the view knew it or it was dumped."""

    class Lab(PlainLab):
        experiment_model = model

        def make_numeric_view(self) -> NumericView:
            return NumericView(model, fixed={"solvent": "water"})

    task = Lab()
    matrix = np.random.default_rng(5).uniform(-1.1, 1.1, (32, 4))
    measured = task.run(matrix, [{"target_K": 320.0}] * 32, list(range(32)))
    parsed = task.parse_batch(matrix)
    assert {m.status for m in measured} == {"ok", "invalid"}
    for m, e in zip(measured, parsed):
        if m.ok:
            assert json.dumps(m.experiment) == json.dumps(e.model_dump(mode="json"))
            assert m.experiment is not None and m.experiment.get("hot") == (
                e.temperature_K > 330.0 if model is Computed else None
            )
