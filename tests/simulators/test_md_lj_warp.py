"""The batched Warp LJ engine against physics: a brute-force NumPy reference, finite
differences, energy conservation, exact Langevin results, reproducibility and batching,
and published cluster minima. Runs on Warp's CPU device (or CUDA where present)."""

from __future__ import annotations

import numpy as np
import pytest

from labtwin.simulators.md import MDState
from labtwin.simulators.md.build import (
    CLUSTER_GLOBAL_MINIMA,
    clusters,
    icosahedron_13,
    lj_fluid,
    random_cluster,
    truncated_octahedron_38,
)
from labtwin.simulators.md.lj_warp import WarpLJ, lj_energy_forces, quench_lj, run_lj
from labtwin.simulators.md.observables import lj_tail_energy, lj_tail_pressure


def _brute_force(positions: np.ndarray, box: np.ndarray | None, cutoff: float | None):
    """Energy, forces and virial of one system by an O(N^2) NumPy double loop."""
    d = positions[:, None, :] - positions[None, :, :]
    if box is not None:
        d -= box * np.round(d / box)
    r2 = (d**2).sum(-1)
    np.fill_diagonal(r2, np.inf)
    inside = r2 < (np.inf if cutoff is None else cutoff**2)
    inv6 = np.where(inside, 1.0 / r2**3, 0.0)
    energy = 0.5 * np.sum(4 * (inv6**2 - inv6))
    pair_virial = 24 * inv6 * (2 * inv6 - 1)
    forces = np.sum((pair_virial / r2)[..., None] * d, axis=1)
    return energy, forces, 0.5 * pair_virial.sum()


@pytest.fixture(scope="module")
def mixed_state() -> MDState:
    """Float64 batch: a 500-atom liquid (cell lists: 6 cells per edge), a 108-atom liquid
    (all-pairs search), a gas, and two clusters, thermalised a little so it is disordered."""
    rng = np.random.default_rng(3)
    state = MDState.concatenate(
        [
            lj_fluid(500, 0.8, 1.0, seed=1),
            lj_fluid(108, 0.75, 1.0, seed=2),
            lj_fluid(108, 0.05, 2.0, seed=3),
            clusters([icosahedron_13(), random_cluster(30, rng)]),
        ]
    ).astype(np.float64)
    return run_lj(state, 100, temperature=1.0, friction=1.0, sample_every=100).state


def test_engine_uses_cell_lists_and_all_pairs(mixed_state: MDState) -> None:
    engine = WarpLJ(mixed_state)
    n_cells = engine.n_cells.numpy()
    # cells at least (rc + skin) / 2 = 1.4 wide, at least 6 per edge, else all pairs
    assert (n_cells[0] == 6).all()  # 500 atoms at rho 0.8: L = 8.55
    assert (n_cells[1] == 0).all()  # 108 atoms at rho 0.75: L = 5.2, all pairs
    assert (n_cells[2] == 9).all()  # the gas: L = 12.9
    assert (n_cells[3:] == 0).all()  # clusters: all pairs
    # the shared lists' searches: every image of j in the box under 2 (rc + skin) = 5.6,
    # the nearest image for clusters
    from labtwin.simulators.neighbours._kernels import (
        SEARCH_CELLS,
        SEARCH_IMAGES,
        SEARCH_NEAREST,
    )

    assert engine.lists.search_host.tolist() == [
        SEARCH_CELLS,
        SEARCH_IMAGES,
        SEARCH_CELLS,
        SEARCH_NEAREST,
        SEARCH_NEAREST,
    ]


