"""The CPU half-list force loop (C++ over raw pointers) against the Warp-language kernel it
replaced, bit for bit, and the energy-free steps of ``WarpLJ.advance`` against full ones.

The reference kernel below is the pure-Warp ``lj_forces_half`` the engine used before the
row loop became a native snippet; the snippet (pair terms in 4-lane vectors, then the sums
in row order) must reproduce its forces, energies and virials exactly (same operations in
the same order), in float32 and float64, on the all-pairs path (small boxes), the cell-list
path (large ones) and rows longer than one block of the loop.
"""

import numpy as np
import pytest

from labtwin.simulators.md._lj_kernels import ROW_BLOCK
from labtwin.simulators.md.build import clusters, lj_fluid, random_cluster
from labtwin.simulators.md.lj_warp import WarpLJ, _warp


@pytest.fixture(scope="module")
def wp():
    return _warp()


def _reference_kernel(wp, scalar):
    vec3 = wp.types.vector(3, scalar)

    def half(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        image_shift: wp.array2d(dtype=vec3),
        cutoff2: wp.array(dtype=scalar),
        energy_shift: wp.array(dtype=scalar),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_count: wp.array(dtype=wp.int32),
        f: wp.array(dtype=vec3),
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=scalar),
    ):
        i = wp.tid()
        s = atom_sys[i]
        xi = xw[i]
        rc2 = cutoff2[s]
        shift = energy_shift[s]
        fi = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        e = scalar(0.0)
        w = scalar(0.0)
        for k in range(nbr_count[i]):
            entry = nbr[i, k]
            j = entry >> 5
            d = xi - xw[j] - image_shift[s, entry & 31]
            r2 = wp.dot(d, d)
            inside = wp.where(r2 < rc2, scalar(1.0), scalar(0.0))
            inv2 = scalar(1.0) / r2
            inv6 = inv2 * inv2 * inv2 * inside
            pair_virial = scalar(24.0) * inv6 * (scalar(2.0) * inv6 - scalar(1.0))
            fij = (pair_virial * inv2) * d
            fi = fi + fij
            f[j] = f[j] - fij
            e = e + scalar(4.0) * inv6 * (inv6 - scalar(1.0)) - shift * inside
            w = w + pair_virial
        f[i] = f[i] + fi
        atom_energy[i] = e
        atom_virial[i] = w

    return wp.kernel(enable_backward=False, module=f"test_md_force_row_{scalar.__name__}")(half)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    ("n_atoms", "cutoff"),
    # all pairs; cell lists (6 cells an edge); rows longer than a block of the CPU loop
    [(108, 2.5), (864, 2.5), (864, 3.5)],
)
def test_native_row_loop_equals_warp_kernel(wp, dtype, n_atoms, cutoff) -> None:
    state = lj_fluid(n_atoms, 0.8, 1.0, n_systems=2, seed=5, dtype=dtype)
    engine = WarpLJ(state, cutoff=cutoff, skin=0.3, device="cpu", shift_energy=True)
    assert engine.half_list
    counts = engine.nbr_count.numpy()
    assert (counts % 4 != 0).any()  # rows that end part-way through a group of lanes
    if cutoff > 3.0:
        assert counts.max() > ROW_BLOCK  # rows of two blocks and more
    engine.set_thermostat(1.0, 0.0, 0.005, seed=0)
    engine.advance(30, 0.005)  # rows of a state that has moved since its lists were built
    args = [
        engine.xw,
        engine.atom_sys,
        engine.image_shift,
        engine.cutoff2,
        engine.energy_shift,
        engine.nbr,
        engine.nbr_count,
    ]
    results = {}
    for name in ("native", "reference"):
        f = wp.zeros_like(engine.f)
        energy = wp.zeros_like(engine.atom_energy)
        virial = wp.zeros_like(engine.atom_virial)
        if name == "native":
            kernel, extra = engine.kernels.lj_forces_half, [1]
        else:
            kernel, extra = _reference_kernel(wp, engine.scalar), []
        wp.launch(kernel, engine.n_atoms, [*args, f, energy, virial, *extra], device="cpu")
        results[name] = (f.numpy(), energy.numpy(), virial.numpy())
    for got, want in zip(results["native"], results["reference"]):
        assert np.array_equal(got, want)
    assert np.abs(results["native"][0]).max() > 1.0  # real forces, not zeros


def test_steps_without_energies_change_nothing(wp) -> None:
    """``advance`` skips per-atom energies on all but its last step: the trajectory equals
    one advanced a step at a time (every step with energies), and the sums read after the
    chunk are those of its end state, recomputed from scratch by a new engine."""
    state = lj_fluid(256, 0.8, 1.0, n_systems=2, seed=2)
    chunked = WarpLJ(state, cutoff=2.5, skin=0.3, device="cpu")
    stepped = WarpLJ(state, cutoff=2.5, skin=0.3, device="cpu")
    for engine in (chunked, stepped):
        engine.set_thermostat(1.0, 0.0, 0.005, seed=0)
    chunked.advance(40, 0.005)
    for _ in range(40):
        stepped.advance(1, 0.005)
    assert np.array_equal(chunked.x.numpy(), stepped.x.numpy())
    assert np.array_equal(chunked.v.numpy(), stepped.v.numpy())
    sums = chunked.energies()
    for name, value in stepped.energies().items():
        assert np.array_equal(sums[name], value), name
    fresh = WarpLJ(chunked.state(), cutoff=2.5, skin=0.3, device="cpu")
    fresh_sums = fresh.energies()
    # a new engine's lists are built at these positions, so rows (and the summation order
    # of a pair's atoms) differ; the sums agree to float32 round-off of ~1e3 terms
    for name in ("potential", "virial"):
        np.testing.assert_allclose(sums[name], fresh_sums[name], rtol=1e-5)
    assert np.abs(sums["potential"]).min() > 100.0


def test_cluster_chunk_of_zero_steps_is_a_no_op(wp) -> None:
    rng = np.random.default_rng(1)
    state = clusters([random_cluster(13, rng), random_cluster(19, rng)])
    engine = WarpLJ(state, device="cpu")
    engine.set_thermostat(0.5, 0.0, 0.005, seed=0)
    before = engine.x.numpy().copy(), engine.energies()
    engine.advance(0, 0.005)
    assert np.array_equal(engine.x.numpy(), before[0])
    for name, value in engine.energies().items():
        assert np.array_equal(value, before[1][name])


def test_state_read_back_keeps_species(wp) -> None:
    fluid = lj_fluid(108, 0.8, 1.0, n_systems=2, seed=4)
    numbers = np.arange(fluid.n_atoms, dtype=np.int32) % 3 + 18
    state = fluid.with_arrays(numbers=numbers)
    engine = WarpLJ(state, cutoff=2.5, device="cpu")
    assert np.array_equal(engine.state().numbers, numbers)
    engine.load(fluid)  # a state without species: none read back
    assert engine.state().numbers is None
