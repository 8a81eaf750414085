"""The vector env's batched paths give what the one-at-a-time paths give.

Numeric actions converted together (``Task.parse_batch``) against ``Task.parse`` one by one
on hostile inputs (``labtwin.testing.hostile_strategy`` and vectors at the edges), pooled
experiment generators against ``numpy.random.default_rng``, the incremental observation
against :func:`labtwin.campaign.observation` rebuilt from the campaign, and the column-wise
infos against Gymnasium's own ``VectorEnv._add_info``. All comparisons are exact.
"""

from __future__ import annotations

import gc
import math
import pickle
import sys
import threading
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import model_validator

import labtwin
from labtwin import gcpause, seeding
from labtwin.campaign import CampaignBatch, observation
from labtwin.env import reset_info, step_info
from labtwin.experiment import Analysis, Answer, Invalid, NumericView
from labtwin.gcpause import lab_code, paused_gc
from labtwin.seeding import (
    campaign_generators,
    experiment_generators,
    integer_below,
    pcg64_states,
)
from labtwin.testing import hostile_strategy
from labtwin.vector import VectorLabEnv, vector_infos

EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


class Recipe(labtwin.Experiment):
    """Every kind of axis, a fixed field, and a rule across fields that only pydantic knows."""

    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath")
    time_s: float = labtwin.knob(1.0, 1e4, unit="s", description="hold time", log=True)
    stirs: int = labtwin.knob(1, 9, unit="", description="stir count")
    catalyst: Literal["Pd", "Pt", "Ni"] = "Pd"
    solvent: str = "water"

    @model_validator(mode="after")
    def _hot_short(self) -> Recipe:
        if self.temperature_K > 370.0 and self.time_s > 5e3:
            raise ValueError("too hot for that long")
        return self


class RecipeLab(labtwin.Task):
    id = "RecipeHarness-v0"
    experiment_model = Recipe
    observables = (labtwin.ObservableSpec("signal", "", "a reading", scale=2.0),)
    public_conditions = (labtwin.ObservableSpec("target_K", "K", "target", scale=100.0),)
    default_budget = 4

    def make_numeric_view(self) -> NumericView:
        return NumericView(Recipe, fixed={"solvent": "water"})

    def sample_conditions(self, rng: np.random.Generator) -> dict[str, Any]:
        return {"target_K": float(rng.uniform(300.0, 360.0))}

    def simulate(self, experiments, conditions, rngs):
        out = []
        for e, rng in zip(experiments, rngs):
            value = e.temperature_K / 380.0 + rng.standard_normal()
            if e.stirs == 9:  # a reading that overflows the observation's limit
                value = 1e300
            out.append(labtwin.Measurement("ok", {"signal": labtwin.Value(value, "", 0.1)}))
        return out

    def reward(self, measurement, conditions):
        return measurement["signal"]


class PlainRecipe(labtwin.Experiment):
    """Recipe without a validator: its vectors are read from the measured dicts."""

    temperature_K: float = labtwin.knob(280.0, 380.0, unit="K", description="bath")
    time_s: float = labtwin.knob(1.0, 1e4, unit="s", description="hold time", log=True)
    stirs: int = labtwin.knob(1, 9, unit="", description="stir count")
    catalyst: Literal["Pd", "Pt", "Ni"] = "Pd"
    solvent: str = "water"


class PlainLab(RecipeLab):
    id = "PlainHarness-v0"
    experiment_model = PlainRecipe

    def make_numeric_view(self) -> NumericView:
        return NumericView(PlainRecipe, fixed={"solvent": "water"})


def _same(a: Any, b: Any) -> bool:
    """Equal experiments (values, types, fields set) or equal Invalid (reason and raw)."""
    if isinstance(a, Invalid) or isinstance(b, Invalid):
        return (
            type(a) is type(b)
            and a.reason == b.reason
            and repr(labtwin.measurement.to_jsonable(a.raw))
            == repr(labtwin.measurement.to_jsonable(b.raw))
        )
    return (
        type(a) is type(b)
        and a == b
        and a.model_fields_set == b.model_fields_set
        and [type(v) for v in a.__dict__.values()] == [type(v) for v in b.__dict__.values()]
        and a.model_dump(mode="json") == b.model_dump(mode="json")
    )


