"""The batched adaptive kinetics engine against analytic solutions, an independent
integrator (scipy's LSODA) and conservation of mass; batch independence, determinism,
sample times and failures."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from labtwin.simulators.kinetics import (
    GAS_CONSTANT,
    Reaction,
    ReactionNetwork,
    arrhenius,
    consecutive_first_order,
    integrate,
    integrate_stages,
)
from labtwin.simulators.kinetics.network import INTEGRATION_ERROR
from labtwin.simulators.kinetics.reference import solve_stages

ABC = ReactionNetwork(("A", "B", "C"), (Reaction({"A": 1}, {"B": 1}), Reaction({"B": 1}, {"C": 1})))
ABCD = ReactionNetwork(
    ("A", "B", "C", "D"),
    (Reaction({"A": 1}, {"B": 1}), Reaction({"B": 1}, {"C": 1}), Reaction({"A": 2}, {"D": 1})),
)
F64 = dict(dtype=torch.float64)


def _batch(k1, k2, a0, t, k3=None):
    n = len(k1)
    species = 3 if k3 is None else 4
    c0 = torch.zeros(n, species, **F64)
    c0[:, 0] = torch.tensor(a0, **F64)
    ks = [k1, k2] + ([] if k3 is None else [k3])
    return c0, torch.tensor(np.stack(ks, axis=1), **F64), torch.tensor(t, **F64)


def _lab_like(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n reactors of the labs' network at the labs' conditions: 300-380 K, 1-180 min
    (log-uniform), 0.1-2 mol/L, 0-5 mol% catalyst, the nominal kinetics with
    log-normal prefactors of spread 0.6 (twice the labs' default)."""
    rng = np.random.default_rng(seed)
    temperature = rng.uniform(300.0, 380.0, n)
    minutes = np.exp(rng.uniform(0.0, np.log(180.0), n))
    feed, loading = rng.uniform(0.1, 2.0, n), rng.uniform(0.0, 5.0, n)
    prefactor = np.array([1e8, 1e10, 2e5]) * np.exp(0.6 * rng.standard_normal((n, 3)))
    energy = np.array([60e3, 80e3, 45e3])
    k = prefactor * np.exp(-energy / (GAS_CONSTANT * temperature[:, None]))
    k[:, 0] *= 1.0 + 0.5 * loading
    c0 = torch.zeros(n, 4, **F64)
    c0[:, 0] = torch.tensor(feed, **F64)
    return c0, torch.tensor(k, **F64), torch.tensor(minutes, **F64)


def test_matches_analytic_consecutive_first_order() -> None:
    """A -> B -> C over a grid of rate constants and times wider than the labs reach:
    k1 from 1e-3 to 5 /min, k2 from 1e-5 to 0.5 /min (k1 / k2 up to 5e5, and k2 >> k1),
    reaction times 1 to 180 min (k1 t up to 900), plus k1 == k2, at all 41 samples.

    Measured at the default tolerances (rtol 1e-9, atol 1e-12 mol/L): worst error 7.6e-11
    of the feed, asserted at the stated INTEGRATION_ERROR (1e-9); worst relative error
    1.2e-8 where the exact concentration is at least 1e-4 of the feed, asserted at 1e-7
    (below that floor the absolute tolerance governs). The RK4 this engine replaced
    (1000 steps a run) was at 5.1e-7 of the feed and 7.8e-4 relative on the same grid.
    """
    k1s, k2s = np.logspace(-3, np.log10(5.0), 9), np.logspace(-5, np.log10(0.5), 9)
    k1, k2, t = (x.ravel() for x in np.meshgrid(k1s, k2s, [1.0, 10.0, 60.0, 180.0]))
    k1, k2, t = np.append(k1, [0.3, 0.05]), np.append(k2, [0.3, 0.05]), np.append(t, [20.0, 90.0])
    a0 = np.random.default_rng(0).uniform(0.1, 2.0, len(k1))
    course = integrate(ABC, *_batch(k1, k2, a0, t))
    assert not course.failed.any()
    times = course.times.numpy()
    exact = np.stack(consecutive_first_order(a0[:, None], k1[:, None], k2[:, None], times), -1)
    error = np.abs(course.concentrations.numpy() - exact)
    assert error.max() <= INTEGRATION_ERROR * a0.max()
    np.testing.assert_array_less(error / a0[:, None, None], INTEGRATION_ERROR)
    resolved = exact >= 1e-4 * a0[:, None, None]
    assert (error[resolved] / exact[resolved]).max() < 1e-7
    torch.testing.assert_close(course.final, course.concentrations[:, -1], rtol=0, atol=0)


