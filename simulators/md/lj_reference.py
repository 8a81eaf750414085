"""A second engine for the LJ fluid: OpenMM dynamics, observables computed here in NumPy.

The LJ lab's measurements come from the Warp engine (:mod:`.lj_warp`). To check them
against something that shares none of its force, integrator or reduction code, this module
runs the same system in OpenMM (truncated, unshifted LJ in a periodic cubic box, a
LangevinMiddle thermostat, reduced units mapped through :class:`~.openmm_engine.LJUnits`)
and evaluates each sampled frame with a direct all-pairs NumPy sum (minimum image):

- potential energy per particle, with the standard tail correction;
- pressure ``(N T_kin + W) / V`` with the pair virial ``W = (1/3) sum r F``, plus the tail
  correction;
- kinetic temperature ``sum m v^2 / (3 N)`` (3N degrees of freedom under Langevin dynamics,
  as the lab counts them).

The means and their standard errors come from :func:`~.observables.replica_estimate` over
independent replicas (the same estimator as the lab's). Used by the lab's calibration (its ``calibration_reference``) and
``bench/validation.py``; slow by design (one Python call per sample), not a production
engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labtwin.simulators.md.build import lj_fluid
from labtwin.simulators.md.observables import (
    SeriesMean,
    lj_tail_energy,
    lj_tail_pressure,
    replica_estimate,
)
from labtwin.simulators.md.openmm_engine import ARGON, lj_system


@dataclass(frozen=True)
class ReferenceRun:
    """Means of the reference runs (reduced units) and the raw series (replica, sample)."""

    pressure: SeriesMean
    potential_energy: SeriesMean
    temperature: SeriesMean
    series: dict[str, np.ndarray]


def pair_energy_virial(positions: np.ndarray, box: float, cutoff: float) -> tuple[float, float]:
    """Total truncated LJ energy and ``sum_pairs r . F`` of one periodic cubic box (reduced).

    >>> x = np.array([[0.0, 0.0, 0.0], [2 ** (1 / 6), 0.0, 0.0]])
    >>> e, w = pair_energy_virial(x, 10.0, 2.5)
    >>> round(e, 12), abs(round(w, 9))
    (-1.0, 0.0)
    """
    d = positions[:, None, :] - positions[None, :, :]
    d -= box * np.round(d / box)
    r2 = (d**2).sum(-1)
    i, j = np.triu_indices(len(positions), k=1)
    r2 = r2[i, j]
    r2 = r2[r2 < cutoff**2]
    inv6 = r2**-3
    energy = float((4.0 * (inv6 * inv6 - inv6)).sum())
    virial = float((24.0 * (2.0 * inv6 * inv6 - inv6)).sum())  # r . F = -r dU/dr per pair
    return energy, virial


def openmm_lj_reference(
    n_atoms: int,
    density: float,
    temperature: float,
    cutoff: float,
    n_steps: int,
    replicas: int = 4,
    n_equilibration: int = 2000,
    dt: float = 0.005,
    friction: float = 1.0,
    sample_every: int = 10,
    seed: int = 0,
) -> ReferenceRun:
    """Run ``replicas`` independent OpenMM boxes (CPU platform, one thread) and average.

    Each replica starts from its own jittered lattice (:func:`~.build.lj_fluid`), runs
    ``n_equilibration`` steps and then ``n_steps`` steps sampled every ``sample_every``.
    """
    import openmm as mm

    units = ARGON
    box = (n_atoms / density) ** (1 / 3)
    volume = box**3
    system = lj_system(n_atoms, np.full(3, box), cutoff, units)
    integrator = mm.LangevinMiddleIntegrator(
        temperature * units.temperature_k, friction / units.time_ps, dt * units.time_ps
    )
    platform = mm.Platform.getPlatformByName("CPU")
    context = mm.Context(system, integrator, platform, {"Threads": "1"})
    n_samples = n_steps // sample_every
    series = {k: np.zeros((replicas, n_samples)) for k in ("pressure", "energy", "temperature")}
    tail_u = float(lj_tail_energy(density, cutoff))
    tail_p = float(lj_tail_pressure(density, cutoff))
    for r in range(replicas):
        start = lj_fluid(n_atoms, density, temperature, seed=seed * 1000 + r, dtype=np.float64)
        integrator.setRandomNumberSeed(int(seed * 1000 + r) % (2**31 - 2) + 1)
        context.reinitialize()
        context.setPositions(np.asarray(start.positions) * units.sigma_nm)
        context.setVelocities(np.asarray(start.velocities) * (units.sigma_nm / units.time_ps))
        integrator.step(n_equilibration)
        for k in range(n_samples):
            integrator.step(sample_every)
            state = context.getState(getPositions=True, getVelocities=True)
            x = state.getPositions(asNumpy=True)._value / units.sigma_nm
            v = state.getVelocities(asNumpy=True)._value * (units.time_ps / units.sigma_nm)
            energy, virial = pair_energy_virial(x, box, cutoff)
            t_kin = float((v**2).sum() / (3 * n_atoms))  # unit mass
            series["energy"][r, k] = energy / n_atoms + tail_u
            series["pressure"][r, k] = (n_atoms * t_kin + virial / 3.0) / volume + tail_p
            series["temperature"][r, k] = t_kin
    return ReferenceRun(
        pressure=replica_estimate(series["pressure"]),
        potential_energy=replica_estimate(series["energy"]),
        temperature=replica_estimate(series["temperature"]),
        series=series,
    )
