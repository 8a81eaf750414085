"""``Task._finish_all`` stamps a ``simulate`` call's measurements as :func:`finish_one` (the
one-measurement stamping it replaced, kept here as the reference) stamps each one: the same fields, the same provenance (content and key order, so the run store
writes the same bytes), the same failures for non-finite values and the same error for a
lab that returns undeclared observables. The versions dict it shares between measurements
is read-only and pickles, copies and writes to JSON as the plain dict it equals."""

from __future__ import annotations

import copy
import json
import math
import pickle
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
from test_harness_records import NoisyLab

import labtwin
from labtwin.measurement import Measurement, Value
from labtwin.task import SharedVersions, package_versions

LAB_VERSIONS = {"toy": "1.0"}  # one dict that many measurements of a lab carry


def finish_one(task, m: Measurement, experiment, seed: int, dumped=None) -> Measurement:
    """The library's former ``Task._finish``: one measurement at a time, nothing shared."""
    if m.ok:
        task._check_declared(m)
    m.experiment = experiment.model_dump(mode="json") if dumped is None else dumped
    m.cost_unit = m.cost_unit or task.cost_unit
    m.provenance = {"task": task.id, "seed": seed, **m.provenance}
    m.provenance["versions"] = {**package_versions(), **m.provenance.get("versions", {})}
    if m.ok:
        bad = [
            k
            for k, v in m.observables.items()
            if not (math.isfinite(v.value) and math.isfinite(v.uncertainty))
        ]
        if bad:
            m.status, m.reason = "failed", f"simulation produced non-finite values for {bad}"
    return m


def _measurements() -> list[Measurement]:
    """Every shape of provenance a lab may return, with and without a cost unit."""
    nan, inf = float("nan"), float("inf")
    provenances: list[Any] = [
        {},
        {"simulator": "toy", "versions": LAB_VERSIONS},
        {"simulator": "toy", "versions": LAB_VERSIONS},
        {"versions": {"toy": "2.0", "labtwin": "mine"}, "device": "cpu"},
        {"task": "other", "seed": 7, "device": "cpu"},
        {"versions": {}},
        {"versions": OrderedDict(toy="3.0")},
        {"versions": package_versions("numpy")},
    ]
    out = []
    for k, provenance in enumerate(provenances * 3):
        value = [0.5, nan, inf][k % 3] if k % 4 else 0.5
        uncertainty = [0.1, 0.1, 0.1, -inf][k % 4]
        m = Measurement(
            "ok" if k % 5 else "failed",
            {"signal": Value(value, "", uncertainty)},
            cost_unit="h" if k % 3 == 0 else "",
            reason="" if k % 5 else "the lab's own failure",
            provenance=dict(provenance),
        )
        out.append(m)
    return out


def _lines(measurements: list[Measurement]) -> list[str]:
    return [json.dumps(m.to_dict(with_artifacts=True)) for m in measurements]


def test_batch_stamps_as_one_at_a_time() -> None:
    task = NoisyLab()
    task.cost_unit = "s"
    experiments = [task.random_experiment(np.random.default_rng(i)) for i in range(24)]
    dumped = task._dump(experiments)
    seeds = [10 * i + 3 for i in range(24)]
    alone = [
        finish_one(task, m, e, s, d)
        for m, e, s, d in zip(_measurements(), experiments, seeds, dumped)
    ]
    together = task._finish_all(_measurements(), seeds, dumped)
    assert _lines(together) == _lines(alone)  # key order included: the run store's bytes
    for a, b in zip(together, alone):
        assert a.provenance == b.provenance and a.status == b.status and a.reason == b.reason
        assert list(a.provenance) == list(b.provenance)
        assert list(a.provenance["versions"]) == list(b.provenance["versions"])
    assert {m.status for m in together} == {"ok", "failed"}
    assert {m.cost_unit for m in together} == {"h", "s"}
    assert together[3].provenance["versions"]["labtwin"] == "mine"
    assert together[4].provenance["task"] == "other" and together[4].provenance["seed"] == 7
    # what is the same is built once: one versions dict per distinct dict of the lab's
    assert together[1].provenance["versions"] is together[2].provenance["versions"]
    assert together[0].provenance["versions"] is together[5].provenance["versions"]
    assert together[0].provenance["versions"] == package_versions()


def test_run_returns_what_finishing_one_at_a_time_returns() -> None:
    task = NoisyLab()
    proposals = [task.random_experiment(np.random.default_rng(i)) for i in range(8)]
    proposals[3] = {"temperature_K": 1e9}  # invalid
    seeds = list(range(8))
    conditions = [{"target_K": 320.0}] * 8
    got = task.run(proposals, conditions, seeds)
    with task.experiment_rngs([s for i, s in enumerate(seeds) if i != 3]) as rngs:
        valid = [p for i, p in enumerate(proposals) if i != 3]
        raw = task.simulate(valid, conditions[:7], rngs)
    expected = [finish_one(task, m, e, s) for m, e, s in zip(raw, valid, seeds[:3] + seeds[4:])]
    assert _lines([m for i, m in enumerate(got) if i != 3]) == _lines(expected)
    assert got[3].status == "invalid"


def test_undeclared_observables_raise_the_same_error() -> None:
    task = NoisyLab()
    e = task.random_experiment(np.random.default_rng(0))
    bad = Measurement("ok", {"signal": Value(1.0, ""), "extra": Value(2.0, "")})
    with pytest.raises(RuntimeError) as alone:
        finish_one(task, copy.deepcopy(bad), e, 0)
    good = Measurement("ok", {"signal": Value(1.0, "")})
    with pytest.raises(RuntimeError) as together:
        task._finish_all([good, bad], [0, 1], task._dump([e, e]))
    assert str(together.value) == str(alone.value)
    assert "undeclared ['extra'], missing []" in str(alone.value)


def test_shared_versions_are_read_only_and_travel_as_dicts() -> None:
    task = NoisyLab()
    m = task.measure([task.random_experiment(np.random.default_rng(0))])[0]
    versions = m.provenance["versions"]
    assert isinstance(versions, SharedVersions) and versions == package_versions()
    for change in (
        lambda v: v.__setitem__("x", "1"),
        lambda v: v.update(x="1"),
        lambda v: v.pop("labtwin"),
        lambda v: v.setdefault("x", "1"),
        lambda v: v.clear(),
        lambda v: v.__delitem__("labtwin"),
    ):
        with pytest.raises(TypeError, match="read-only"):
            change(versions)
    assert versions == package_versions()
    own = dict(versions)
    own["x"] = "1"  # a copy is one's own
    assert type(versions.copy()) is dict
    for back in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), copy.copy(m)):
        assert back == m and back.provenance["versions"] == versions
    read = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert read == m and type(read.provenance["versions"]) is dict


def test_a_lab_measurement_keeps_its_versions() -> None:
    task = labtwin.load_task("BatchReactor-v1")
    m = task.measure([task.random_experiment(np.random.default_rng(0))])[0]
    assert "labtwin" in m.provenance["versions"] and "torch" in m.provenance["versions"]