EDGES = [-1.0, 1.0, -1 - 1e-6, 1 + 1e-6, -1 - 2e-6, 1 + 2e-6, 0.0, 0.49, 1 / 3]
edge_floats = st.sampled_from(EDGES) | st.floats(-1.0, 1.0) | st.floats(allow_nan=True)


def _vectors(d: int) -> Any:
    rows = st.lists(edge_floats, min_size=d, max_size=d)
    return st.tuples(rows, st.sampled_from([np.float32, np.float64])).map(
        lambda r: np.array(r[0], dtype=r[1])
    )


@pytest.mark.parametrize("lab", [RecipeLab, "BatchReactor-v1"])
def test_batched_conversion_matches_one_at_a_time(lab: Any) -> None:
    task = lab() if isinstance(lab, type) else labtwin.load_task(lab)
    d = task.numeric_view.space.shape[0]
    proposals = st.lists(_vectors(d) | hostile_strategy(task), min_size=2, max_size=12)

    @EXAMPLES
    @given(proposals)
    def check(batch: list[Any]) -> None:
        together = task.parse_batch(batch)
        alone = [task.parse(p) for p in batch]
        assert len(together) == len(alone)
        for p, a, b in zip(batch, together, alone):
            assert _same(a, b), (p, a, b)

    check()


def test_batched_conversion_reaches_every_outcome() -> None:
    """The rows above are not all of one kind: the fast path, the row-by-row fallback for a
    rule pydantic enforces across fields, and each invalid message all occur."""
    task = RecipeLab()
    rows = np.array(
        [
            [0.0, 0.0, 0.0, 0.0],  # valid
            [1.0, 1.0, 0.0, 0.0],  # passes the bounds, fails the model's own rule
            [np.nan, 0.0, 0.0, 0.0],
            [0.0, 1.5, 0.0, 0.0],
            [1 + 1e-6, -1 - 1e-6, 1.0, -1.0],  # round-off at the bounds: valid
        ]
    )
    out = task.parse_batch([*rows, np.zeros(3), [0.0] * 4])
    assert isinstance(out[0], Recipe) and isinstance(out[4], Recipe)
    assert "too hot for that long" in out[1].reason
    assert out[2].reason == "action is not finite for ['temperature_K']"
    assert out[3].reason == "action[1] (time_s) = 1.5 lies outside [-1, 1]"
    assert out[5].reason == "action must have shape (4,), got (3,)"
    assert isinstance(out[6], Recipe)
    for p, a in zip([*rows, np.zeros(3), [0.0] * 4], out):
        assert _same(a, task.parse(p))


def test_vectorised_axis_maps_are_exact() -> None:
    view = RecipeLab().numeric_view
    u = np.concatenate([np.linspace(-1, 1, 2001), np.random.default_rng(0).uniform(-1, 1, 5000)])
    for axis in view.axes:
        values = axis.from_units(u)
        assert values == [axis.from_unit(float(x)) for x in u]
        assert [type(v) for v in values] == [type(axis.from_unit(float(x))) for x in u]
        np.testing.assert_array_equal(axis.to_units(values), [axis.to_unit(v) for v in values])


@pytest.mark.parametrize("writes", ["state words", "numpy's setter"])
def test_pooled_generators_draw_as_default_rng(writes: str, monkeypatch) -> None:
    """Both ways of setting a lent generator's state: the words written into numpy's state
    struct (where the probe found its layout, as it must on this machine) and numpy's
    ``state`` setter (where it did not)."""
    if writes == "state words":
        assert seeding._LAYOUT is not None  # the probe read this numpy's layout
    else:
        monkeypatch.setattr(seeding, "_LAYOUT", None)
    monkeypatch.setattr(seeding, "_free", [])
    edges = [0, 1, 2**32 - 1, 2**32, 2**63 - 2, 2**64 - 1]
    seeds = edges + np.random.default_rng(1).integers(0, 2**63 - 1, 300).tolist()
    for seed, (state, inc) in zip(seeds, pcg64_states(seeds)):
        assert np.random.default_rng(seed).bit_generator.state["state"] == {
            "state": state,
            "inc": inc,
        }
    for _ in range(2):  # the second call reuses the first call's generators
        with experiment_generators(seeds[:20]) as rngs:
            with experiment_generators(seeds[:3]) as inner:  # reentrant: others are lent
                assert not {id(r) for r in inner} & {id(r) for r in rngs}
            for seed, rng in zip(seeds, rngs):
                ref = np.random.default_rng(seed)
                assert rng.bit_generator.state == ref.bit_generator.state
                assert rng.standard_normal(3).tolist() == ref.standard_normal(3).tolist()
                assert rng.integers(0, 10**9) == ref.integers(0, 10**9)
                kids, ref_kids = rng.spawn(2), ref.spawn(2)
                assert [k.random() for k in kids] == [k.random() for k in ref_kids]
                assert rng.bit_generator.seed_seq.entropy == seed
                # left holding half of a 64-bit draw (has_uint32): the next lending clears it
                if not rng.bit_generator.state["has_uint32"]:
                    rng.random(dtype=np.float32)  # one 32-bit half drawn, one kept
                assert rng.bit_generator.state["has_uint32"] == 1
            copy = pickle.loads(pickle.dumps(rngs[0]))  # what isolation sends to a worker
            assert copy.random() == rngs[0].random()
    assert len(seeding._free) == 23  # 20 and the 3 lent inside, each made once
    with pytest.raises(ValueError):  # numpy's own error for a negative seed
        with experiment_generators([-1]):
            pass


