"""The Warp LJ engine on CUDA: same physics as on the CPU, deterministic with graph replay.
Deselected by default (marker ``gpu``); ``bench/gpu_check.sh`` runs them."""

from __future__ import annotations

import numpy as np
import pytest

from labtwin.simulators.md import MDState
from labtwin.simulators.md.build import clusters, icosahedron_13, lj_fluid
from labtwin.simulators.md.lj_warp import default_device, lj_energy_forces, run_lj

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def _needs_cuda() -> None:
    if default_device() != "cuda":
        pytest.skip("no CUDA device visible to Warp")


def _batch() -> MDState:
    return MDState.concatenate(
        [
            lj_fluid(500, 0.8, 1.0, seed=1),  # cell lists
            lj_fluid(108, 0.8, 1.0, n_systems=30, seed=2),
            clusters([icosahedron_13()]),
        ]
    )


def test_cuda_forces_match_cpu_in_float64() -> None:
    # same algorithm, float64 on both devices: only fused multiply-adds differ -> 1e-10
    state = _batch().astype(np.float64)
    e_cpu, f_cpu, w_cpu = lj_energy_forces(state, device="cpu")
    e_gpu, f_gpu, w_gpu = lj_energy_forces(state, device="cuda")
    np.testing.assert_allclose(e_gpu, e_cpu, rtol=1e-10)
    np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-10)
    np.testing.assert_allclose(f_gpu, f_cpu, rtol=0, atol=1e-10 * np.abs(f_cpu).max())


def test_cuda_batched_equals_alone_and_is_reproducible() -> None:
    # graph-captured steps, cell lists built with atomics: rows are sorted, so bit-for-bit
    state = _batch()
    seeds = np.arange(state.n_systems) + 7
    kw = dict(n_steps=200, temperature=1.0, friction=1.0, sample_every=50, device="cuda")
    batched = run_lj(state, seed=seeds, **kw)
    again = run_lj(state, seed=seeds, **kw)
    np.testing.assert_array_equal(again.state.positions, batched.state.positions)
    for k in (0, 5, state.n_systems - 1):
        alone = run_lj(state.select(k), seed=[seeds[k]], **kw)
        np.testing.assert_array_equal(batched.state.select(k).positions, alone.state.positions)


def test_cuda_langevin_temperature() -> None:
    # 256 systems x 108 atoms: standard error of the batch-mean T ~0.05 %; BAOAB O(dt^2)
    # kinetic bias ~0.1 % -> allow 0.5 %
    state = lj_fluid(108, 0.8, 1.0, n_systems=256, seed=3)
    res = run_lj(state, 2000, temperature=1.0, friction=1.0, n_equilibration=500, device="cuda")
    assert abs(res.mean["temperature"].mean() - 1.0) < 0.005


def test_cuda_overflow_repair_and_engine_reuse_keep_the_trajectory() -> None:
    # full lists with sorted rows on CUDA: a redone chunk and a reloaded engine both give the
    # reference trajectory bit for bit
    from labtwin.simulators.md.lj_warp import WarpLJ, checkin_engine, checkout_engine

    state = lj_fluid(500, 0.8, 1.0, seed=1)
    kw = dict(n_steps=40, seed=5, sample_every=20, device="cuda")
    reference = run_lj(state, **kw).state
    engine = WarpLJ(state, device="cuda")
    assert not engine.half_list
    engine.nbr_capacity = int(engine.nbr_count.numpy().max()) + 2
    engine._allocate_lists()
    engine.rebuild_all()
    engine.set_thermostat(1.0, 1.0, 0.005, 5)
    engine.advance(20, 0.005)
    engine.advance(20, 0.005)
    np.testing.assert_array_equal(engine.state().positions, reference.positions)
    kept = checkout_engine(state, "cuda")
    checkin_engine(kept)
    assert checkout_engine(state, "cuda") is kept  # kept and reloaded, not rebuilt
    checkin_engine(kept)
    np.testing.assert_array_equal(run_lj(state, **kw).state.positions, reference.positions)
