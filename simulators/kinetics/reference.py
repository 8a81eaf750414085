"""An independent reference for the kinetics engine: scipy's stiff solvers on the mass-action ODE.

:func:`solve_stages` writes dc/dt = nu^T r(c), r_j = k_j prod_s c_s^(order_js), in numpy
straight from a :class:`~labtwin.simulators.kinetics.ReactionNetwork`'s reactions (with
its analytic Jacobian) and integrates it with :func:`scipy.integrate.solve_ivp` to a
tight tolerance, stage by stage through piecewise-constant rate constants. It shares no
code with :func:`~labtwin.simulators.kinetics.integrate`, so it checks the engine and the
labs' calibration means (:mod:`labtwin.calibration`).

Error: at ``rtol = 1e-10`` the final concentrations of the reactor labs' runs agree
between LSODA and Radau to about 1e-10 of the feed; :data:`REFERENCE_ERROR` (1e-8 of the
feed) bounds that with room to spare and is negligible against any calibration's
standard error of the mean (at least 2.5e-4 mol/L for the reactor HPLC with 64 seeds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.integrate import solve_ivp

from labtwin.simulators.kinetics.network import ReactionNetwork

REFERENCE_RTOL = 1e-10  # solve_ivp relative tolerance
REFERENCE_ATOL = 1e-15  # solve_ivp absolute tolerance, mol/L
#: stated error of a reference concentration, as a fraction of the feed (see module doc)
REFERENCE_ERROR = 1e-8


def mass_action(
    network: ReactionNetwork, k: Sequence[float]
) -> tuple[Callable[[float, np.ndarray], np.ndarray], Callable[[float, np.ndarray], np.ndarray]]:
    """Right-hand side dc/dt and its Jacobian for one reactor with rate constants ``k``.

    Each reaction's rate is ``k_j prod_s c_s ** n_js`` with ``n_js`` its reactant
    coefficients; species change by products minus reactants times the rate.
    """
    n_species = len(network.species)
    orders = np.zeros((len(network.reactions), n_species))
    net = np.zeros((len(network.reactions), n_species))
    for j, reaction in enumerate(network.reactions):
        for species, n in reaction.reactants.items():
            orders[j, network.species.index(species)] += n
            net[j, network.species.index(species)] -= n
        for species, n in reaction.products.items():
            net[j, network.species.index(species)] += n
    k = np.asarray(k, dtype=np.float64)

    def rates(c: np.ndarray) -> np.ndarray:
        return k * np.prod(c[None, :] ** orders, axis=1)

    def rhs(_t: float, c: np.ndarray) -> np.ndarray:
        return rates(c) @ net

    def jacobian(_t: float, c: np.ndarray) -> np.ndarray:
        # d r_j / d c_s = k_j n_js c_s^(n_js - 1) prod_{s' != s} c_s'^(n_js')
        d_rates = np.zeros((len(k), n_species))
        for s in range(n_species):
            lowered = orders.copy()
            lowered[:, s] = np.maximum(orders[:, s] - 1.0, 0.0)
            d_rates[:, s] = k * orders[:, s] * np.prod(c[None, :] ** lowered, axis=1)
        return net.T @ d_rates

    return rhs, jacobian


def solve_stages(
    network: ReactionNetwork,
    c0: Sequence[float],
    k_stages: Sequence[Sequence[float]],
    durations: Sequence[float],
    method: str = "LSODA",
    rtol: float = REFERENCE_RTOL,
    atol: float = REFERENCE_ATOL,
) -> np.ndarray:
    """Final concentrations ``(S,)`` of one reactor run through stages in order.

    Stage s holds the rate constants ``k_stages[s]`` (``(R,)``, per time unit) for
    ``durations[s]``; the next stage starts from where it ended. ``method`` is any
    implicit :func:`~scipy.integrate.solve_ivp` method ("LSODA", "Radau", "BDF").
    """
    c = np.asarray(c0, dtype=np.float64).copy()
    for k, duration in zip(k_stages, durations, strict=True):
        if duration <= 0:
            continue
        rhs, jacobian = mass_action(network, k)
        solution = solve_ivp(
            rhs, (0.0, float(duration)), c, method=method, jac=jacobian, rtol=rtol, atol=atol
        )
        if not solution.success:
            raise RuntimeError(f"reference integration failed: {solution.message}")
        c = solution.y[:, -1]
    return c