def test_campaign_generators_draw_as_default_rng() -> None:
    """A batch of campaign generators (hashed together, handed to PCG64 as seed words) and a
    short one (numpy's own) draw, spawn, answer ``seed_seq`` and pickle as ``default_rng``."""
    edges = [0, 1, 2**32 - 1, 2**32, 2**63 - 2, 2**64 - 1]
    seeds = edges + np.random.default_rng(2).integers(0, 2**63 - 1, 60).tolist()
    for batch in (seeds, seeds[:3]):
        for seed, rng in zip(batch, campaign_generators(batch)):
            ref = np.random.default_rng(seed)
            assert rng.bit_generator.state == ref.bit_generator.state
            assert rng.bit_generator.seed_seq.entropy == seed
            copy = pickle.loads(pickle.dumps(rng))
            assert copy.bit_generator.seed_seq.entropy == seed
            drawn = rng.standard_normal(3).tolist()
            assert drawn == ref.standard_normal(3).tolist() == copy.standard_normal(3).tolist()
            kids, ref_kids = rng.spawn(2), ref.spawn(2)
            assert [k.random() for k in kids] == [k.random() for k in ref_kids]
    assert type(campaign_generators(seeds)[0].bit_generator) is not np.random.PCG64  # hashed
    with pytest.raises(ValueError):  # numpy's own error for a negative seed
        campaign_generators([*seeds, -1])


def _campaign_steps(task: labtwin.Task, rng: np.random.Generator) -> list[Any]:
    d = task.numeric_view.space.shape[0]
    kinds = [
        lambda: rng.uniform(-1, 1, d),
        lambda: rng.uniform(-1, 1, d).astype(np.float32),
        lambda: np.full(d, np.nan),
        lambda: np.r_[rng.uniform(-1, 1, d - 1), 1.0],  # stirs = 9: a huge reading
        lambda: {"temperature_K": 300, "time_s": 10.0, "stirs": 2.0, "catalyst": "Ni"},
        lambda: Invalid("no tool call", "hello"),
        lambda: Answer({"x": 1}),
        lambda: Analysis("fit", {}),
    ]
    return [kinds[k]() for k in rng.integers(0, len(kinds), 200)]


@pytest.mark.parametrize("lab", [RecipeLab, PlainLab])
def test_incremental_observation_matches_a_rebuilt_one(lab: type[RecipeLab]) -> None:
    """Also each record's vector against the one-at-a-time map of its measured experiment."""
    task = lab()
    assert task.numeric_view._plain == (lab is PlainLab)
    batch = CampaignBatch(task, 3, max_turns=6)
    rng = np.random.default_rng(3)
    steps = iter(_campaign_steps(task, rng))
    batch.reset(seeds=[0, 1, 2])
    repeated = np.zeros(task.numeric_view.space.shape)  # the same experiment, pooled
    clipped, kinds = False, set()
    for t in range(60):
        live = [i for i, c in enumerate(batch.campaigns) if not c.done]
        done = [i for i, c in enumerate(batch.campaigns) if c.done]
        if done:
            batch.reset(done)
        proposals = [repeated if t % 5 == 0 else next(steps) for _ in live]
        records = batch.step(live, proposals)
        kinds |= {r.kind for r in records}
        for r in records:
            if r.kind == "experiment" and r.measurement.experiment is not None:
                e = task.experiment_model.model_validate(r.measurement.experiment)
                np.testing.assert_array_equal(r.vector, task.numeric_view.to_vector(e))
                assert r.vector.dtype == np.float32
        together = batch.observations()
        for i in range(3):
            expected = observation(task, batch.campaigns[i])
            np.testing.assert_array_equal(batch.observation(i), expected)
            np.testing.assert_array_equal(together[i], expected)
        clipped |= bool(np.any(together == 1e6))
        batch.campaigns[0].conditions["target_K"] += 1.0  # a public condition that moves
    assert kinds == {"experiment", "invalid", "answer", "analysis"}
    assert clipped  # the huge reading was clipped to the observation's limit