def test_energy_forces_match_brute_force(mixed_state: MDState) -> None:
    # float64 engine vs float64 NumPy: only summation order differs -> 1e-10 relative
    energy, forces, virial = lj_energy_forces(mixed_state, cutoff=2.5)
    start = mixed_state.system_start()
    for k in range(mixed_state.n_systems):
        a, b = start[k], start[k + 1]
        box = mixed_state.box[k] if mixed_state.periodic[k] else None
        e_ref, f_ref, w_ref = _brute_force(
            mixed_state.positions[a:b], box, 2.5 if box is not None else None
        )
        assert energy[k] == pytest.approx(e_ref, rel=1e-10, abs=1e-10)
        assert virial[k] == pytest.approx(w_ref, rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(forces[a:b], f_ref, rtol=0, atol=1e-10 * np.abs(f_ref).max())


def test_forces_are_minus_energy_gradient(mixed_state: MDState) -> None:
    # central differences with h = 1e-6 sigma in float64: truncation error ~h^2 |U'''| ~ 1e-9,
    # rounding ~1e-16 |U| / h ~ 1e-8 -> tolerance 1e-5 absolute on forces of order 1-100
    rng = np.random.default_rng(0)
    _, forces, _ = lj_energy_forces(mixed_state)
    h = 1e-6
    for atom in rng.choice(mixed_state.n_atoms, size=6, replace=False):
        system = mixed_state.system_idx[atom]
        for axis in range(3):
            shifted = []
            for sign in (1, -1):
                moved = mixed_state.astype(np.float64)
                moved.positions[atom, axis] += sign * h
                shifted.append(lj_energy_forces(moved)[0][system])
            numeric = -(shifted[0] - shifted[1]) / (2 * h)
            assert forces[atom, axis] == pytest.approx(numeric, abs=1e-5)


def test_tail_corrections_match_numerical_integrals() -> None:
    # U_tail = 2 pi rho int_rc^inf r^2 u(r) dr, P_tail = -(2/3) pi rho^2 int r^3 u'(r) dr
    from scipy.integrate import quad

    rc, rho = 2.5, 0.8
    u = quad(lambda r: r**2 * 4 * (r**-12 - r**-6), rc, np.inf)[0]
    du = quad(lambda r: r**3 * 4 * (-12 * r**-13 + 6 * r**-7), rc, np.inf)[0]
    assert lj_tail_energy(rho, rc) == pytest.approx(2 * np.pi * rho * u, rel=1e-8)
    assert lj_tail_pressure(rho, rc) == pytest.approx(-2 / 3 * np.pi * rho**2 * du, rel=1e-8)


def test_nve_energy_conservation() -> None:
    # Velocity Verlet conserves a shadow energy: the total energy fluctuates by O(dt^2) and
    # does not drift. Cut-and-shifted potential (continuous energy), 108 atoms, float32.
    state = lj_fluid(108, 0.8, 1.0, seed=1)
    state = run_lj(state, 200, temperature=1.0, friction=1.0, sample_every=100).state
    spread = {}
    for dt in (0.005, 0.0025):
        n_steps = int(round(5.0 / dt))  # 5 tau
        res = run_lj(state, n_steps, dt=dt, friction=0.0, sample_every=5, shift_energy=True)
        energy = res.series["total_energy"][:, 0]
        drift = np.polyfit(res.time, energy, 1)[0]
        # measured |drift| ~1e-5 epsilon/tau per particle; bound 2e-4 (kT per particle ~1)
        assert abs(drift) < 2e-4
        spread[dt] = energy.std()
    # measured ratio 4.1; O(dt^2) fluctuations -> 4, allow [3, 5.5] for statistics
    assert 3.0 < spread[0.005] / spread[0.0025] < 5.5
    assert spread[0.005] < 5e-4  # epsilon per particle


def test_batched_run_equals_systems_run_alone() -> None:
    # bit-for-bit: counter-based noise keyed per system, per-atom force sums in a fixed order
    state = MDState.concatenate(
        [
            lj_fluid(500, 0.8, 1.0, seed=1),  # cell-list path
            lj_fluid(64, 0.5, 1.5, seed=2),
            clusters([icosahedron_13()]),
        ]
    )
    temperature, seeds = np.array([1.0, 1.5, 0.3]), np.array([11, 12, 13])
    kw = dict(n_steps=100, friction=1.0, sample_every=20)
    batched = run_lj(state, temperature=temperature, seed=seeds, **kw)
    for k in range(state.n_systems):
        alone = run_lj(state.select(k), temperature=temperature[k], seed=[seeds[k]], **kw)
        np.testing.assert_array_equal(batched.state.select(k).positions, alone.state.positions)
        np.testing.assert_array_equal(batched.state.select(k).velocities, alone.state.velocities)
        np.testing.assert_array_equal(
            batched.series["pressure"][:, k], alone.series["pressure"][:, 0]
        )
    again = run_lj(state, temperature=temperature, seed=seeds, **kw)
    np.testing.assert_array_equal(again.state.positions, batched.state.positions)
    other = run_lj(state, temperature=temperature, seed=seeds + 100, **kw)
    assert not np.array_equal(other.state.positions, batched.state.positions)


def test_list_overflow_is_repaired_without_changing_the_trajectory() -> None:
    state = lj_fluid(500, 0.8, 1.0, seed=1)
    reference = run_lj(state, 40, seed=5, sample_every=20).state
    engine = WarpLJ(state)
    # rows just long enough for the longest first list: a later rebuild overflows, and its
    # chunk is redone from the positions of the chunk's last rebuild, which must give the
    # reference trajectory bit for bit
    engine.nbr_capacity = int(engine.nbr_count.numpy().max()) + 2
    engine._allocate_lists()
    engine.rebuild_all()
    first_capacity = engine.nbr_capacity
    engine.set_thermostat(1.0, 1.0, 0.005, 5)
    engine.advance(20, 0.005)
    engine.advance(20, 0.005)
    assert engine.nbr_capacity > first_capacity  # an overflow happened and was repaired
    np.testing.assert_array_equal(engine.state().positions, reference.positions)


def test_langevin_temperature_matches_target() -> None:
    # 8 x 108 atoms, 2000 samples: block standard error of the mean T ~0.3 %. BAOAB's
    # kinetic temperature at full steps has an O(dt^2) bias (~0.1 % at dt = 0.005), so
    # allow 4 standard errors plus 0.5 %.
    target = np.array([0.9, 1.0, 1.2, 1.5, 0.9, 1.0, 1.2, 1.5])
    state = lj_fluid(108, 0.7, target, n_systems=8, seed=4)
    res = run_lj(
        state, 2000, dt=0.005, temperature=target, friction=2.0, seed=1, n_equilibration=200
    )
    ratio = res.mean["temperature"] / target
    err = np.sqrt((res.stderr["temperature"] ** 2 / target**2).sum()) / len(target)
    assert abs(ratio.mean() - 1) < 4 * err + 0.005
    assert np.all(np.abs(ratio - 1) < 4 * res.stderr["temperature"] / target + 0.02)


def test_free_particle_diffusion_is_einstein() -> None:
    # 64 atoms 50 sigma apart with a 2.5 sigma cutoff never interact: exact Langevin result
    # D = T / (m gamma); MSD about the centre of mass is (1 - 1/N) 6 D t at t >> 1/gamma.
    # 5 MSD windows of 20 tau: standard error of D ~3 %, allow 4 standard errors.
    grid = np.stack(np.meshgrid(*[np.arange(4)] * 3, indexing="ij"), -1).reshape(-1, 3) * 50.0
    state = clusters([grid], dtype=np.float64)
    temperature, gamma = 1.5, 2.0
    res = run_lj(
        state,
        20000,
        dt=0.005,
        temperature=temperature,
        friction=gamma,
        seed=2,
        sample_every=20,
        msd_window=200,
        cluster_cutoff=2.5,
    )
    expected = temperature / gamma * (1 - 1 / 64)
    d, err = res.mean["diffusion"][0], res.stderr["diffusion"][0]
    assert abs(d - expected) < 4 * err
    assert err < 0.1 * expected
    # free particles: BAOAB samples the Maxwell-Boltzmann distribution exactly
    assert abs(res.mean["temperature"][0] - temperature) < 4 * res.stderr["temperature"][0]


def test_liquid_structure_rdf() -> None:
    # g(r) of the dense LJ liquid (T* = 1, rho* = 0.8): excluded core, first peak at
    # ~1.1 sigma of height ~2.6, and g -> 1 at long range (block errors ~0.02)
    state = lj_fluid(500, 0.8, 1.0, seed=9)
    res = run_lj(state, 600, temperature=1.0, n_equilibration=400, rdf_bins=80, sample_every=20)
    r, g = res.rdf_r, res.rdf[0]
    assert np.all(g[r < 0.85] < 0.01)
    peak = r[np.argmax(g)]
    assert 1.05 < peak < 1.15
    assert 2.2 < g.max() < 3.2
    tail = (r > 3.2) & (r < 4.2)
    assert abs(g[tail].mean() - 1) < 0.05


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-6), (np.float32, 2e-4)])
def test_quench_finds_published_cluster_minima(dtype: type, tol: float) -> None:
    # Cambridge Cluster Database energies (6 decimals). float64: FIRE to |F| < 1e-7 gives
    # the energy to ~1e-12, so 1e-6 is the table's rounding; float32 sums of ~700 pair terms
    # carry ~1e-5 relative rounding -> 2e-4 absolute.
    rng = np.random.default_rng(0)
    starts = [icosahedron_13(), truncated_octahedron_38()]
    starts += [random_cluster(13, rng) for _ in range(6)]
    result = quench_lj(clusters(starts, dtype=dtype))
    assert result.converged.all()
    assert result.energy[0] == pytest.approx(CLUSTER_GLOBAL_MINIMA[13], abs=tol)
    assert result.energy[1] == pytest.approx(CLUSTER_GLOBAL_MINIMA[38], abs=tol)
    # random starts land in local minima, never below the global minimum
    assert np.all(result.energy[2:] > CLUSTER_GLOBAL_MINIMA[13] - tol)


