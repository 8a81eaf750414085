"""Johnson-Zollweg-Gubbins equation of state of the full Lennard-Jones fluid.

J. K. Johnson, J. A. Zollweg and K. E. Gubbins, "The Lennard-Jones equation of state
revisited", Mol. Phys. 78, 591-618 (1993): a 33-parameter modified Benedict-Webb-Rubin (MBWR)
fit (32 linear coefficients x_1..x_32 of their Table 10 and the nonlinear gamma = 3) to
simulation data of the full (untruncated) LJ fluid for 0.7 < T* < 6.

Reduced units: T* = k_B T / epsilon, rho* = rho sigma^3, P* = P sigma^3 / epsilon, energies
per particle in epsilon. Residual quantities exclude the ideal gas.
"""

from __future__ import annotations

import numpy as np

GAMMA = 3.0

#: x_1 .. x_32 of Johnson, Zollweg & Gubbins (1993), Table 10 (index 0 is x_1).
X = np.array(
    [
        0.8623085097507421,
        2.976218765822098,
        -8.402230115796038,
        0.1054136629203555,
        -0.8564583828174598,
        1.582759470107601,
        0.7639421948305453,
        1.753173414312048,
        2.798291772190376e03,
        -4.8394220260857657e-02,
        0.9963265197721935,
        -3.698000291272493e01,
        2.084012299434647e01,
        8.305402124717285e01,
        -9.574799715203068e02,
        -1.477746229234994e02,
        6.398607852471505e01,
        1.603993673294834e01,
        6.805916615864377e01,
        -2.791293578795945e03,
        -6.245128304568454,
        -8.116836104958410e03,
        1.488735559561229e01,
        -1.059346754655084e04,
        -1.131607632802822e02,
        -8.867771540418822e03,
        -3.986982844450543e01,
        -4.689270299917261e03,
        2.593535277438717e02,
        -2.694523589434903e03,
        -7.218487631550215e02,
        1.721802063863269e02,
    ]
)


def _x(i: int) -> float:
    return float(X[i - 1])


def _a(t: np.ndarray) -> list[np.ndarray]:
    """Coefficients a_1..a_8 of the density series (JZG Table 5)."""
    return [
        _x(1) * t + _x(2) * np.sqrt(t) + _x(3) + _x(4) / t + _x(5) / t**2,
        _x(6) * t + _x(7) + _x(8) / t + _x(9) / t**2,
        _x(10) * t + _x(11) + _x(12) / t,
        _x(13) + 0.0 * t,
        _x(14) / t + _x(15) / t**2,
        _x(16) / t,
        _x(17) / t + _x(18) / t**2,
        _x(19) / t**2,
    ]


def _b(t: np.ndarray) -> list[np.ndarray]:
    """Coefficients b_1..b_6 of the exponential terms (JZG Table 5)."""
    return [
        _x(20) / t**2 + _x(21) / t**3,
        _x(22) / t**2 + _x(23) / t**4,
        _x(24) / t**2 + _x(25) / t**3,
        _x(26) / t**2 + _x(27) / t**4,
        _x(28) / t**2 + _x(29) / t**3,
        _x(30) / t**2 + _x(31) / t**3 + _x(32) / t**4,
    ]


def _c(t: np.ndarray) -> list[np.ndarray]:
    """Coefficients c_1..c_8 of the internal energy (JZG Table 8)."""
    return [
        _x(2) * np.sqrt(t) / 2 + _x(3) + 2 * _x(4) / t + 3 * _x(5) / t**2,
        _x(7) + 2 * _x(8) / t + 3 * _x(9) / t**2,
        _x(11) + 2 * _x(12) / t,
        _x(13) + 0.0 * t,
        2 * _x(14) / t + 3 * _x(15) / t**2,
        2 * _x(16) / t,
        2 * _x(17) / t + 3 * _x(18) / t**2,
        3 * _x(19) / t**2,
    ]