def _same_infos(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], dict):
            _same_infos(a[key], b[key])
            continue
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        if a[key].dtype == object:
            for x, y in zip(a[key], b[key]):
                assert (x is y) or (x == y) or np.array_equal(x, y), key
        else:
            np.testing.assert_array_equal(a[key], b[key])


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_infos_match_gymnasium_add_info(mode: str) -> None:
    """Campaigns staggered (some slots started again a step or two later), so that steps
    mix resets, experiments and closing confirmations."""
    task = RecipeLab()
    assert task.confirms_best
    env = VectorLabEnv(task, 6, autoreset_mode=mode)
    env.reset(seed=0)
    rng = np.random.default_rng(5)
    mixed = set()
    for t in range(14):
        if t in (1, 2):  # stagger: these slots start new campaigns now
            env.batch.reset([1, 4] if t == 1 else [2])
        actions = rng.uniform(-1.05, 1.05, (6, task.numeric_view.space.shape[0]))
        resetting = env._needs_reset.copy()
        _, _, _, _, infos = env.step(actions)
        if mode == "NextStep":  # what _add_info makes of each env's info, env by env
            expected: dict[str, Any] = {}
            for i in np.flatnonzero(resetting):
                expected = env._add_info(expected, reset_info(env.campaigns[i]), i)
            for i in np.flatnonzero(~resetting):
                c = env.campaigns[i]
                expected = env._add_info(expected, step_info(c, c.history[-1]), i)
            _same_infos(infos, expected)
            if resetting.any() and not resetting.all():
                mixed.add("confirmed_score" in infos)
    if mode == "NextStep":
        assert mixed == {True, False}  # mixed steps with and without a confirmation
    entries = [
        (2, {"a": 1, "m": "x", "nested": {"v": 0.5}, "final_obs": np.ones(2)}),
        (0, {"a": 3, "b": 2.5, "arr": np.arange(3), "nested": {"v": 1.5, "w": True}}),
        (1, {"m": None, "b": np.float32(1.0), "arr": np.arange(3) + 1}),
        (3, {"a": 7, "final_obs": np.zeros(2), "confirmed_score": math.nan}),
    ]
    ours = vector_infos({"a": np.zeros(4, dtype=int), "_a": np.zeros(4, bool)}, 4, entries)
    theirs: dict[str, Any] = {"a": np.zeros(4, dtype=int), "_a": np.zeros(4, bool)}
    four = VectorLabEnv(task, 4)
    for i, info in entries:
        theirs = four._add_info(theirs, info, i)
    _same_infos(ours, theirs)