def test_side_reaction_matches_lsoda_and_conserves_mass() -> None:
    """A -> B -> C with 2A -> D against scipy's LSODA at rtol 1e-10.

    Agreement to INTEGRATION_ERROR (1e-9 of the feed; the reference is good to ~1e-10).
    Mass balance A + B + C + 2D = A0 holds to round-off (Runge-Kutta keeps linear
    invariants), asserted at 1e-12 over at most a few hundred steps.
    """
    k1, k2, k3 = np.array([0.2, 1.5]), np.array([0.02, 0.3]), np.array([0.5, 0.05])
    a0, t = np.array([1.5, 0.3]), np.array([40.0, 10.0])
    course = integrate(ABCD, *_batch(k1, k2, a0, t, k3))
    final = course.final.numpy()
    for i in range(2):

        def rhs(_, c, i=i):
            a, b = c[0], c[1]
            r1, r2, r3 = k1[i] * a, k2[i] * b, k3[i] * a * a
            return [-r1 - 2 * r3, r1 - r2, r2, r3]

        ref = solve_ivp(rhs, (0, t[i]), [a0[i], 0, 0, 0], method="LSODA", rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(final[i], ref.y[:, -1], atol=INTEGRATION_ERROR * a0[i])
    c = course.concentrations.numpy()
    balance = c[..., 0] + c[..., 1] + c[..., 2] + 2 * c[..., 3]
    np.testing.assert_allclose(balance, np.broadcast_to(a0[:, None], balance.shape), rtol=1e-12)


def test_labs_network_matches_the_lsoda_reference() -> None:
    """The labs' network at lab-like conditions (wider kinetics spread than the labs draw)
    against :func:`~labtwin.simulators.kinetics.reference.solve_stages` (LSODA, rtol
    1e-10, its own analytic Jacobian): final concentrations to INTEGRATION_ERROR of the
    feed (measured worst 1e-10, the reference's own error)."""
    c0, k, t_end = _lab_like(16, seed=3)
    final = integrate(ABCD, c0, k, t_end).final.numpy()
    for i in range(len(final)):
        ref = solve_stages(ABCD, c0[i].numpy(), [k[i].numpy()], [float(t_end[i])])
        np.testing.assert_allclose(final[i], ref, rtol=0, atol=INTEGRATION_ERROR * float(c0[i, 0]))


def test_a_generic_network_matches_lsoda() -> None:
    """Any mass-action network, not only the labs': A + B <-> C, 2C -> D, C + B -> E with
    different feeds of A and B, through a two-stage programme, against LSODA at rtol 1e-10
    to INTEGRATION_ERROR of the total feed."""
    network = ReactionNetwork(
        ("A", "B", "C", "D", "E"),
        (
            Reaction({"A": 1, "B": 1}, {"C": 1}),
            Reaction({"C": 1}, {"A": 1, "B": 1}),
            Reaction({"C": 2}, {"D": 1}),
            Reaction({"C": 1, "B": 1}, {"E": 1}),
        ),
    )
    c0 = torch.tensor([[1.0, 0.7, 0.0, 0.0, 0.0], [0.2, 1.5, 0.1, 0.0, 0.0]], **F64)
    k = torch.tensor(
        [
            [[2.0, 0.1, 0.5, 0.3], [0.5, 1.0, 0.1, 0.05]],
            [[0.3, 0.02, 1.0, 2.0], [3.0, 0.0, 0.0, 0.1]],
        ],
        **F64,
    )
    durations = torch.tensor([[5.0, 30.0], [12.0, 0.0]], **F64)
    course = integrate_stages(network, c0, k, durations)
    for i in range(2):
        ref = solve_stages(network, c0[i].numpy(), k[i].numpy(), durations[i].numpy())
        atol = INTEGRATION_ERROR * float(c0[i].sum())
        np.testing.assert_allclose(course.final[i].numpy(), ref, rtol=0, atol=atol)


def test_batched_equals_one_at_a_time_exactly() -> None:
    """Each reactor is one thread that reads only its own inputs, with its own step
    control, so its result is bit for bit the same in any batch (asserted exactly)."""
    c0, k, t_end = _lab_like(12, seed=1)
    together = integrate(ABCD, c0, k, t_end)
    for i in range(12):
        alone = integrate(ABCD, c0[i : i + 1], k[i : i + 1], t_end[i : i + 1])
        assert torch.equal(alone.concentrations[0], together.concentrations[i])
        assert torch.equal(alone.times[0], together.times[i])
        assert alone.steps[0] == together.steps[i]
    reordered = integrate(ABCD, c0.flip(0), k.flip(0), t_end.flip(0))
    assert torch.equal(reordered.concentrations.flip(0), together.concentrations)


def test_same_input_gives_the_same_output() -> None:
    c0, k, t_end = _lab_like(64, seed=2)
    first, second = integrate(ABCD, c0, k, t_end), integrate(ABCD, c0, k, t_end)
    assert torch.equal(first.concentrations, second.concentrations)
    assert torch.equal(first.steps, second.steps) and torch.equal(first.times, second.times)


def test_steps_land_on_the_sample_times() -> None:
    """Samples lie at t_end * j / (n_samples - 1), the last at t_end exactly; a zero
    reaction time keeps the feed exactly; fewer samples give the same final state to the
    integrator's accuracy (the sample times only shorten steps)."""
    c0, k, t_end = _lab_like(8, seed=4)
    t_end[0] = 0.0
    course = integrate(ABCD, c0, k, t_end, n_samples=11)
    fractions = torch.arange(11, **F64) / 10
    assert torch.equal(course.times, t_end[:, None] * fractions)
    assert torch.equal(course.times[:, -1], t_end)
    assert torch.equal(course.concentrations[0], c0[0].expand(11, -1))
    coarse = integrate(ABCD, c0, k, t_end, n_samples=2)
    assert torch.equal(coarse.times[:, -1], t_end)
    tolerance = INTEGRATION_ERROR * c0[:, :1]
    assert ((coarse.final - course.final).abs() <= tolerance).all()
    assert (coarse.steps <= course.steps).all()


def test_a_reactor_that_cannot_be_integrated_is_marked_failed_alone() -> None:
    """Too few allowed steps, or a rate constant that is not finite: that reactor's
    course turns NaN and ``failed`` is set; the other reactors are untouched."""
    c0, k, t_end = _lab_like(3, seed=5)
    k[1, 0] = float("nan")
    course = integrate(ABCD, c0, k, t_end)
    assert course.failed.tolist() == [False, True, False]
    assert torch.isnan(course.final[1]).all() and torch.isfinite(course.final[[0, 2]]).all()
    alone = integrate(ABCD, c0[2:], k[2:], t_end[2:])
    assert torch.equal(alone.final[0], course.final[2])
    limited = integrate(ABCD, c0[:1], k[:1], t_end[:1], max_steps=10)
    assert limited.failed.all() and torch.isnan(limited.final).all()


def test_inputs_are_checked_and_n_steps_is_deprecated() -> None:
    c0, k, t_end = _lab_like(2, seed=6)
    with pytest.raises(ValueError, match="non-negative"):
        integrate(ABCD, c0, k, -t_end)
    with pytest.raises(ValueError, match="expected"):
        integrate(ABCD, c0[:, :3], k, t_end)
    with pytest.warns(DeprecationWarning, match="n_steps"):
        old = integrate(ABCD, c0, k, t_end, n_steps=2000)
    assert torch.equal(old.final, integrate(ABCD, c0, k, t_end).final)


def test_tighter_tolerances_converge() -> None:
    """Tightening rtol and atol by 100 moves the result by less than the looser run's
    stated error and takes more steps: the step control responds to the tolerances."""
    c0, k, t_end = _lab_like(32, seed=7)
    loose = integrate(ABCD, c0, k, t_end, rtol=1e-7, atol=1e-10)
    tight = integrate(ABCD, c0, k, t_end, rtol=1e-9, atol=1e-12)
    assert (loose.steps.sum() < tight.steps.sum()).item()
    difference = (loose.final - tight.final).abs() / c0[:, :1]
    assert 1e-13 < difference.max().item() < 100 * INTEGRATION_ERROR


def test_arrhenius_law() -> None:
    """ln k is linear in 1/T with slope -Ea/R."""
    temps = torch.tensor([300.0, 350.0, 400.0], dtype=torch.float64)
    k = arrhenius(
        torch.tensor(1e10, dtype=torch.float64), torch.tensor(75e3, dtype=torch.float64), temps
    )
    slope = np.polyfit(1 / temps.numpy(), np.log(k.numpy()), 1)[0]
    assert slope == pytest.approx(-75e3 / GAS_CONSTANT, rel=1e-12)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    """The same kernel compiled for the GPU: round-off differs from the CPU build (fused
    multiply-adds, exp and pow), which can move a step decision, so CUDA and CPU agree to
    the integrator's stated error rather than bit for bit; CUDA is deterministic and
    batch independent on its own."""
    c0, k, t_end = _lab_like(256, seed=8)
    cpu = integrate(ABCD, c0, k, t_end)
    gpu = integrate(ABCD, c0.cuda(), k.cuda(), t_end.cuda())
    assert gpu.final.device.type == "cuda"
    atol = INTEGRATION_ERROR * c0[:, :1].cuda()
    assert ((gpu.concentrations - cpu.concentrations.cuda()).abs() <= atol[:, :, None]).all()
    again = integrate(ABCD, c0.cuda(), k.cuda(), t_end.cuda())
    assert torch.equal(gpu.concentrations, again.concentrations)
    alone = integrate(ABCD, c0[5:6].cuda(), k[5:6].cuda(), t_end[5:6].cuda())
    assert torch.equal(alone.concentrations[0], gpu.concentrations[5])
