"""MDState: slicing, concatenation, dtype and device round trips, validation."""

from __future__ import annotations

import numpy as np
import pytest

from labtwin.simulators.md import MDState
from labtwin.simulators.md.build import (
    clusters,
    icosahedron_13,
    lattice_positions,
    lj_fluid,
    truncated_octahedron_38,
)


def _mixed() -> MDState:
    return MDState.concatenate(
        [
            lj_fluid(32, 0.5, 1.0, seed=1),
            clusters([icosahedron_13(), truncated_octahedron_38()]),
            lj_fluid(64, 0.4, 2.0, seed=2),
        ]
    )


def test_concatenate_and_select_round_trip() -> None:
    state = _mixed()
    assert state.n_systems == 4
    assert list(state.atoms_per_system()) == [32, 13, 38, 64]
    assert list(state.periodic) == [True, False, False, True]
    parts = [state.select(k) for k in range(state.n_systems)]
    again = MDState.concatenate(parts)
    for name in ("positions", "velocities", "masses", "system_idx", "box", "periodic"):
        np.testing.assert_array_equal(getattr(again, name), getattr(state, name))
    sub = state[[3, 0]]  # reordered subset is renumbered
    assert list(sub.atoms_per_system()) == [64, 32]
    np.testing.assert_array_equal(sub.positions[:64], state.positions[-64:])


def test_dtype_and_warp_device_round_trip() -> None:
    state = _mixed()
    assert state.dtype == np.float32
    double = state.astype(np.float64)
    assert double.dtype == np.float64
    on_cpu = double.to("cpu")  # Warp arrays on the CPU device
    assert on_cpu.device == "cpu"
    assert on_cpu.dtype == np.float64
    assert on_cpu.select([1]).device == "cpu"
    back = on_cpu.numpy()
    np.testing.assert_array_equal(back.positions, double.positions)
    np.testing.assert_array_equal(back.periodic, double.periodic)


def test_validation_rejects_non_contiguous_systems() -> None:
    with pytest.raises(ValueError, match="non-decreasing"):
        MDState.from_arrays(np.zeros((3, 3)), [0, 1, 0], box=np.ones(3))
    with pytest.raises(ValueError, match="without gaps"):
        MDState.from_arrays(np.zeros((3, 3)), [0, 0, 2], box=np.ones(3))


def test_lattice_density_and_cluster_shapes() -> None:
    # FCC for 4 m^3 atoms: nearest neighbour distance a / sqrt(2) with a = L / m
    sites = lattice_positions(108, 3 * 1.6)
    d = np.linalg.norm(sites[1:] - sites[0], axis=1)
    assert d.min() == pytest.approx(1.6 / np.sqrt(2))
    state = lj_fluid(108, 0.8, temperature=1.3, n_systems=3)
    np.testing.assert_allclose(108 / state.volume(), 0.8, rtol=1e-6)
    # initial velocities: exactly the requested temperature with 3N - 3 dof, no net momentum
    v = state.velocities[:108].astype(np.float64)
    assert np.abs(v.sum(0)).max() < 1e-4
    assert (v**2).sum() / (3 * 108 - 3) == pytest.approx(1.3, rel=1e-5)
    assert len(truncated_octahedron_38()) == 38
