"""The batched RK4 kinetics engine against analytic solutions, an independent
integrator (scipy's LSODA) and conservation of mass."""

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
)

ABC = ReactionNetwork(("A", "B", "C"), (Reaction({"A": 1}, {"B": 1}), Reaction({"B": 1}, {"C": 1})))
ABCD = ReactionNetwork(
    ("A", "B", "C", "D"),
    (Reaction({"A": 1}, {"B": 1}), Reaction({"B": 1}, {"C": 1}), Reaction({"A": 2}, {"D": 1})),
)


def _batch(k1, k2, a0, t, k3=None):
    n = len(k1)
    f64 = dict(dtype=torch.float64)
    species = 3 if k3 is None else 4
    c0 = torch.zeros(n, species, **f64)
    c0[:, 0] = torch.tensor(a0, **f64)
    ks = [k1, k2] + ([] if k3 is None else [k3])
    return c0, torch.tensor(np.stack(ks, axis=1), **f64), torch.tensor(t, **f64)


def test_rk4_matches_analytic_consecutive_first_order() -> None:
    """A -> B -> C over a spread of rate constants, including k1 == k2 and k2 >> k1.

    With k*dt <= 0.25 the RK4 global error is below ~1e-8 of the feed, far
    below the 2 % measurement noise of the labs; we assert 1e-7 absolute.
    """
    rng = np.random.default_rng(0)
    k1 = np.concatenate([rng.uniform(0.01, 2.0, 20), [0.3, 0.05]])
    k2 = np.concatenate([rng.uniform(0.001, 2.0, 20), [0.3, 5.0]])
    a0 = rng.uniform(0.1, 2.0, 22)
    t = rng.uniform(1.0, 100.0, 22)
    t = np.minimum(t, 0.25 * 2000 / np.maximum(k1, k2))  # keep k*dt <= 0.25
    c0, k, t_end = _batch(k1, k2, a0, t)
    course = integrate(ABC, c0, k, t_end, n_steps=2000, n_samples=41)
    a, b, c = consecutive_first_order(a0, k1, k2, t)
    np.testing.assert_allclose(course.final.numpy(), np.stack([a, b, c], 1), atol=1e-7)
    # the sampled time course too, at its own times
    times = course.times.numpy()
    a_t, b_t, _ = consecutive_first_order(a0[:, None], k1[:, None], k2[:, None], times)
    np.testing.assert_allclose(course.concentrations[..., 1].numpy(), b_t, atol=1e-7)
    np.testing.assert_allclose(course.concentrations[..., 0].numpy(), a_t, atol=1e-7)


def test_side_reaction_matches_lsoda_and_conserves_mass() -> None:
    """A -> B -> C with 2A -> D against scipy's LSODA at rtol 1e-10.

    Mass balance A + B + C + 2D = A0 holds to round-off in RK4 (the
    stoichiometry is linear), asserted at 1e-12.
    """
    k1, k2, k3 = np.array([0.2, 1.5]), np.array([0.02, 0.3]), np.array([0.5, 0.05])
    a0, t = np.array([1.5, 0.3]), np.array([40.0, 10.0])
    c0, k, t_end = _batch(k1, k2, a0, t, k3)
    final = integrate(ABCD, c0, k, t_end, n_steps=2000).final.numpy()
    for i in range(2):

        def rhs(_, c, i=i):
            a, b = c[0], c[1]
            r1, r2, r3 = k1[i] * a, k2[i] * b, k3[i] * a * a
            return [-r1 - 2 * r3, r1 - r2, r2, r3]

        ref = solve_ivp(rhs, (0, t[i]), [a0[i], 0, 0, 0], method="LSODA", rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(final[i], ref.y[:, -1], atol=1e-8)
    balance = final[:, 0] + final[:, 1] + final[:, 2] + 2 * final[:, 3]
    np.testing.assert_allclose(balance, a0, rtol=1e-12)


def test_batched_equals_one_at_a_time() -> None:
    """Each reactor's result is independent of the batch (elementwise math).

    Vectorised and scalar exp/pow kernels may differ in the last ulp, so we
    allow 1e-13 relative.
    """
    rng = np.random.default_rng(1)
    k1, k2, k3 = rng.uniform(0.01, 1, 8), rng.uniform(0.01, 1, 8), rng.uniform(0, 1, 8)
    a0, t = rng.uniform(0.1, 2, 8), rng.uniform(1, 50, 8)
    c0, k, t_end = _batch(k1, k2, a0, t, k3)
    together = integrate(ABCD, c0, k, t_end, n_steps=400).final
    for i in range(8):
        alone = integrate(ABCD, c0[i : i + 1], k[i : i + 1], t_end[i : i + 1], n_steps=400).final
        torch.testing.assert_close(alone[0], together[i], rtol=1e-13, atol=1e-15)


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
    c0, k, t_end = _batch(np.array([0.3]), np.array([0.05]), np.array([1.0]), np.array([30.0]))
    cpu = integrate(ABC, c0, k, t_end).final
    gpu = integrate(ABC, c0.cuda(), k.cuda(), t_end.cuda()).final.cpu()
    torch.testing.assert_close(cpu, gpu, rtol=1e-12, atol=1e-14)
