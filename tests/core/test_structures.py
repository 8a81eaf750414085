"""The structure artifact convention: arrays in, the same structure out, bad shapes refused."""

import numpy as np
import pytest

from labtwin.structures import (
    BONDS,
    CELL,
    MAX_FRAMES,
    POSITIONS,
    read_structure,
    structure_artifacts,
    subsample_frames,
)


def test_a_molecule_round_trips_with_bonds_of_order_one_by_default():
    numbers = [8, 1, 1]
    positions = [[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]]
    arrays = structure_artifacts(numbers, positions, bonds=[[0, 1], [0, 2]])
    assert arrays[POSITIONS].shape == (3, 3) and CELL not in arrays
    structure = read_structure(arrays)
    assert structure.n_atoms == 3 and structure.n_frames == 1 and not structure.periodic
    assert structure.bonds.tolist() == [[0, 1, 1], [0, 2, 1]]
    np.testing.assert_array_equal(structure.frame()[0], np.asarray(positions, float))


def test_a_trajectory_is_subsampled_keeping_its_first_and_last_frames():
    frames = np.arange(120 * 2 * 3, dtype=float).reshape(120, 2, 3)
    cells = np.repeat(np.eye(3)[None] * 5.0, 120, axis=0) * np.linspace(1, 2, 120)[:, None, None]
    arrays = structure_artifacts([0, 0], frames, cell=cells)
    assert arrays[POSITIONS].shape == (MAX_FRAMES, 2, 3)
    assert arrays[CELL].shape == (MAX_FRAMES, 3, 3)
    np.testing.assert_array_equal(arrays[POSITIONS][0], frames[0])
    np.testing.assert_array_equal(arrays[POSITIONS][-1], frames[-1])
    positions, cell = read_structure(arrays).frame(-1)
    np.testing.assert_allclose(cell, cells[-1])
    assert subsample_frames(frames[:3]).shape[0] == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"positions": np.zeros((3, 2))}, "positions must be"),
        ({"positions": np.full((2, 3), np.nan)}, "finite"),
        ({"cell": np.eye(2)}, "cell must be"),
        ({"bonds": [[0, 5]]}, "bond indices"),
        ({"numbers": [1, 200]}, "atomic numbers"),
    ],
)
def test_bad_arrays_are_refused_with_a_message(kwargs, message):
    args = {"numbers": [1, 1], "positions": np.zeros((2, 3)), **kwargs}
    with pytest.raises(ValueError, match=message):
        structure_artifacts(**args)


def test_artifacts_without_a_structure_are_refused():
    with pytest.raises(KeyError, match="no structure"):
        read_structure({BONDS: np.zeros((0, 3))})