def _d(t: np.ndarray) -> list[np.ndarray]:
    """Coefficients d_1..d_6 of the internal energy (JZG Table 8)."""
    return [
        3 * _x(20) / t**2 + 4 * _x(21) / t**3,
        3 * _x(22) / t**2 + 5 * _x(23) / t**4,
        3 * _x(24) / t**2 + 4 * _x(25) / t**3,
        3 * _x(26) / t**2 + 5 * _x(27) / t**4,
        3 * _x(28) / t**2 + 4 * _x(29) / t**3,
        3 * _x(30) / t**2 + 4 * _x(31) / t**3 + 5 * _x(32) / t**4,
    ]


def _g(rho: np.ndarray) -> list[np.ndarray]:
    """G_1..G_6 (JZG Table 7): integrals of the exponential terms over density."""
    f = np.exp(-GAMMA * rho**2)
    g = [(1 - f) / (2 * GAMMA)]
    for i in range(2, 7):
        g.append(-(f * rho ** (2 * (i - 1)) - 2 * (i - 1) * g[-1]) / (2 * GAMMA))
    return g


def pressure(density: np.ndarray | float, temperature: np.ndarray | float) -> np.ndarray:
    """Pressure P* of the full LJ fluid at density rho* and temperature T*."""
    rho = np.asarray(density, dtype=np.float64)
    t = np.asarray(temperature, dtype=np.float64)
    f = np.exp(-GAMMA * rho**2)
    p = rho * t
    for i, a in enumerate(_a(t), start=1):
        p = p + a * rho ** (i + 1)
    for i, b in enumerate(_b(t), start=1):
        p = p + f * b * rho ** (2 * i + 1)
    return p


def residual_free_energy(
    density: np.ndarray | float, temperature: np.ndarray | float
) -> np.ndarray:
    """Residual Helmholtz free energy per particle A_res / N (epsilon)."""
    rho = np.asarray(density, dtype=np.float64)
    t = np.asarray(temperature, dtype=np.float64)
    a_res = sum(a * rho**i / i for i, a in enumerate(_a(t), start=1))
    return a_res + sum(b * g for b, g in zip(_b(t), _g(rho), strict=True))


def internal_energy(density: np.ndarray | float, temperature: np.ndarray | float) -> np.ndarray:
    """Configurational (potential) energy per particle U / N (epsilon)."""
    rho = np.asarray(density, dtype=np.float64)
    t = np.asarray(temperature, dtype=np.float64)
    u = sum(c * rho**i / i for i, c in enumerate(_c(t), start=1))
    return u + sum(d * g for d, g in zip(_d(t), _g(rho), strict=True))


def chemical_potential(density: np.ndarray | float, temperature: np.ndarray | float) -> np.ndarray:
    """Residual chemical potential minus the ideal-gas reference, in the form used for phase
    coexistence: mu = A_res/N + P/rho + T ln(rho) (epsilon; an additive T-dependent constant
    dropped, equal for both phases at one temperature)."""
    rho = np.asarray(density, dtype=np.float64)
    t = np.asarray(temperature, dtype=np.float64)
    return residual_free_energy(rho, t) + pressure(rho, t) / rho + t * np.log(rho) - t


def coexistence(
    temperature: float, guess: tuple[float, float] = (0.01, 0.75)
) -> tuple[float, float, float]:
    """Vapour and liquid densities and the saturation pressure at ``temperature`` (T* below
    the EOS critical point, about 1.31) from equal pressure and chemical potential."""
    from scipy.optimize import fsolve

    def residual(log_rho: np.ndarray) -> list[float]:
        rv, rl = np.exp(log_rho)
        return [
            float(pressure(rv, temperature) - pressure(rl, temperature)),
            float(chemical_potential(rv, temperature) - chemical_potential(rl, temperature)),
        ]

    log_v, log_l = fsolve(residual, np.log(guess), xtol=1e-12)
    rv, rl = float(np.exp(log_v)), float(np.exp(log_l))
    return rv, rl, float(pressure(rv, temperature))
