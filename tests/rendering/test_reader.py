"""Tailing a run that is being written, and reading structures without trusting the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import viewer_runs

import labtwin
from labtwin.rendering.viewer.reader import (
    JsonlTail,
    RunReader,
    artifact_path,
    find_runs,
    load_structure,
    structure_json,
)


def test_a_torn_last_line_waits_until_it_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    tail = JsonlTail(path)
    assert tail.read() == []  # no file yet
    path.write_bytes(b'{"a": 1}\n{"b": ')
    assert tail.read() == [{"a": 1}]
    assert tail.read() == []  # still torn
    with open(path, "ab") as f:
        f.write(b'2}\n{"c": 3}\n')
    assert tail.read() == [{"b": 2}, {"c": 3}]
    assert tail.offset == path.stat().st_size


def test_a_whole_object_without_its_newline_is_read_once(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(
        b'{"step": 1}'
    )  # the writer lost only the newline (labtwin.runs.load keeps it)
    tail = JsonlTail(path)
    assert tail.read() == [{"step": 1}]
    with open(path, "ab") as f:
        f.write(b'\n{"step": 2}\n')
    assert tail.read() == [{"step": 2}]


def test_unreadable_lines_are_counted_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n\xff\xfe not json\n[1, 2]\n{"b": 2}\n')
    tail = JsonlTail(path)
    assert tail.read() == [{"a": 1}, {"b": 2}]
    assert tail.skipped == 2


def test_a_replaced_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n')
    tail = JsonlTail(path)
    tail.read()
    path.write_bytes(b'{"z": 0}\n')
    assert tail.read() == [{"z": 0}] and tail.restarted


def test_long_streams_come_in_chunks_and_add_up(tmp_path: Path, monkeypatch) -> None:
    from labtwin.rendering.viewer import reader

    monkeypatch.setattr(reader, "READ_CHUNK", 64)
    path = tmp_path / "records.jsonl"
    rows = [{"i": i, "pad": "x" * (i % 7) * 20} for i in range(50)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tail, got = JsonlTail(path), []
    while batch := tail.read():
        got += batch
    assert got == rows


def test_reading_everything_matches_the_run_store(viewer_root: Path) -> None:
    path = viewer_root / "train-chat"
    lines = RunReader(path).read_all()
    run = labtwin.runs.load(path)
    assert lines["records"] == run.record_lines
    assert lines["metrics"] == run.metrics
    assert {t["campaign"]: t for t in lines["transcripts"]} == run.transcripts
    assert len(lines["campaigns"]) == len(run.campaigns)


def test_runs_are_found_in_a_folder_or_as_the_folder(viewer_root: Path, tmp_path: Path) -> None:
    assert {"lj-campaigns", "train-chat", "structures"} <= set(find_runs(viewer_root))
    assert list(find_runs(viewer_root / "structures")) == ["structures"]
    inner = tmp_path / "root"  # a run behind a symlink out of the folder is not served
    inner.mkdir()
    (inner / "link").symlink_to(viewer_root / "structures")
    assert find_runs(inner) == {}


def test_structures_of_a_molecule_and_a_trajectory_in_a_cell() -> None:
    molecule = structure_json(viewer_runs.molecule_structure())
    assert len(molecule["numbers"]) == 21 and len(molecule["frames"]) == 1  # aspirin with H
    assert {b[2] for b in molecule["bonds"]} == {1, 2, 4}  # single, double, aromatic
    crystal = structure_json(viewer_runs.crystal_structure())
    assert len(crystal["frames"]) == len(crystal["cells"]) == 5
    assert crystal["cells"][-1][0] == pytest.approx([7.22, 0, 0])  # 2 x 3.61 Å


def test_artifact_paths_must_stay_in_the_runs_artifacts(viewer_root: Path, tmp_path: Path) -> None:
    run = viewer_root / "structures"
    line = labtwin.runs.load(run).record_lines[0]
    good = line["measurement"]["artifacts"]["structure_numbers"]
    assert artifact_path(run, good).is_file()
    secret = tmp_path / "secret.npy"
    np.save(secret, np.arange(3))
    (run / "artifacts" / "escape.npy").symlink_to(secret)
    bad = [
        "../config.json",
        "artifacts/../config.json",
        "artifacts/../../train-chat/artifacts/" + Path(good).name,
        str(secret),
        "artifacts/escape.npy",  # a symlink out of the run
        "config.json",
        "artifacts/",
        "",
        "artifacts/x\x00.npy",
    ]
    try:
        for rel in bad:
            with pytest.raises(ValueError):
                artifact_path(run, rel)
    finally:
        os.unlink(run / "artifacts" / "escape.npy")


def test_pickled_arrays_are_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "artifacts").mkdir(parents=True)
    np.save(run / "artifacts" / "numbers.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
    np.save(run / "artifacts" / "positions.npy", np.zeros((2, 3)))
    paths = {
        "structure_numbers": "artifacts/numbers.npy",
        "structure_positions": "artifacts/positions.npy",
    }
    with pytest.raises(ValueError, match="pickle"):
        load_structure(run, paths)