def test_cutoff_larger_than_half_box_is_rejected() -> None:
    with pytest.raises(ValueError, match="half the shortest edge"):
        WarpLJ(lj_fluid(64, 0.8))


def test_engine_is_reused_across_calls_with_identical_results() -> None:
    # a second run of the same layout takes the kept engine (no new arrays, no new recording)
    # and must give what a new engine gives, bit for bit, whatever ran on it before
    from labtwin.simulators.md import lj_warp

    first = lj_fluid(256, 0.8, 1.0, n_systems=2, seed=1)
    second = lj_fluid(256, 0.8, 1.5, n_systems=2, seed=2)
    kw = dict(n_steps=60, temperature=1.2, friction=1.0, seed=3, sample_every=20)
    fresh = WarpLJ(second)
    fresh.set_thermostat(1.2, 1.0, 0.005, 3)
    for _ in range(3):
        fresh.advance(20, 0.005)
    lj_warp.run_lj(first, **kw)  # leaves a kept engine of this layout
    engine = lj_warp.checkout_engine(second)
    arrays = (engine.x, engine.nbr)
    lj_warp.checkin_engine(engine)
    reused = lj_warp.run_lj(second, **kw)
    again = lj_warp.checkout_engine(second)
    assert again is engine and again.x is arrays[0] and again.nbr is arrays[1]
    lj_warp.checkin_engine(again)
    np.testing.assert_array_equal(reused.state.positions, fresh.state().positions)
    np.testing.assert_array_equal(reused.state.velocities, fresh.state().velocities)
    with pytest.raises(ValueError, match="layout"):
        engine.load(lj_fluid(108, 0.8, 1.0, seed=1))
