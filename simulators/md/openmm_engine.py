"""OpenMM engine: the reduced-unit LJ fluid (a cross-check of ``lj_warp``) and a TIP3P water
box NPT protocol.

Platform: CUDA, then OpenCL, then CPU, the first that can create a Context
(:func:`select_platform`, :func:`platform_name`). Contexts are cached by system definition
(kind, atom count, periodicity, cutoff, platform, integrator) and reused: later calls only set
positions, velocities, box vectors and integrator/barostat parameters.

Units: OpenMM's (nm, ps, kJ/mol, amu, K, bar). The LJ fluid maps reduced units through
:class:`LJUnits` (argon-like sigma, epsilon, mass) and converts results back to reduced units.
OpenMM is imported lazily.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labtwin.simulators.md.observables import block_average
from labtwin.simulators.md.state import MDState

BOLTZMANN_KJ_PER_MOL_K = 0.008314462618  # k_B N_A
BAR_PER_KJ_PER_MOL_NM3 = 16.6053907  # 1 kJ/mol/nm^3 in bar
G_PER_CM3_PER_AMU_PER_NM3 = 1.66053907e-3  # 1 amu/nm^3 = 1.66054e-24 g / 1e-21 cm^3


@dataclass(frozen=True)
class LJUnits:
    """Map reduced LJ units onto OpenMM units (default: argon, epsilon / k_B = 120 K)."""

    sigma_nm: float = 0.3405
    epsilon_kj_mol: float = 120.0 * BOLTZMANN_KJ_PER_MOL_K
    mass_amu: float = 39.948

    @property
    def time_ps(self) -> float:
        """tau = sigma sqrt(m / epsilon) in ps (amu nm^2 / ps^2 = kJ/mol)."""
        return self.sigma_nm * np.sqrt(self.mass_amu / self.epsilon_kj_mol)

    @property
    def temperature_k(self) -> float:
        """Kelvin per reduced temperature unit, epsilon / k_B."""
        return self.epsilon_kj_mol / BOLTZMANN_KJ_PER_MOL_K

    @property
    def force_kj_mol_nm(self) -> float:
        return self.epsilon_kj_mol / self.sigma_nm


ARGON = LJUnits()


def _openmm() -> Any:
    import openmm

    return openmm


@functools.cache
def select_platform() -> str:
    """Name of the fastest OpenMM platform that works here: CUDA, OpenCL, then CPU.

    ``LABTWIN_OPENMM_PLATFORM`` overrides the choice.
    """
    mm = _openmm()
    forced = os.environ.get("LABTWIN_OPENMM_PLATFORM")
    for name in [forced] if forced else ["CUDA", "OpenCL", "CPU", "Reference"]:
        try:
            platform = mm.Platform.getPlatformByName(name)
            system = mm.System()
            system.addParticle(1.0)
            mm.Context(system, mm.VerletIntegrator(0.001), platform)
            return name
        except Exception:  # noqa: BLE001 - a platform that cannot make a Context is skipped
            continue
    raise RuntimeError("no usable OpenMM platform")


def platform_name() -> str:
    """The platform OpenMM engines use by default (see :func:`select_platform`)."""
    return select_platform()


# ---------------------------------------------------------------------- LJ fluid


def lj_system(
    n_atoms: int,
    box_reduced: np.ndarray | None,
    cutoff: float | None,
    units: LJUnits = ARGON,
) -> Any:
    """An ``openmm.System`` of ``n_atoms`` LJ atoms (no charges, no switching, no dispersion
    correction). ``box_reduced`` (3,) box edges in sigma, or None for an isolated cluster
    (then ``cutoff`` None means the full potential). ``cutoff`` in sigma."""
    mm = _openmm()
    system = mm.System()
    for _ in range(n_atoms):
        system.addParticle(units.mass_amu)
    force = mm.NonbondedForce()
    for _ in range(n_atoms):
        force.addParticle(0.0, units.sigma_nm, units.epsilon_kj_mol)
    if box_reduced is not None:
        a, b, c = (float(x) * units.sigma_nm for x in box_reduced)
        system.setDefaultPeriodicBoxVectors(mm.Vec3(a, 0, 0), mm.Vec3(0, b, 0), mm.Vec3(0, 0, c))
        force.setNonbondedMethod(mm.NonbondedForce.CutoffPeriodic)
        force.setCutoffDistance(cutoff * units.sigma_nm)
    elif cutoff is not None:
        force.setNonbondedMethod(mm.NonbondedForce.CutoffNonPeriodic)
        force.setCutoffDistance(cutoff * units.sigma_nm)
    else:
        force.setNonbondedMethod(mm.NonbondedForce.NoCutoff)
    force.setUseSwitchingFunction(False)
    force.setUseDispersionCorrection(False)
    force.setReactionFieldDielectric(1.0)
    system.addForce(force)
    return system


@dataclass
class _CachedContext:
    context: Any
    integrator: Any


class OpenMMLJ:
    """LJ systems in OpenMM with cached Contexts (reduced units in and out).

    Args:
        cutoff: truncation radius for periodic systems (sigma), truncated, not shifted.
        cluster_cutoff: radius for clusters, None for the full potential.
        units: mapping between reduced and OpenMM units.
        platform: OpenMM platform name; default :func:`select_platform`. Use "Reference"
            for double precision.
    """

    def __init__(
        self,
        cutoff: float = 2.5,
        cluster_cutoff: float | None = None,
        units: LJUnits = ARGON,
        platform: str | None = None,
    ) -> None:
        self.cutoff = cutoff
        self.cluster_cutoff = cluster_cutoff
        self.units = units
        self.platform = platform or select_platform()
        self._contexts: dict[tuple, _CachedContext] = {}

    def _context(
        self, n_atoms: int, box: np.ndarray | None, integrator: str, slot: int = 0
    ) -> _CachedContext:
        """Context for ``n_atoms`` (periodic if ``box`` is given), reused across calls."""
        key = (n_atoms, box is not None, integrator, slot)
        if key not in self._contexts:
            mm = _openmm()
            cutoff = self.cutoff if box is not None else self.cluster_cutoff
            system = lj_system(n_atoms, box, cutoff, self.units)
            if integrator == "langevin":
                integ = mm.LangevinMiddleIntegrator(300.0, 1.0, 0.001)
            else:
                integ = mm.VerletIntegrator(0.001)
            platform = mm.Platform.getPlatformByName(self.platform)
            # energies/forces for cross-checks in double precision where the platform offers it
            gpu = self.platform in ("CUDA", "OpenCL")
            properties = {"Precision": "double"} if gpu and integrator == "energy" else {}
            context = mm.Context(system, integ, platform, properties)
            self._contexts[key] = _CachedContext(context, integ)
        return self._contexts[key]

    def _load(self, cached: _CachedContext, positions: np.ndarray, box: np.ndarray | None) -> None:
        mm = _openmm()
        s = self.units.sigma_nm
        if box is not None:
            a, b, c = (float(x) * s for x in box)
            cached.context.setPeriodicBoxVectors(
                mm.Vec3(a, 0, 0), mm.Vec3(0, b, 0), mm.Vec3(0, 0, c)
            )
        cached.context.setPositions(np.asarray(positions, dtype=np.float64) * s)

    def _systems(self, state: MDState) -> list[tuple[int, int, np.ndarray | None]]:
        host = state.numpy()
        start = host.system_start()
        return [
            (int(start[k]), int(start[k + 1]), host.box[k] if host.periodic[k] else None)
            for k in range(host.n_systems)
        ]

    def energy_forces(self, state: MDState) -> tuple[np.ndarray, np.ndarray]:
        """Potential energy per system (epsilon, total, no tail correction) and forces
        (n_atoms, 3) (epsilon / sigma), one cached Context per system shape."""
        host = state.numpy()
        energies = np.zeros(host.n_systems)
        forces = np.zeros((host.n_atoms, 3))
        for k, (a, b, box) in enumerate(self._systems(host)):
            cached = self._context(b - a, box, "energy")
            self._load(cached, host.positions[a:b], box)
            result = cached.context.getState(getEnergy=True, getForces=True)
            energies[k] = result.getPotentialEnergy()._value / self.units.epsilon_kj_mol
            forces[a:b] = np.asarray(result.getForces(asNumpy=True)._value) / (
                self.units.force_kj_mol_nm
            )
        return energies, forces

    def run(
        self,
        state: MDState,
        n_steps: int,
        dt: float = 0.005,
        temperature: float = 1.0,
        friction: float = 1.0,
        context_per_system: bool = False,
    ) -> tuple[MDState, np.ndarray]:
        """Advance each system ``n_steps`` (LangevinMiddle, or Verlet when friction is 0),
        one after another. Returns the final state and potential energy per system (epsilon).

        ``dt`` in tau, ``temperature`` T*, ``friction`` 1/tau. With ``context_per_system``
        each system keeps its own Context (as a user looping over OpenMM would).
        """
        host = state.numpy()
        out = host.astype(np.float64)
        u = self.units
        energies = np.zeros(host.n_systems)
        kind = "langevin" if friction > 0 else "verlet"
        for k, (a, b, box) in enumerate(self._systems(host)):
            cached = self._context(b - a, box, kind, slot=k if context_per_system else 0)
            integ = cached.integrator
            integ.setStepSize(dt * u.time_ps)
            if kind == "langevin":
                integ.setTemperature(temperature * u.temperature_k)
                integ.setFriction(friction / u.time_ps)
            self._load(cached, host.positions[a:b], box)
            velocity = np.asarray(host.velocities[a:b], dtype=np.float64)
            cached.context.setVelocities(velocity * (u.sigma_nm / u.time_ps))
            integ.step(n_steps)
            result = cached.context.getState(getPositions=True, getVelocities=True, getEnergy=True)
            out.positions[a:b] = result.getPositions(asNumpy=True)._value / u.sigma_nm
            out.velocities[a:b] = result.getVelocities(asNumpy=True)._value * (
                u.time_ps / u.sigma_nm
            )
            energies[k] = result.getPotentialEnergy()._value / u.epsilon_kj_mol
        return out, energies


# ---------------------------------------------------------------------- TIP3P water


@dataclass
class WaterDensityResult:
    """Density of a TIP3P water box from an NPT run (g/cm^3) with its block standard error."""

    density: float
    density_stderr: float
    density_series: np.ndarray  # (n_samples,) g/cm^3
    potential_energy: float  # kJ/mol per molecule, mean over production
    n_waters: int
    temperature_k: float
    pressure_bar: float
    platform: str
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class WaterReplicaResult:
    """Production series of independent replica NPT runs of one TIP3P box at one state.

    Every series is (n_replicas, n_samples), one sample every ``info["sample_ps"]``.
    ``frames`` and ``cells`` are replica 0's configuration at each of its samples
    ((n_samples, n_atoms, 3) and (n_samples, 3, 3), Å; molecules wrapped whole into the
    box), with the box's ``atomic_numbers`` (O, H, H per water) and O-H ``bonds``.
    """

    density: np.ndarray  # g/cm^3
    potential_energy: np.ndarray  # kJ/mol per molecule
    kinetic_temperature: np.ndarray  # K, 2 KE / (n_dof k_B)
    n_waters: int
    temperature_k: float
    pressure_bar: float
    platform: str
    info: dict[str, Any] = field(default_factory=dict)
    frames: np.ndarray | None = None  # Å
    cells: np.ndarray | None = None  # Å, rows are the box vectors
    atomic_numbers: np.ndarray | None = None
    bonds: np.ndarray | None = None  # (m, 2) atom indices


_WATER_CACHE: dict[tuple, dict[str, Any]] = {}


def _openmm_seed(seed: int) -> int:
    """A nonzero OpenMM random seed from any int (OpenMM reads 0 as 'pick one at random')."""
    return int(seed) % (2**31 - 2) + 1


def _water_setup(box_nm: float, cutoff_nm: float, platform: str, seed: int) -> dict[str, Any]:
    """Build (once per box size, cutoff and platform) the solvated topology, system,
    integrator, barostat and Context (summing forces and energies in a fixed order)."""
    key = (box_nm, cutoff_nm, platform)
    if key in _WATER_CACHE:
        return _WATER_CACHE[key]
    mm = _openmm()
    from openmm import app, unit

    forcefield = app.ForceField("amber14-all.xml", "amber14/tip3p.xml")
    modeller = app.Modeller(app.Topology(), [])
    modeller.addSolvent(forcefield, model="tip3p", boxSize=mm.Vec3(box_nm, box_nm, box_nm))
    system = forcefield.createSystem(
        modeller.topology,
        nonbondedMethod=app.PME,
        nonbondedCutoff=cutoff_nm * unit.nanometer,
        constraints=app.HBonds,
        rigidWater=True,
    )
    barostat = mm.MonteCarloBarostat(1.0, 300.0, 25)
    barostat.setRandomNumberSeed(_openmm_seed(seed))
    system.addForce(barostat)
    integrator = mm.LangevinMiddleIntegrator(300.0, 1.0, 0.002)
    integrator.setRandomNumberSeed(_openmm_seed(seed))
    # reproducible sums (otherwise threads add PME and energy terms in a varying order); on
    # the CPU one thread, which for a few hundred waters is as fast as several
    properties = {
        "CUDA": {"DeterministicForces": "true"},
        "CPU": {"DeterministicForces": "true", "Threads": "1"},
    }.get(platform, {})
    context = mm.Context(system, integrator, mm.Platform.getPlatformByName(platform), properties)
    masses = np.array([system.getParticleMass(i)._value for i in range(system.getNumParticles())])
    removes_com = any(isinstance(f, mm.CMMotionRemover) for f in system.getForces())
    n_waters = modeller.topology.getNumResidues()
    setup = {
        "context": context,
        "integrator": integrator,
        "barostat": barostat,
        "positions": modeller.positions,
        "box": modeller.topology.getPeriodicBoxVectors(),
        "total_mass_amu": float(masses.sum()),
        "molecule_masses": masses.reshape(n_waters, -1),  # addSolvent: O, H1, H2 per water
        "n_waters": n_waters,
        "atomic_numbers": np.array(
            [atom.element.atomic_number for atom in modeller.topology.atoms()], dtype=np.int64
        ),
        "bonds": np.array(
            [(a.index, b.index) for a, b in modeller.topology.bonds()], dtype=np.int64
        ).reshape(-1, 2),
        # rigid water: 3 constraints per molecule; the CMMotionRemover takes 3 more
        "n_dof": 3 * system.getNumParticles() - system.getNumConstraints() - 3 * removes_com,
    }
    _WATER_CACHE[key] = setup
    return setup


def _reset_water_context(setup: dict[str, Any], seed: int, barostat_every: int = 25) -> None:
    """Give the cached Context fresh random streams: the integrator's and barostat's seeds
    only take effect when a Context is (re)initialised, so without this a run would continue
    the previous run's streams and depend on what ran before it. The barostat's move
    interval (steps) is read at the same time."""
    setup["integrator"].setRandomNumberSeed(_openmm_seed(seed))
    setup["barostat"].setRandomNumberSeed(_openmm_seed(seed))
    setup["barostat"].setFrequency(int(barostat_every))
    setup["context"].reinitialize()  # also resets Context parameters to their defaults


def _set_water_state(
    setup: dict[str, Any],
    temperature_k: float,
    pressure_bar: float,
    dt_fs: float,
    friction_per_ps: float,
    positions: Any,
    box: Any,
) -> None:
    """Thermostat, barostat, step, positions and box of the (freshly reset) Context."""
    mm = _openmm()
    context, integrator = setup["context"], setup["integrator"]
    integrator.setTemperature(temperature_k)
    integrator.setFriction(friction_per_ps)
    integrator.setStepSize(dt_fs * 1e-3)
    context.setParameter(mm.MonteCarloBarostat.Pressure(), pressure_bar)
    context.setParameter(mm.MonteCarloBarostat.Temperature(), temperature_k)
    context.setPeriodicBoxVectors(*box)
    context.setPositions(positions)


_EQUILIBRATED_SEED = 12345


def _equilibrated_start(setup: dict[str, Any], equilibrate_ps: float, dt_fs: float) -> Any:
    """Positions and box of the solvated box after minimisation and ``equilibrate_ps`` of NPT
    at 298.15 K and 1 bar (fixed seed), computed once per cached setup and length."""
    key = ("equilibrated", equilibrate_ps, dt_fs)
    if key not in setup:
        mm = _openmm()
        context, integrator = setup["context"], setup["integrator"]
        _reset_water_context(setup, _EQUILIBRATED_SEED)
        _set_water_state(setup, 298.15, 1.0, dt_fs, 1.0, setup["positions"], setup["box"])
        mm.LocalEnergyMinimizer.minimize(context, 10.0, 500)
        context.setVelocitiesToTemperature(298.15, _EQUILIBRATED_SEED)
        integrator.step(int(round(equilibrate_ps * 1000.0 / dt_fs)))
        state = context.getState(getPositions=True)
        setup[key] = (state.getPositions(), state.getPeriodicBoxVectors())
    return setup[key]


def _box_volume(box: Any) -> float:
    """Volume (nm^3) of a rectangular box given as three OpenMM vectors."""
    edges = [np.asarray(getattr(v, "_value", v), dtype=np.float64) for v in box]
    return float(edges[0][0] * edges[1][1] * edges[2][2])


def _sample_water(
    setup: dict[str, Any], n_samples: int, sample_every: int, frames: list | None = None
) -> np.ndarray:
    """Advance ``n_samples * sample_every`` steps; (n_samples, 3) density (g/cm^3), potential
    energy per molecule (kJ/mol) and kinetic temperature (K) after every ``sample_every``.
    With ``frames``, each sample's positions and box vectors (Å, molecules wrapped whole
    into the box) are appended to it."""
    context, integrator = setup["context"], setup["integrator"]
    kinetic_to_k = 2.0 / (setup["n_dof"] * BOLTZMANN_KJ_PER_MOL_K)
    out = np.zeros((n_samples, 3))
    keep = frames is not None
    for k in range(n_samples):
        integrator.step(sample_every)
        s = context.getState(getEnergy=True, getPositions=keep, enforcePeriodicBox=keep)
        if keep:
            positions = s.getPositions(asNumpy=True)._value * 10.0  # nm -> Å
            frames.append((positions, s.getPeriodicBoxVectors(asNumpy=True)._value * 10.0))
        volume = s.getPeriodicBoxVolume()._value  # nm^3
        out[k, 0] = setup["total_mass_amu"] / volume * G_PER_CM3_PER_AMU_PER_NM3
        out[k, 1] = s.getPotentialEnergy()._value / setup["n_waters"]
        out[k, 2] = s.getKineticEnergy()._value * kinetic_to_k
    return out


def water_npt_density(
    temperature_k: float = 298.15,
    pressure_bar: float = 1.0,
    box_nm: float = 2.0,
    cutoff_nm: float = 0.8,
    equilibration_ps: float = 5.0,
    production_ps: float = 10.0,
    dt_fs: float = 2.0,
    sample_every: int = 25,
    n_blocks: int = 5,
    friction_per_ps: float = 1.0,
    seed: int = 0,
    platform: str | None = None,
    start_equilibrated_ps: float = 0.0,
    barostat_every: int = 25,
) -> WaterDensityResult:
    """TIP3P water box protocol: minimise, equilibrate NPT, then measure the density.

    A cubic box of edge ``box_nm`` (2.0 nm holds ~270 waters) is filled by
    ``Modeller.addSolvent`` with the Amber14 TIP3P force field shipped with OpenMM; PME
    electrostatics (real-space ``cutoff_nm``, LJ with the default dispersion correction),
    rigid water, LangevinMiddle thermostat and a MonteCarloBarostat at ``pressure_bar``
    (a volume move every ``barostat_every`` steps). Each call starts from the same solvated
    box, reusing the cached Context (only positions, box, velocities and parameters are reset).

    With ``start_equilibrated_ps`` > 0 a call starts instead from the box minimised and
    equilibrated for that long at 298.15 K and 1 bar (computed once and cached), and skips
    the minimisation: short runs then start near liquid density.

    Reproducible: ``seed`` fixes the initial velocities and the thermostat's and barostat's
    random streams (the Context is reinitialised with it on every call), so the same
    arguments give the same result whatever ran before (on CUDA with deterministic forces).
    """
    mm = _openmm()
    platform = platform or select_platform()
    setup = _water_setup(box_nm, cutoff_nm, platform, seed)
    context, integrator = setup["context"], setup["integrator"]
    if start_equilibrated_ps > 0:
        positions, box = _equilibrated_start(setup, start_equilibrated_ps, dt_fs)
    else:
        positions, box = setup["positions"], setup["box"]
    _reset_water_context(setup, seed, barostat_every)
    _set_water_state(setup, temperature_k, pressure_bar, dt_fs, friction_per_ps, positions, box)
    if start_equilibrated_ps <= 0:
        mm.LocalEnergyMinimizer.minimize(context, 10.0, 500)
    context.setVelocitiesToTemperature(temperature_k, _openmm_seed(seed))

    steps_per_ps = int(round(1000.0 / dt_fs))
    integrator.step(int(round(equilibration_ps * steps_per_ps)))
    n_samples = int(round(production_ps * steps_per_ps)) // sample_every
    series = _sample_water(setup, n_samples, sample_every)
    density, energy = series[:, 0], series[:, 1]
    mean, err = block_average(density, n_blocks)
    return WaterDensityResult(
        density=float(mean),
        density_stderr=float(err),
        density_series=density,
        potential_energy=float(energy.mean()),
        n_waters=setup["n_waters"],
        temperature_k=temperature_k,
        pressure_bar=pressure_bar,
        platform=platform,
        info={
            "box_nm": box_nm,
            "cutoff_nm": cutoff_nm,
            "equilibration_ps": equilibration_ps,
            "production_ps": production_ps,
            "dt_fs": dt_fs,
            "start_equilibrated_ps": start_equilibrated_ps,
            "barostat_every": barostat_every,
            "volume_nm3": float(setup["total_mass_amu"] / mean * G_PER_CM3_PER_AMU_PER_NM3),
        },
    )


# ---- replica protocol: a stock of pre-equilibrated boxes, then independent replicas ---------

#: the grid of states at which pre-equilibrated starting boxes are kept (K, bar); a replica
#: starts from the nearest one (at most 11.9 K and 500 bar away inside 275-370 K, 1-2000 bar)
WATER_STOCK_TEMPERATURES_K = (275.0, 298.75, 322.5, 346.25, 370.0)
WATER_STOCK_PRESSURES_BAR = (1.0, 1000.0, 2000.0)
_STOCK_SEED = 24680
#: density guess (g/cm^3) for a starting box: quadratic in t = (T - 322.5 K) / 47.5 K and
#: p = (P - 1000 bar) / 1000 bar, fitted to 60 ps runs of the 1.6 nm box at the 3 x 3 corners,
#: edge centres and centre of 275-370 K x 1-2000 bar (docs/md_labs.md); residuals <= 0.006
_DENSITY_GUESS = (1.0171, -0.0405, 0.0470, -0.0024, -0.0071, 0.0064)


def tip3p_density_guess(temperature_k: float, pressure_bar: float) -> float:
    """Rough TIP3P density (g/cm^3) of the lab's box, used only to scale starting boxes.

    >>> round(tip3p_density_guess(322.5, 1000.0), 4)
    1.0171
    """
    t, p = (temperature_k - 322.5) / 47.5, (pressure_bar - 1000.0) / 1000.0
    c = _DENSITY_GUESS
    return c[0] + c[1] * t + c[2] * p + c[3] * t * t + c[4] * p * p + c[5] * t * p


def _scaled_to_density(setup: dict[str, Any], positions: Any, box: Any, density: float):
    """Positions and box with every molecule's centre of mass (and the box) scaled so that
    the box has ``density`` (g/cm^3); molecules keep their shape, as in a barostat move."""
    mm = _openmm()
    masses = setup["molecule_masses"]
    xyz = np.asarray(getattr(positions, "_value", positions), dtype=np.float64)
    xyz = xyz.reshape(masses.shape[0], masses.shape[1], 3)
    now = setup["total_mass_amu"] / _box_volume(box) * G_PER_CM3_PER_AMU_PER_NM3
    scale = (now / density) ** (1.0 / 3.0)
    com = (xyz * masses[..., None]).sum(axis=1) / masses.sum(axis=1)[:, None]
    xyz = xyz + (scale - 1.0) * com[:, None, :]
    edges = [np.asarray(getattr(v, "_value", v), dtype=np.float64) * scale for v in box]
    return xyz.reshape(-1, 3), tuple(mm.Vec3(*e) for e in edges)


def _stock_parent(temperature_k: float, pressure_bar: float) -> tuple[float, float] | None:
    """The stock state a stock box is grown from: the next lower pressure, else the next
    temperature towards 298.75 K at 1 bar (None: grown from the ambient box)."""
    temps, pressures = WATER_STOCK_TEMPERATURES_K, WATER_STOCK_PRESSURES_BAR
    j = pressures.index(pressure_bar)
    if j > 0:
        return temperature_k, pressures[j - 1]
    i, root = temps.index(temperature_k), temps.index(298.75)
    if i == root:
        return None
    return temps[i + (1 if i < root else -1)], pressures[0]


def _stock_box(
    setup: dict[str, Any],
    state: tuple[float, float],
    index: int,
    build_ps: float,
    spacing_ps: float,
    dt_fs: float,
    friction_per_ps: float,
    barostat_every: int,
) -> tuple[np.ndarray, Any]:
    """Positions and box of stock box ``index`` at a grid state, computed once per cached
    setup (so that it depends on nothing but the arguments): box 0 is the parent state's
    box 0 scaled to the guessed density and run ``build_ps`` at the state; box k is box
    k - 1 run ``spacing_ps`` further. Each run has a fixed seed of its own."""
    temperature_k, pressure_bar = state
    protocol = (build_ps, spacing_ps, dt_fs, friction_per_ps, barostat_every)
    key = ("stock", state, index, protocol)
    if key in setup:
        return setup[key]
    if index > 0:
        positions, box = _stock_box(setup, state, index - 1, *protocol)
        run_ps = spacing_ps
    else:
        parent = _stock_parent(temperature_k, pressure_bar)
        if parent is None:
            positions, box = _equilibrated_start(setup, 1.0, 2.0)
        else:
            positions, box = _stock_box(setup, parent, 0, *protocol)
        guess = tip3p_density_guess(temperature_k, pressure_bar)
        positions, box = _scaled_to_density(setup, positions, box, guess)
        run_ps = build_ps
    i = WATER_STOCK_TEMPERATURES_K.index(temperature_k)
    j = WATER_STOCK_PRESSURES_BAR.index(pressure_bar)
    seed = _STOCK_SEED + 1000 * index + 10 * i + j
    _reset_water_context(setup, seed, barostat_every)
    _set_water_state(setup, temperature_k, pressure_bar, dt_fs, friction_per_ps, positions, box)
    setup["context"].setVelocitiesToTemperature(temperature_k, _openmm_seed(seed))
    setup["integrator"].step(int(round(run_ps * 1000.0 / dt_fs)))
    result = setup["context"].getState(getPositions=True)
    setup[key] = (result.getPositions(asNumpy=True)._value, result.getPeriodicBoxVectors())
    return setup[key]


def nearest_stock_state(temperature_k: float, pressure_bar: float) -> tuple[float, float]:
    """The stock grid state a run at (temperature_k, pressure_bar) starts from."""
    t = min(WATER_STOCK_TEMPERATURES_K, key=lambda g: (abs(g - temperature_k), g))
    p = min(WATER_STOCK_PRESSURES_BAR, key=lambda g: (abs(g - pressure_bar), g))
    return t, p


def water_npt_replicas(
    temperature_k: float,
    pressure_bar: float,
    n_replicas: int = 4,
    equilibration_ps: float = 1.0,
    production_ps: float = 1.0,
    seed: int = 0,
    box_nm: float = 1.6,
    cutoff_nm: float = 0.7,
    dt_fs: float = 2.0,
    friction_per_ps: float = 5.0,
    barostat_every: int = 5,
    sample_every: int = 25,
    stock_build_ps: float = 3.0,
    stock_spacing_ps: float = 1.5,
    equilibration_dt_fs: float | None = None,
    platform: str | None = None,
) -> WaterReplicaResult:
    """Independent NPT replicas of a TIP3P box at one state, for error bars from the data.

    The system is that of :func:`water_npt_density`. Replica ``r`` starts from stock box
    ``r`` of the nearest grid state (:data:`WATER_STOCK_TEMPERATURES_K` x
    :data:`WATER_STOCK_PRESSURES_BAR`): the first grown once per process from its
    neighbour state for ``stock_build_ps``, the next ones ``stock_spacing_ps`` apart along
    one run at the grid state, each with a fixed seed. The box is scaled to the guessed
    density of the requested state (:func:`tip3p_density_guess`), velocities are drawn at
    ``temperature_k``, the replica equilibrates for ``equilibration_ps`` and is then sampled
    every ``sample_every`` steps for ``production_ps``. Replica ``r`` draws its velocities
    and its thermostat and barostat streams from the ``r``-th seed of ``seed``'s
    ``SeedSequence``, so the replicas are independent and the result depends only on the
    arguments, whatever ran before.
    """
    platform = platform or select_platform()
    setup = _water_setup(box_nm, cutoff_nm, platform, seed)
    eq_dt_fs = dt_fs if equilibration_dt_fs is None else float(equilibration_dt_fs)
    steps_per_ps = 1000.0 / dt_fs
    n_samples = int(round(production_ps * steps_per_ps)) // sample_every
    if n_replicas < 1 or n_samples < 2:
        raise ValueError("need at least one replica and two production samples")
    stock_state = nearest_stock_state(temperature_k, pressure_bar)
    protocol = (stock_build_ps, stock_spacing_ps, eq_dt_fs, friction_per_ps, barostat_every)
    guess = tip3p_density_guess(temperature_k, pressure_bar)
    seeds = np.random.SeedSequence(int(seed)).generate_state(2 * n_replicas).reshape(-1, 2)
    series = np.zeros((n_replicas, n_samples, 3))
    frames: list[tuple[np.ndarray, np.ndarray]] = []  # replica 0's configurations
    context, integrator = setup["context"], setup["integrator"]
    for r, (replica_seed, velocity_seed) in enumerate(seeds.tolist()):
        positions, box = _stock_box(setup, stock_state, r, *protocol)
        positions, box = _scaled_to_density(setup, positions, box, guess)
        _reset_water_context(setup, replica_seed, barostat_every)
        _set_water_state(
            setup, temperature_k, pressure_bar, eq_dt_fs, friction_per_ps, positions, box
        )
        context.setVelocitiesToTemperature(temperature_k, _openmm_seed(replica_seed))
        integrator.step(int(round(equilibration_ps * 1000.0 / eq_dt_fs)))
        if eq_dt_fs != dt_fs:
            # the longer step's half-step velocities read warm: production starts from
            # velocities drawn afresh at the set point
            integrator.setStepSize(dt_fs * 1e-3)
            context.setVelocitiesToTemperature(temperature_k, _openmm_seed(velocity_seed))
        series[r] = _sample_water(setup, n_samples, sample_every, frames if r == 0 else None)
    return WaterReplicaResult(
        density=series[..., 0],
        potential_energy=series[..., 1],
        kinetic_temperature=series[..., 2],
        n_waters=setup["n_waters"],
        temperature_k=temperature_k,
        pressure_bar=pressure_bar,
        platform=platform,
        info={
            "box_nm": box_nm,
            "cutoff_nm": cutoff_nm,
            "n_replicas": n_replicas,
            "equilibration_ps": equilibration_ps,
            "production_ps": n_samples * sample_every / steps_per_ps,
            "sample_ps": sample_every / steps_per_ps,
            "dt_fs": dt_fs,
            "equilibration_dt_fs": eq_dt_fs,
            "friction_per_ps": friction_per_ps,
            "barostat_every": barostat_every,
            "stock_state": stock_state,
            "stock_build_ps": stock_build_ps,
            "stock_spacing_ps": stock_spacing_ps,
            "n_dof": setup["n_dof"],
        },
        frames=np.stack([p for p, _ in frames]),
        cells=np.stack([np.asarray(c, dtype=np.float64) for _, c in frames]),
        atomic_numbers=setup["atomic_numbers"],
        bonds=setup["bonds"],
    )
