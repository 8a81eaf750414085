"""``render_mode="rgb_array"``: one frame size per env, the campaign beside what the lab
last measured (a structure, a time course), frames that change when the state does."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import labtwin
from labtwin import Experiment, LabEnv, Measurement, ObservableSpec, Task, Value, knob
from labtwin.campaign import Record
from labtwin.frames import (
    FRAME_SIZE,
    NotePanel,
    SeriesPanel,
    StructurePanel,
    lab_frame,
    structure_panel,
)
from labtwin.structures import read_structure, structure_artifacts
from labtwin.vector import VectorLabEnv

SHAPE = (FRAME_SIZE[1], FRAME_SIZE[0], 3)
HALF = FRAME_SIZE[0] // 2


def right(frame: np.ndarray) -> np.ndarray:
    return frame[:, HALF:]


def drawn_pixels(image: np.ndarray) -> int:
    """Pixels that are not the white background."""
    return int((image.min(axis=2) < 250).sum())


class Dimer(Experiment):
    bond_length: float = knob(0.7, 3.0, unit="Å", description="distance between the two atoms")


class DimerLab(Task):
    """A lab of a third party: records a two-atom structure in a periodic cell and opts in to
    the structure panel."""

    id = "Dimer-v0"
    experiment_model = Dimer
    observables = (ObservableSpec("bond_length", "Å", "the distance set"),)
    default_budget = 4
    score_range: ClassVar[tuple[float, float]] = (0.0, 3.0)

    def simulate(self, experiments, conditions, rngs):
        out = []
        for e in experiments:
            positions = np.array([[2.0, 2.0, 2.0], [2.0 + e.bond_length, 2.0, 2.0]])
            artifacts = structure_artifacts([8, 8], positions, 6.0 * np.eye(3), [[0, 1, 2]])
            value = {"bond_length": Value(e.bond_length, "Å")}
            out.append(Measurement("ok", value, artifacts=artifacts))
        return out

    def reward(self, measurement, conditions):
        return measurement["bond_length"]

    def frame_panel(self, records, conditions):
        return structure_panel(records)


def record(step: int, measurement: Measurement, score: float | None = 0.5) -> Record:
    return Record(0, step, "experiment", measurement, score, 0.0)


def dimer(length: float) -> Measurement:
    (m,) = DimerLab().measure([{"bond_length": length}])
    return m


def test_a_campaign_keeps_one_frame_size_and_every_step_changes_the_frame() -> None:
    env = LabEnv(labtwin.load_task("BatchReactor-v1", budget=3), render_mode="rgb_array")
    env.reset(seed=0)
    frames = [env.render()]
    rng = np.random.default_rng(0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        frames.append(env.render())
    assert all(f.shape == SHAPE and f.dtype == np.uint8 for f in frames)
    assert all(drawn_pixels(f) > 1000 for f in frames)
    for before, after in zip(frames, frames[1:]):
        assert not np.array_equal(before, after)
    assert LabEnv(labtwin.load_task("BatchReactor-v1")).render() is None  # no render mode


def test_reactor_frames_show_the_last_measured_time_course() -> None:
    env = LabEnv(labtwin.load_task("BatchReactor-v1", budget=4), render_mode="rgb_array")
    env.reset(seed=1)
    assert isinstance(env.task.frame_panel([], {}), NotePanel)
    placeholder = env.render()
    env.step(np.zeros(env.action_space.shape))
    _, _, _, _, info = env.step(np.full(env.action_space.shape, 0.5))
    panel = env.task.frame_panel(env.campaign.history, env.campaign.conditions)
    assert isinstance(panel, SeriesPanel) and panel.point == 1  # the second experiment
    course = info["measurement"].artifacts["time_course"]
    np.testing.assert_array_equal(panel.x, course[:, 0])
    np.testing.assert_array_equal(panel.ys, course[:, 1:])
    assert panel.labels == ("A", "B", "C", "D")
    assert drawn_pixels(right(env.render())) > drawn_pixels(right(placeholder)) + 1000


def test_labs_without_a_panel_draw_the_campaign_alone() -> None:
    task = labtwin.load_task("ArrheniusFit-v1", budget=3)
    env = LabEnv(task, render_mode="rgb_array")
    env.reset(seed=0)
    env.step(np.zeros(env.action_space.shape))
    assert task.frame_panel(env.campaign.history, env.campaign.conditions) is None
    frame = env.render()
    assert frame.shape == SHAPE
    assert drawn_pixels(frame[:, HALF - 40 : HALF + 40]) > 100  # one plot across the middle


def test_the_structure_panel_shows_the_last_experiment_with_a_structure() -> None:
    a, b = dimer(1.0), dimer(2.5)
    invalid = Measurement.invalid("no")
    assert isinstance(structure_panel([]), NotePanel)
    assert isinstance(structure_panel([record(0, invalid, 0.0)]), NotePanel)
    first = structure_panel([record(0, a), record(1, invalid, 0.0)])
    assert isinstance(first, StructurePanel) and first.point == 0
    np.testing.assert_array_equal(first.structure.positions, read_structure(a.artifacts).positions)
    analysis = Record(0, 3, "analysis", Measurement("ok"), None, 0.0)
    second = structure_panel([record(0, a), record(1, invalid, 0.0), record(2, b), analysis])
    assert second.point == 2
    frames = [lab_frame("Dimer-v0", [(0.5, "ok")] * 3, 4, p) for p in (first, second, first)]
    assert not np.array_equal(right(frames[0]), right(frames[1]))  # another structure
    np.testing.assert_array_equal(frames[0], frames[2])  # the same structure, the same image


def test_structure_drawing_has_atoms_bonds_and_cell_edges() -> None:
    positions = np.array([[1.0, 1.0, 1.0], [2.2, 1.0, 1.0]])
    bare = read_structure(structure_artifacts([6, 8], positions))
    boxed = read_structure(structure_artifacts([6, 8], positions, 4.0 * np.eye(3), [[0, 1, 2]]))
    lj = read_structure(
        structure_artifacts(np.zeros(13), np.random.default_rng(0).normal(size=(13, 3)))
    )
    images = [right(lab_frame("x", [], 3, StructurePanel(s))) for s in (bare, boxed, lj)]
    assert all(drawn_pixels(image) > 500 for image in images)
    assert drawn_pixels(images[1]) != drawn_pixels(images[0])  # the cell's edges
    rgb = images[0].astype(int)
    red = (rgb[..., 0] > 200) & (rgb[..., 0] - rgb[..., 1] > 80) & (rgb[..., 1] == rgb[..., 2])
    assert red.sum() > 50  # oxygen is drawn red (lightened with depth)


def test_a_third_party_lab_opts_in_and_its_frames_follow_its_structures() -> None:
    env = LabEnv(DimerLab(), render_mode="rgb_array")
    env.reset(seed=0)
    frames = [env.render()]
    for length in (1.0, 1.0, 2.8):
        env.step({"bond_length": length})
        frames.append(env.render())
    assert {f.shape for f in frames} == {SHAPE}
    assert not np.array_equal(right(frames[0]), right(frames[1]))  # note -> structure
    assert not np.array_equal(right(frames[2]), right(frames[3]))  # a longer bond
    # same structure, same panel (the ring moves to the repeat in the campaign plot)
    np.testing.assert_array_equal(right(frames[1])[40:], right(frames[2])[40:])


def test_vector_env_renders_one_frame_per_instance() -> None:
    venv = VectorLabEnv(labtwin.load_task("BatchReactor-v1", budget=3), 2, render_mode="rgb_array")
    venv.reset(seed=0)
    venv.step(np.zeros((2, *venv.single_action_space.shape)))
    frames = venv.render()
    assert len(frames) == 2 and all(f.shape == SHAPE for f in frames)
    assert not np.array_equal(frames[0], frames[1])  # each its own campaign and title


def test_frames_record_as_video(tmp_path) -> None:
    pytest.importorskip("moviepy")
    from gymnasium.wrappers import RecordVideo

    env = RecordVideo(
        LabEnv(DimerLab(), render_mode="rgb_array"),
        str(tmp_path / "videos"),
        episode_trigger=lambda _: True,
        disable_logger=True,
    )
    env.reset(seed=0)
    done = False
    length = 0.8
    while not done:
        _, _, done, _, _ = env.step({"bond_length": length})
        length += 0.5
    env.close()
    (video,) = (tmp_path / "videos").glob("*.mp4")
    assert video.stat().st_size > 1000


def test_the_concepts_page_structure_example_runs() -> None:
    """docs/concepts.md's structure example (what a third-party lab writes) runs as written."""
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "concepts.md").read_text()
    (code,) = [
        b
        for b in re.findall(r"```python\n(.*?)```", page, flags=re.S)
        if "structure_artifacts(" in b
    ]
    namespace: dict = {}
    exec(compile(code, "concepts.md", "exec"), namespace)
    assert namespace["structure"].n_atoms == 3
    panel = namespace["frame_panel"](None, [record(0, dimer(1.2))], {})
    assert isinstance(panel, StructurePanel)