def test_collector_paused_for_the_harness_only() -> None:
    """A vector env's step defers the garbage collector over its own work and runs the lab's
    code (simulate, sample_conditions, a lab's own run) with it on: every collection that
    starts during the steps starts in a block of lab code (at its call or inside the lab's
    methods), and some start inside simulate and sample_conditions themselves. The
    collector is left as it was found."""
    where: list[str] = []  # the lab's method running now, innermost last
    step_code = VectorLabEnv.step.__code__
    started: list[tuple[tuple[str, ...], str]] = []  # each collection: lab methods, block
    seen = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            frame = sys._getframe(1)
            while frame is not None and frame.f_code is not step_code:
                frame = frame.f_back
            if frame is not None:  # within a step (those between steps are the caller's)
                blocks = getattr(gcpause._local, "stack", None) or ["none"]
                started.append((tuple(where), blocks[-1]))

    class Watched(PlainLab):
        def sample_conditions(self, rng):
            where.append("sample_conditions")
            seen.append(gc.isenabled())
            garbage = [[] for _ in range(800)]  # enough allocations to wake the collector
            del garbage
            conditions = super().sample_conditions(rng)
            where.pop()
            return conditions

        def run(self, proposals, conditions, seeds):
            where.append("run")
            seen.append(gc.isenabled())
            out = super().run(proposals, conditions, seeds)
            where.pop()
            return out

        def simulate(self, experiments, conditions, rngs):
            where.append("simulate")
            seen.append(gc.isenabled())
            garbage = [[] for _ in range(800)]
            del garbage
            out = super().simulate(experiments, conditions, rngs)
            where.pop()
            return out

    env = VectorLabEnv(Watched(budget=3), 256)  # enough records to wake the collector
    env.reset(seed=0)
    gc.callbacks.append(watch)
    try:
        for _ in range(12):  # campaigns end and reset: sample_conditions runs within steps
            env.step(np.zeros((256, 4)))
    finally:
        gc.callbacks.remove(watch)
    assert seen and all(seen) and gc.isenabled()
    assert started and {block for _, block in started} == {"lab"}  # none in the harness's work
    assert {w[-1] for w, _ in started if w} >= {"simulate", "sample_conditions"}


def test_collector_blocks_nest_and_span_threads() -> None:
    """The innermost block decides; the blocks leave the collector as they found it (also
    after an error, and when it was off); a lab running in another thread keeps it on."""
    with pytest.raises(ZeroDivisionError):
        with paused_gc():
            assert not gc.isenabled()
            with paused_gc():
                pass
            assert not gc.isenabled()  # the inner block did not turn it back on
            with lab_code():
                assert gc.isenabled()
                with paused_gc():
                    assert not gc.isenabled()
                assert gc.isenabled()
            assert not gc.isenabled()
            raise ZeroDivisionError("inside the block")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            with lab_code():
                assert not gc.isenabled()  # off before: the blocks never turn it on
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def lab() -> None:
        with lab_code():
            inside.set()
            leave.wait(10)

    with paused_gc():
        assert not gc.isenabled()
        worker = threading.Thread(target=lab)
        worker.start()
        assert inside.wait(10)
        assert gc.isenabled()  # the other thread's lab code keeps it on
        leave.set()
        worker.join(10)
        assert not gc.isenabled()  # back to this thread's pause
    assert gc.isenabled()


@pytest.mark.parametrize("high", [2**63 - 1, 2**32 + 1, 3 * 2**62 + 5, 2**64])
def test_integer_below_draws_as_numpy_integers(high: int) -> None:
    """The campaign seed draw against ``Generator.integers``, value for value and state for
    state; ``3 * 2**62 + 5`` rejects about a quarter of its raw draws, so the retry runs."""
    dtype = np.uint64 if high > 2**63 - 1 else np.int64
    for seed in range(200):
        theirs, ours = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(4):
            assert integer_below(ours, high) == int(theirs.integers(0, high, dtype=dtype))
        assert ours.bit_generator.state == theirs.bit_generator.state


def test_vectors_read_from_dicts_match_validated_ones() -> None:
    """``NumericView.vectors_of`` (the measured experiments' vectors, read from their JSON
    dicts) gives :meth:`to_vectors` of the validated experiments bit for bit, and declines
    (None) any dict whose values validation would change or reject."""
    task = PlainLab()
    view = task.numeric_view
    rng = np.random.default_rng(4)
    experiments = [task.random_experiment(rng) for _ in range(300)]
    dicts = task._dump(experiments)
    got = view.vectors_of(dicts)
    want = view.to_vectors(experiments)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert {d["catalyst"] for d in dicts} == {"Pd", "Pt", "Ni"}
    for change in (
        {"temperature_K": 300},  # an int where a float is declared
        {"stirs": 3.0},  # a float where an int is declared
        {"stirs": True},
        {"catalyst": "Cu"},
        {"catalyst": ["Pd"]},  # unhashable
    ):
        assert view.vectors_of([*dicts[:3], {**dicts[3], **change}]) is None, change
    assert view.vectors_of([{k: v for k, v in dicts[0].items() if k != "time_s"}]) is None
    assert view.vectors_of([None]) is None
    assert RecipeLab().numeric_view.vectors_of(dicts) is None  # a model with a validator
