"""Initial states: lattice fluid boxes, Lennard-Jones clusters, Maxwell-Boltzmann velocities.

All quantities in reduced LJ units (sigma = epsilon = mass = k_B = 1) unless stated.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from labtwin.simulators.md.state import MDState

#: Putative global minimum energies of LJ_n clusters (epsilon), full (untruncated) potential,
#: from the Cambridge Cluster Database (Wales & Doye, J. Phys. Chem. A 101, 5111 (1997)).
CLUSTER_GLOBAL_MINIMA: dict[int, float] = {
    7: -16.505384,
    13: -44.326801,
    19: -72.659782,
    38: -173.928427,
    55: -279.248470,
}


def lattice_positions(n_atoms: int, box_length: float) -> np.ndarray:
    """(n_atoms, 3) lattice sites filling a cubic box of edge ``box_length``.

    FCC when ``n_atoms = 4 m^3`` (32, 108, 256, 500, ...), simple cubic when ``n_atoms = m^3``
    (64, 216, 512, ...), otherwise the first ``n_atoms`` sites of the smallest FCC lattice
    with enough sites.
    """
    m_cubic = round(n_atoms ** (1 / 3))
    m_fcc = round((n_atoms / 4) ** (1 / 3))
    if 4 * m_fcc**3 == n_atoms:
        basis, m = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]]), m_fcc
    elif m_cubic**3 == n_atoms:
        basis, m = np.zeros((1, 3)), m_cubic
    else:
        m = int(np.ceil((n_atoms / 4) ** (1 / 3)))
        basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    cells = np.stack(np.meshgrid(*[np.arange(m)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    sites = (cells + basis[None] + 0.25).reshape(-1, 3) / m
    return sites[:n_atoms] * box_length


def maxwell_boltzmann(
    masses: np.ndarray,
    system_idx: np.ndarray,
    temperature: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """(n_atoms, 3) velocities at exactly ``temperature`` per system, zero total momentum.

    Uses ``3 N - 3`` degrees of freedom per system (momentum removed).
    """
    n_systems = len(temperature)
    v = rng.normal(size=(len(masses), 3)) * np.sqrt(temperature[system_idx] / masses)[:, None]
    for s in range(n_systems):
        sel = system_idx == s
        m = masses[sel][:, None]
        v[sel] -= (m * v[sel]).sum(0) / m.sum()
        n = int(sel.sum())
        kinetic = 0.5 * (m * v[sel] ** 2).sum()
        if n > 1 and kinetic > 0:
            v[sel] *= np.sqrt(0.5 * (3 * n - 3) * temperature[s] / kinetic)
    return v


def lj_fluid(
    n_atoms: int,
    density: float | Sequence[float],
    temperature: float | Sequence[float] = 1.0,
    n_systems: int | None = None,
    seed: int = 0,
    jitter: float = 0.02,
    dtype: type = np.float32,
) -> MDState:
    """Periodic LJ fluid boxes started from a lattice at reduced ``density`` (N / V).

    Args:
        n_atoms: atoms per system.
        density: reduced number density per system (scalar or one per system).
        temperature: reduced temperature of the initial Maxwell-Boltzmann velocities.
        n_systems: number of systems (default: length of ``density`` or 1).
        seed: NumPy seed for lattice jitter and velocities.
        jitter: random displacement of lattice sites (sigma), breaks lattice symmetry.
        dtype: float dtype of the state.
    """
    density = np.atleast_1d(np.asarray(density, dtype=np.float64))
    if n_systems is None:
        n_systems = len(density)
    density = np.broadcast_to(density, (n_systems,))
    temperature = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (n_systems,))
    rng = np.random.default_rng(seed)
    box_length = (n_atoms / density) ** (1 / 3)
    positions = np.concatenate(
        [lattice_positions(n_atoms, length) for length in box_length]
    ) + rng.uniform(-jitter, jitter, size=(n_atoms * n_systems, 3))
    system_idx = np.repeat(np.arange(n_systems), n_atoms)
    masses = np.ones(n_atoms * n_systems)
    velocities = maxwell_boltzmann(masses, system_idx, temperature, rng)
    return MDState.from_arrays(
        positions,
        system_idx,
        np.repeat(box_length[:, None], 3, axis=1),
        periodic=True,
        velocities=velocities,
        masses=masses,
        dtype=dtype,
    )


def icosahedron_13(nearest_neighbour: float = 1.1) -> np.ndarray:
    """(13, 3) Mackay icosahedron: centre plus 12 vertices at ``nearest_neighbour`` (sigma)."""
    phi = (1 + np.sqrt(5)) / 2
    vertices = []
    for a in (-1, 1):
        for b in (-phi, phi):
            vertices += [(0, a, b), (a, b, 0), (b, 0, a)]
    vertices = np.array(vertices, dtype=np.float64)
    vertices *= nearest_neighbour / np.linalg.norm(vertices[0])
    return np.concatenate([np.zeros((1, 3)), vertices])


def truncated_octahedron_38(nearest_neighbour: float = 2 ** (1 / 6)) -> np.ndarray:
    """(38, 3) FCC truncated octahedron (the LJ38 global minimum structure).

    The first three FCC shells (6 + 8 + 24 sites) around an octahedral hole.
    """
    a = nearest_neighbour * np.sqrt(2)  # cubic lattice constant
    grid = np.stack(np.meshgrid(*[np.arange(-3, 4)] * 3, indexing="ij"), -1).reshape(-1, 3)
    fcc = grid[grid.sum(1) % 2 == 0] * (a / 2)  # FCC sites: integer coords with even sum
    centre = np.array([a / 2, 0, 0])  # an octahedral hole
    d = np.linalg.norm(fcc - centre, axis=1)
    return fcc[np.argsort(d, kind="stable")[:38]] - centre


def random_cluster(
    n_atoms: int, rng: np.random.Generator, density: float = 0.6, min_distance: float = 0.9
) -> np.ndarray:
    """(n_atoms, 3) random positions in a sphere of number ``density``, no pair closer than
    ``min_distance`` (sigma)."""
    radius = (3 * n_atoms / (4 * np.pi * density)) ** (1 / 3)
    points: list[np.ndarray] = []
    while len(points) < n_atoms:
        p = rng.uniform(-radius, radius, size=3)
        if np.linalg.norm(p) > radius:
            continue
        if all(np.linalg.norm(p - q) >= min_distance for q in points):
            points.append(p)
    return np.array(points)


def clusters(coordinates: Sequence[np.ndarray], dtype: type = np.float32) -> MDState:
    """A state of isolated (non-periodic) clusters, one per entry of ``coordinates``."""
    positions = np.concatenate([np.asarray(c, dtype=np.float64) for c in coordinates])
    system_idx = np.repeat(np.arange(len(coordinates)), [len(c) for c in coordinates])
    return MDState.from_arrays(
        positions, system_idx, box=np.ones(3), periodic=False, masses=1.0, dtype=dtype
    )
