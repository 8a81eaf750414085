"""Batched Lennard-Jones molecular dynamics in NVIDIA Warp (reduced units).

Units: epsilon = sigma = mass = k_B = 1; time in tau = sigma sqrt(m / epsilon); temperature
T* = k_B T / epsilon; pressure P* = P sigma^3 / epsilon; density rho* = N sigma^3 / V.

Many independent systems (periodic boxes and isolated clusters, any mix, any sizes) advance
together: each stage of a step is one kernel launch over all atoms of the batch. Periodic
systems use the truncated (not shifted) potential at ``cutoff`` with minimum-image distances;
clusters use the full potential (``cluster_cutoff=None``). Pairs come from Verlet neighbour
lists with a skin, rebuilt per system when an atom of that system has moved more than half
the skin; lists are built from per-system cells of at least (rc + skin) / 2 where a box holds
at least 6 per edge, else by an all-pairs search within the system (boxes under ~3 (rc + skin)
across, where cells would not prune anything). On the CPU the lists are half lists and each
pair's force is applied to both atoms (Newton's third law); on CUDA they are full lists, each
thread writing only its own atom's force (see :mod:`~labtwin.simulators.md._lj_kernels`).
The lists are the shared ones of :mod:`labtwin.simulators.neighbours` (also the EMT
engine's), in its packed encoding.
Engines are kept between :func:`run_lj` calls of one layout (:func:`checkout_engine`).

Integrator: BAOAB Langevin (Leimkuhler & Matthews, Appl. Math. Res. Express 2013, 34) with a
per-system target temperature and friction; friction 0 gives plain velocity Verlet (NVE).
Random numbers are counter-based (keyed by system seed, step and atom index within the
system), so a seed fixes the trajectory, and a system gives the same trajectory in any batch.

Warp is imported lazily inside functions; importing this module does not initialise Warp.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labtwin.simulators.md.observables import (
    block_average,
    diffusion_from_msd,
    lj_tail_energy,
    lj_tail_pressure,
    rdf_normalise,
)
from labtwin.simulators.md.state import MDState
from labtwin.simulators.neighbours import NeighbourLists
from labtwin.simulators.warp_runtime import init_warp

DEFAULT_CUTOFF = 2.5  # sigma
DEFAULT_SKIN = 0.3  # sigma


def _warp() -> Any:
    return init_warp()


def default_device() -> str:
    """``"cuda"`` when Warp sees a CUDA device, else ``"cpu"``."""
    return "cuda" if _warp().is_cuda_available() else "cpu"


@dataclass
class LJResults:
    """Per-system observables of a :func:`run_lj` run (reduced units).

    ``mean[name]`` and ``stderr[name]`` are (n_systems,) arrays; ``series[name]`` is
    (n_samples, n_systems). Names: ``temperature``, ``potential_energy`` (per particle, with
    the tail correction for periodic systems), ``potential_energy_truncated`` (without it),
    ``pressure`` and ``pressure_truncated`` (virial, NaN for clusters), ``total_energy`` (per
    particle, truncated potential plus kinetic), ``diffusion`` (sigma^2/tau, from MSD windows;
    absent when a window holds fewer than 4 samples).
    """

    mean: dict[str, np.ndarray]
    stderr: dict[str, np.ndarray]
    series: dict[str, np.ndarray]
    time: np.ndarray  # (n_samples,) sample times (tau) since the start of sampling
    state: MDState  # final state (host)
    device: str
    rdf_r: np.ndarray | None = None  # (n_bins,) bin centres (sigma)
    rdf: np.ndarray | None = None  # (n_systems, n_bins) g(r)
    rdf_stderr: np.ndarray | None = None
    msd_lag: np.ndarray | None = None  # (window,) lag times (tau)
    msd: np.ndarray | None = None  # (n_systems, window) MSD averaged over windows (sigma^2)
    trajectory: np.ndarray | None = None  # (n_frames, n_atoms, 3) unwrapped positions
    trajectory_time: np.ndarray | None = None  # (n_frames,) tau
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class QuenchResult:
    """Result of :func:`quench_lj`: per-system total potential energy (epsilon), largest atom
    force (epsilon/sigma), convergence flags, FIRE iterations used and the quenched state."""

    energy: np.ndarray
    fmax: np.ndarray
    converged: np.ndarray
    n_steps: int
    state: MDState


class WarpLJ:
    """Device arrays and kernels for one batch of LJ systems (see the module docstring).

    Args:
        state: systems to simulate (host or Warp arrays; float32 or float64).
        cutoff: truncation radius for periodic systems (sigma), at most half the shortest box edge.
        skin: neighbour-list skin (sigma).
        cluster_cutoff: truncation radius for clusters; None for the full potential.
        shift_energy: subtract the pair energy at the cutoff (forces unchanged).
        device: Warp device; default from the state if it is on a Warp device, else
            :func:`default_device`.
    """

    def __init__(
        self,
        state: MDState,
        cutoff: float = DEFAULT_CUTOFF,
        skin: float = DEFAULT_SKIN,
        cluster_cutoff: float | None = None,
        shift_energy: bool = False,
        device: str | None = None,
    ) -> None:
        wp = _warp()
        from labtwin.simulators.md._lj_kernels import make_kernels

        self.wp = wp
        if device is None:
            device = state.device if state.device != "numpy" else default_device()
        self.device = str(wp.get_device(device))
        # half lists with Newton's third law where launches are serial (CPU), full lists
        # with one writer per force on CUDA (see _lj_kernels)
        self.half_list = not wp.get_device(self.device).is_cuda
        host = state.numpy()
        self.dtype = np.float64 if host.dtype == np.float64 else np.float32
        self.scalar = wp.float64 if self.dtype == np.float64 else wp.float32
        self.vec3 = wp.vec3d if self.dtype == np.float64 else wp.vec3f
        self.kernels = make_kernels(self.scalar)
        self.n_atoms, self.n_systems = host.n_atoms, host.n_systems
        self.cutoff, self.skin = float(cutoff), float(skin)
        # species do not enter LJ (one species), but a state read back keeps them
        self._numbers = None if host.numbers is None else host.numbers.copy()

        periodic = np.asarray(host.periodic, dtype=bool)
        box = host.box.astype(np.float64)
        counts = host.atoms_per_system()
        triclinic = np.flatnonzero(periodic & ~host.orthorhombic())
        if triclinic.size:  # their box rows are NaN, which every cutoff check below passes
            raise ValueError(
                f"the LJ engine runs orthorhombic boxes only; systems {triclinic[:5].tolist()} "
                "have triclinic cells"
            )
        if np.any(periodic & (cutoff > box.min(axis=1) / 2 + 1e-12)):
            raise ValueError(f"cutoff {cutoff} exceeds half the shortest edge of a periodic box")
        rc = np.where(periodic, cutoff, np.inf if cluster_cutoff is None else cluster_cutoff)
        r_list = rc + skin
        shift = np.where(np.isfinite(rc), 4.0 * (rc**-12.0 - rc**-6.0), 0.0) * shift_energy

        self.periodic_host = periodic
        self._box_host = host.box.astype(self.dtype)
        self.counts = counts
        self.volume = np.where(periodic, box.prod(axis=1), np.nan)
        density = np.where(periodic, counts / np.where(periodic, box.prod(axis=1), 1.0), 0.0)
        sphere = 4.0 / 3.0 * np.pi * np.where(np.isfinite(r_list), r_list, 0.0) ** 3
        expected = np.where(np.isfinite(r_list), density * sphere, counts)
        # a half list by atom index fills its first rows as a full list does; a box under
        # twice the list radius lists some pairs at two images
        most = np.where(periodic, 27 * counts, np.maximum(counts - 1, 1))
        capacity = int(np.clip(1.5 * expected + 16, 1, most).max())

        def arr(values: np.ndarray, dtype: Any) -> Any:
            return wp.array(values, dtype=dtype, device=self.device)

        s = self.scalar
        self.x = arr(host.positions.astype(self.dtype), self.vec3)
        self.v = arr(host.velocities.astype(self.dtype), self.vec3)
        self.v_mid = wp.clone(self.v)  # post-O velocities of the last step (kinetic temperature)
        self.f = wp.zeros(self.n_atoms, dtype=self.vec3, device=self.device)
        self.mass = arr(host.masses.astype(self.dtype), s)
        self.atom_sys = arr(host.system_idx.astype(np.int32), wp.int32)
        self.sys_start = arr(host.system_start(), wp.int32)
        # Verlet lists (labtwin.simulators.neighbours): packed (j << 5) | image code entries
        # from home-box positions xw; half rows with Newton's third law where launches are
        # serial (CPU), full sorted rows with one writer per force on CUDA; cell lists or an
        # all-pairs search chosen per box
        self.lists = NeighbourLists(
            self.x,
            self.atom_sys,
            self.sys_start,
            box[:, :, None] * np.eye(3),
            periodic,
            rc,
            skin,
            half=self.half_list,
            packed=True,
            capacity=capacity,
            device=self.device,
        )
        self.box, self.inv_box = self.lists.box, self.lists.inv_box
        self.periodic = self.lists.periodic
        self.cutoff2 = arr((rc**2).astype(self.dtype), s)
        # image_shift[s, code]: the periodic image n L of a neighbour entry's image code
        # (nx + 1) * 9 + (ny + 1) * 3 + (nz + 1), n in {-1, 0, 1}^3 (the packed encoding of
        # labtwin.simulators.neighbours)
        images = np.stack(np.meshgrid(*[np.arange(-1, 2)] * 3, indexing="ij"), -1).reshape(27, 3)
        self.image_shift = arr(
            (images[None, :, :] * host.box[:, None, :].astype(np.float64)).astype(self.dtype),
            self.vec3,
        )
        self.energy_shift = arr(shift.astype(self.dtype), s)
        self.x_origin = wp.clone(self.x)
        self.atom_energy = wp.zeros(self.n_atoms, dtype=s, device=self.device)
        self.atom_virial = wp.zeros(self.n_atoms, dtype=s, device=self.device)
        self.step_counter = wp.zeros(1, dtype=wp.int32, device=self.device)
        # thermostat: NVE until set_thermostat is called
        self.temperature = wp.zeros(self.n_systems, dtype=s, device=self.device)
        self.c1 = arr(np.ones(self.n_systems, dtype=self.dtype), s)
        self.c2 = wp.zeros(self.n_systems, dtype=s, device=self.device)
        self.seed = wp.zeros(self.n_systems, dtype=wp.int32, device=self.device)
        self.friction_host = np.zeros(self.n_systems)
        self._graph: tuple[Any, Any] | None = None
        self._recorded: tuple[float, list[Any], list[Any]] | None = None
        self._recording: list[Any] | None = None
        self._saved: list[Any] | None = None  # a chunk's starting point, kept for a redo
        self._cache_key: tuple | None = None  # set by checkout_engine
        self.rebuild_all()

    # ------------------------------------------------------------------ neighbour lists
    # the engine's view of its NeighbourLists: the rows, home-box positions and reference
    # positions the force kernels and a chunk's redo read
    @property
    def nbr(self) -> Any:
        return self.lists.nbr

    @property
    def nbr_count(self) -> Any:
        return self.lists.nbr_count

    @property
    def xw(self) -> Any:
        return self.lists.xw

    @property
    def x_ref(self) -> Any:
        return self.lists.x_ref

    @property
    def offset(self) -> Any:
        return self.lists.offset

    @property
    def overflow(self) -> Any:
        return self.lists.overflow

    @property
    def n_cells(self) -> Any:
        return self.lists.n_cells

    @property
    def nbr_capacity(self) -> int:
        return self.lists.capacity

    @nbr_capacity.setter
    def nbr_capacity(self, capacity: int) -> None:
        self.lists.capacity = int(capacity)  # takes effect at _allocate_lists

    def _allocate_lists(self) -> None:
        self.lists.resize(self.lists.capacity)
        self._graph = None
        self._recorded = None

    def _go(self, kernel: Any, dim: int, inputs: list[Any]) -> None:
        """Launch ``kernel`` now, or record it when a step is being recorded for replay."""
        launch = self.wp.launch(
            kernel, dim, inputs, device=self.device, record_cmd=self._recording is not None
        )
        if self._recording is not None:
            self._recording.append(launch)

    def _list_and_force_launches(self, energy: bool = True) -> None:
        self.lists.launch_build(self._go)
        self._force_launches(energy)

    def _force_launches(self, energy: bool = True) -> None:
        """Forces; per-atom energies and virials too unless ``energy`` is False (CPU half
        lists only: a step whose sums are never read skips them, the forces are the same)."""
        k = self.kernels
        args = [
            self.xw,
            self.atom_sys,
            self.image_shift,
            self.cutoff2,
            self.energy_shift,
            self.nbr,
            self.nbr_count,
            self.f,
            self.atom_energy,
            self.atom_virial,
        ]
        if self.half_list:
            self._go(k.zero_forces, self.n_atoms, [self.f])
            self._go(k.lj_forces_half, self.n_atoms, [*args, int(energy)])
        else:
            self._go(k.lj_forces, self.n_atoms, args)

    def _update_forces(self, energy: bool = True) -> None:
        """Rebuild lists of systems whose atoms moved more than skin/2, then forces (and
        per-atom energies and virials unless ``energy`` is False)."""
        self.lists.launch_check(self._go)
        self._list_and_force_launches(energy)

    def rebuild_all(self) -> None:
        """Rebuild every neighbour list (growing capacities on overflow) and compute forces."""
        while True:
            self.overflow.zero_()
            self.lists.launch_flags(1)
            self._list_and_force_launches()
            if not self._grow_on_overflow():
                return

    def _grow_on_overflow(self) -> bool:
        """True (after enlarging the neighbour lists) if the last lists overflowed."""
        if not self.lists.grow_on_overflow():
            return False
        self._graph = None  # recorded launches hold the old rows
        self._recorded = None
        return True

    # ------------------------------------------------------------------ dynamics
    def set_thermostat(
        self,
        temperature: float | np.ndarray,
        friction: float | np.ndarray,
        dt: float,
        seed: int | np.ndarray,
    ) -> None:
        """Langevin target ``temperature`` (T*) and ``friction`` (1/tau) per system; friction
        0 means NVE. ``seed`` is one int per system or one int (then system s gets seed+s)."""
        n = self.n_systems
        temperature = np.broadcast_to(np.asarray(temperature, dtype=np.float64), (n,))
        friction = np.broadcast_to(np.asarray(friction, dtype=np.float64), (n,))
        seeds = np.asarray(seed, dtype=np.int64)
        if seeds.ndim == 0:
            seeds = seeds + np.arange(n)
        c1 = np.exp(-friction * dt)
        c2 = np.sqrt(1.0 - c1**2)
        self.temperature.assign(temperature.astype(self.dtype))
        self.c1.assign(c1.astype(self.dtype))
        self.c2.assign(c2.astype(self.dtype))
        self.seed.assign((seeds % (2**31)).astype(np.int32))
        self.friction_host = friction.copy()

    def _step_launches(self, dt: float, energy: bool = True) -> None:
        k = self.kernels
        dt_s = self.scalar(dt)
        self._go(
            k.langevin_baoa,
            self.n_atoms,
            [
                self.x,
                self.v,
                self.v_mid,
                self.f,
                self.mass,
                self.atom_sys,
                self.sys_start,
                self.c1,
                self.c2,
                self.temperature,
                self.seed,
                self.step_counter,
                dt_s,
            ],
        )
        self._update_forces(energy)
        self._go(k.kick, self.n_atoms, [self.v, self.f, self.mass, self.step_counter, dt_s])

    def _launch_steps(self, n_steps: int, dt: float) -> None:
        wp = self.wp
        if not wp.get_device(self.device).is_cuda:
            # on the CPU, replay recorded launches (skips Python argument packing): steps
            # without per-atom energies and virials, then one with them, so the sums read
            # after the chunk are those of its last step
            if self._recorded is None or self._recorded[0] != dt:
                recorded = []
                for energy in (False, True):
                    self._recording = []
                    self._step_launches(dt, energy)
                    recorded.append(self._recording)
                self._recorded, self._recording = (dt, *recorded), None
            _, plain, with_energy = self._recorded
            for step in range(n_steps):
                for launch in with_energy if step == n_steps - 1 else plain:
                    launch.launch()
            return
        # on CUDA, capture a chunk of steps once as a graph and replay it
        key = (n_steps, dt)
        if self._graph is None or self._graph[0] != key:
            with wp.ScopedCapture(device=self.device) as capture:
                for _ in range(n_steps):
                    self._step_launches(dt)
            self._graph = (key, capture.graph)
        wp.capture_launch(self._graph[1])

    def advance(self, n_steps: int, dt: float) -> None:
        """Advance all systems ``n_steps`` steps of ``dt`` (tau).

        If a neighbour or cell list overflowed, the chunk is repeated from its start with
        larger lists, rebuilt from the positions the chunk's first lists were built from
        (``x_ref``), so they hold the same pairs in the same order and the result is the same.
        """
        wp = self.wp
        live = (self.x, self.v, self.v_mid, self.step_counter, self.x_ref)
        if self._saved is None:
            self._saved = [wp.empty_like(a) for a in live]
        saved = self._saved
        for target, source in zip(saved, live):
            wp.copy(target, source)
        self.overflow.zero_()
        self._launch_steps(n_steps, dt)
        while self._grow_on_overflow():
            wp.copy(self.x, saved[-1])
            self.rebuild_all()  # lists (and x_ref) as at the last rebuild before the chunk
            for target, source in zip((self.x, self.v, self.v_mid, self.step_counter), saved):
                wp.copy(target, source)
            self.overflow.zero_()
            # forces at the chunk's start from those lists (no system flagged for a rebuild)
            self.lists.launch_flags(0)
            self._list_and_force_launches()
            self.overflow.zero_()
            self._launch_steps(n_steps, dt)

    def fits(self, state: MDState) -> bool:
        """True if ``state`` has this engine's layout (float type, systems, atom counts,
        boxes, periodicity), so that :meth:`load` can take it."""
        host = state.numpy()
        return (
            host.dtype == self.dtype
            and host.n_atoms == self.n_atoms
            and host.n_systems == self.n_systems
            and np.array_equal(host.atoms_per_system(), self.counts)
            and np.array_equal(host.box.astype(self.dtype), self._box_host)
            and np.array_equal(np.asarray(host.periodic, dtype=bool), self.periodic_host)
        )

    def load(self, state: MDState) -> None:
        """Start over from ``state`` (same layout, see :meth:`fits`) in the arrays and the
        compiled, recorded launches this engine already has; the results are those of a new
        engine, bit for bit (list capacities do not change them)."""
        if not self.fits(state):
            raise ValueError("state does not have this engine's layout")
        host = state.numpy()
        wp = self.wp
        self._numbers = None if host.numbers is None else host.numbers.copy()
        self.x.assign(host.positions.astype(self.dtype))
        self.v.assign(host.velocities.astype(self.dtype))
        self.mass.assign(host.masses.astype(self.dtype))
        wp.copy(self.v_mid, self.v)
        wp.copy(self.x_origin, self.x)
        self.offset.zero_()
        self.step_counter.zero_()
        self.temperature.zero_()
        self.c1.fill_(1.0)
        self.c2.zero_()
        self.seed.zero_()
        self.friction_host = np.zeros(self.n_systems)
        self.rebuild_all()

    # ------------------------------------------------------------------ read-out
    def state(self) -> MDState:
        """Current state as a host :class:`MDState`."""
        return MDState(
            positions=self.x.numpy().copy(),
            velocities=self.v.numpy().copy(),
            masses=self.mass.numpy().copy(),
            system_idx=self.atom_sys.numpy().copy(),
            box=self.box.numpy().copy(),
            periodic=self.periodic_host.copy(),
            numbers=None if self._numbers is None else self._numbers.copy(),
        )

    def energies(self) -> dict[str, np.ndarray]:
        """Per-system sums at the current state: ``kinetic``, ``potential`` (truncated, no
        tail), ``virial`` (sum of r . F over pairs), ``msd`` (about ``x_origin``)."""
        out = {
            name: self.wp.zeros((1, self.n_systems), dtype=self.wp.float64, device=self.device)
            for name in ("kinetic", "potential", "virial", "msd")
        }
        self._launch_sums(0, out)
        return {name: a.numpy()[0] for name, a in out.items()}

    def forces(self) -> np.ndarray:
        """(n_atoms, 3) forces at the current positions (epsilon / sigma)."""
        return self.f.numpy().copy()

    def _launch_sums(self, row: int, out: dict[str, Any]) -> None:
        self.wp.launch(
            self.kernels.system_sums,
            self.n_systems,
            [
                self.x,
                self.v,
                self.v_mid,
                self.c2,
                self.mass,
                self.atom_energy,
                self.atom_virial,
                self.x_origin,
                self.sys_start,
                row,
                out["kinetic"],
                out["potential"],
                out["virial"],
                out["msd"],
            ],
            device=self.device,
        )


# Engines kept between calls (run_lj, quench_lj, lj_energy_forces), so that a lab's
# experiments of one layout reuse arrays, compiled kernels and recorded launches. An engine is
# taken out while in use (so concurrent calls never share one) and put back only after a
# call completes; it is reloaded from the caller's state each time.
_ENGINES: dict[tuple, list[WarpLJ]] = {}
_ENGINES_KEPT = 8
_ENGINES_LOCK = threading.Lock()


def _engine_key(state: MDState, device: str | None, **options: Any) -> tuple:
    host = state.numpy()
    if device is None:
        device = state.device if state.device != "numpy" else default_device()
    device = str(_warp().get_device(device))
    layout = (
        str(host.dtype),
        host.atoms_per_system().tobytes(),
        host.box.tobytes(),
        np.asarray(host.periodic, dtype=bool).tobytes(),
    )
    return (device, *layout, *sorted(options.items()))


def checkout_engine(state: MDState, device: str | None = None, **options: Any) -> WarpLJ:
    """A :class:`WarpLJ` loaded with ``state``: a kept engine of the same layout and options
    where there is one (see :func:`checkin_engine`), else a new one."""
    options = {
        "cutoff": DEFAULT_CUTOFF,
        "skin": DEFAULT_SKIN,
        "cluster_cutoff": None,
        "shift_energy": False,
        **options,
    }
    key = _engine_key(state, device, **options)
    with _ENGINES_LOCK:
        kept = _ENGINES.get(key)
        engine = kept.pop() if kept else None
        if kept is not None and not kept:
            del _ENGINES[key]
    if engine is None:
        engine = WarpLJ(state, device=device, **options)
        engine._cache_key = key
        return engine
    engine.load(state)
    return engine


def checkin_engine(engine: WarpLJ) -> None:
    """Keep ``engine`` for a later :func:`checkout_engine` (the most recent few are kept)."""
    key = engine._cache_key
    if key is None:
        return
    with _ENGINES_LOCK:
        _ENGINES.pop(key, None)
        _ENGINES[key] = [engine]
        while len(_ENGINES) > _ENGINES_KEPT:
            del _ENGINES[next(iter(_ENGINES))]


def lj_energy_forces(
    state: MDState,
    cutoff: float = DEFAULT_CUTOFF,
    cluster_cutoff: float | None = None,
    device: str | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Truncated LJ potential energy per system (epsilon, total, no tail correction),
    forces (n_atoms, 3) (epsilon/sigma) and the pair virial sum of r . F per system."""
    engine = checkout_engine(state, device, cutoff=cutoff, cluster_cutoff=cluster_cutoff)
    sums = engine.energies()
    forces = engine.forces()
    checkin_engine(engine)
    return sums["potential"], forces, sums["virial"]


def run_lj(
    state: MDState,
    n_steps: int,
    dt: float = 0.005,
    temperature: float | np.ndarray = 1.0,
    friction: float | np.ndarray = 1.0,
    seed: int | np.ndarray = 0,
    sample_every: int = 10,
    n_equilibration: int = 0,
    cutoff: float = DEFAULT_CUTOFF,
    skin: float = DEFAULT_SKIN,
    cluster_cutoff: float | None = None,
    shift_energy: bool = False,
    tail_correction: bool = True,
    n_blocks: int = 10,
    rdf_bins: int = 0,
    rdf_r_max: float | None = None,
    msd_window: int | None = None,
    trajectory_every: int = 0,
    trajectory_samples: Sequence[int] = (),
    device: str | None = None,
) -> LJResults:
    """Run Langevin (``friction`` > 0) or NVE (``friction`` = 0) LJ dynamics on all systems.

    Args:
        state: initial state (reduced units); positions need not be wrapped.
        n_steps: production steps; observables are sampled every ``sample_every`` steps.
        dt: time step (tau).
        temperature: target T* per system (ignored where friction is 0).
        friction: Langevin friction gamma (1/tau) per system; 0 gives NVE velocity Verlet.
        seed: int (system s uses seed + s) or one int per system; same seed, same trajectory.
        n_equilibration: steps run before sampling starts (not recorded).
        cutoff, skin, cluster_cutoff, shift_energy: see :class:`WarpLJ` (by default the
            potential is truncated, not shifted).
        tail_correction: add the standard long-range corrections (g = 1 beyond the cutoff)
            to ``potential_energy`` and ``pressure`` of periodic systems (not applied to a
            shifted potential, whose energies are not those of the full LJ fluid).
        n_blocks: blocks for the block-averaged standard errors.
        rdf_bins: number of g(r) bins (0: no g(r)); ``rdf_r_max`` defaults to half the
            shortest periodic box edge.
        msd_window: samples per MSD time-origin window (default: n_samples // 5); the
            diffusion coefficient is fitted per window and averaged over windows.
        trajectory_every: keep positions every this many samples (0: none).
        trajectory_samples: also keep positions after these samples (0-based indices),
            e.g. the last sample of each of a batch's runs of different lengths.
        device: Warp device (default: CUDA if available, else CPU).

    Temperatures count 3N degrees of freedom per system under Langevin dynamics and 3N - 3
    under NVE (total momentum conserved). Under Langevin dynamics the kinetic energy (in the
    temperature and the pressure) is read from the mid-step velocities, after the O part of
    BAOAB: the full-step velocities read cooler than the thermostat by O(dt^2) (0.4 % at
    T* = 1.2, rho* = 0.8, dt = 0.005, measured), the mid-step ones agree with it. Pressure is (2 K + sum r.F) / (3 V).
    """
    n_samples = n_steps // sample_every
    if n_samples < 1:
        raise ValueError("n_steps must be at least sample_every")
    engine = checkout_engine(
        state,
        device,
        cutoff=cutoff,
        skin=skin,
        cluster_cutoff=cluster_cutoff,
        shift_energy=shift_energy,
    )
    wp = engine.wp
    engine.set_thermostat(temperature, friction, dt, seed)
    for _ in range(n_equilibration // sample_every):
        engine.advance(sample_every, dt)
    if n_equilibration % sample_every:
        engine.advance(n_equilibration % sample_every, dt)

    msd_window = msd_window or max(n_samples // 5, 2)
    sums = {
        name: wp.zeros((n_samples, engine.n_systems), dtype=wp.float64, device=engine.device)
        for name in ("kinetic", "potential", "virial", "msd")
    }
    periodic = engine.periodic_host
    want_rdf = rdf_bins > 0 and periodic.any()
    if want_rdf:
        if rdf_r_max is None:
            rdf_r_max = float(state.numpy().box[periodic].min() / 2)
        rdf_blocks = min(n_blocks, n_samples)
        hist = wp.zeros(
            (rdf_blocks, engine.n_systems, rdf_bins), dtype=wp.int32, device=engine.device
        )
    frames: list[np.ndarray] = []
    frame_samples: list[int] = []
    keep = {int(k) for k in trajectory_samples}
    for k in range(n_samples):
        if k % msd_window == 0:
            wp.copy(engine.x_origin, engine.x)
        engine.advance(sample_every, dt)
        engine._launch_sums(k, sums)
        if want_rdf:
            wp.launch(
                engine.kernels.rdf_histogram,
                engine.n_atoms,
                [
                    engine.x,
                    engine.atom_sys,
                    engine.sys_start,
                    engine.box,
                    engine.inv_box,
                    engine.periodic,
                    engine.scalar(rdf_r_max / rdf_bins),
                    k * rdf_blocks // n_samples,
                    hist,
                ],
                device=engine.device,
            )
        if (trajectory_every and k % trajectory_every == 0) or k in keep:
            frames.append(engine.x.numpy().copy())
            frame_samples.append(k)

    raw = {name: a.numpy() for name, a in sums.items()}
    n = engine.counts.astype(np.float64)
    dof = np.where(engine.friction_host > 0, 3 * n, 3 * n - 3)
    density = n / engine.volume
    tail = (tail_correction and not shift_energy) & periodic
    series = {
        "temperature": 2 * raw["kinetic"] / dof,
        "potential_energy_truncated": raw["potential"] / n,
        "total_energy": (raw["potential"] + raw["kinetic"]) / n,
        "pressure_truncated": (2 * raw["kinetic"] + raw["virial"]) / (3 * engine.volume),
    }
    series["potential_energy"] = series["potential_energy_truncated"] + np.where(
        tail, lj_tail_energy(np.nan_to_num(density), cutoff), 0.0
    )
    series["pressure"] = series["pressure_truncated"] + np.where(
        tail, lj_tail_pressure(np.nan_to_num(density), cutoff), 0.0
    )
    mean, stderr = {}, {}
    for name, values in series.items():
        mean[name], stderr[name] = block_average(values, n_blocks)

    # diffusion: one MSD curve per time-origin window, D fitted per window
    time = (np.arange(n_samples) + 1) * sample_every * dt
    n_windows = n_samples // msd_window
    msd_lag = msd_curves = None
    if n_windows >= 1 and msd_window >= 4:
        curves = raw["msd"][: n_windows * msd_window].reshape(n_windows, msd_window, -1)
        msd_lag = (np.arange(msd_window) + 1) * sample_every * dt
        d_windows = diffusion_from_msd(msd_lag, np.moveaxis(curves, 1, -1))  # (windows, sys)
        mean["diffusion"] = d_windows.mean(axis=0)
        stderr["diffusion"] = (
            d_windows.std(axis=0, ddof=1) / np.sqrt(n_windows)
            if n_windows > 1
            else np.full(engine.n_systems, np.nan)
        )
        series["msd"] = raw["msd"]
        msd_curves = curves.mean(axis=0).T

    results = LJResults(
        mean=mean,
        stderr=stderr,
        series=series,
        time=time,
        state=engine.state(),
        device=engine.device,
        msd_lag=msd_lag,
        msd=msd_curves,
        info={"cutoff": cutoff, "dt": dt, "n_steps": n_steps, "sample_every": sample_every},
    )
    if want_rdf:
        counts = hist.numpy().astype(np.float64)  # (blocks, systems, bins)
        frames_per_block = np.bincount(
            np.arange(n_samples) * rdf_blocks // n_samples, minlength=rdf_blocks
        )
        edges = np.linspace(0.0, rdf_r_max, rdf_bins + 1)
        volume = np.where(periodic, engine.volume, 1.0)
        g_blocks = rdf_normalise(counts / frames_per_block[:, None, None], edges, n, volume)
        g_blocks[:, ~periodic] = np.nan
        results.rdf_r = 0.5 * (edges[1:] + edges[:-1])
        results.rdf = g_blocks.mean(axis=0)
        results.rdf_stderr = g_blocks.std(axis=0, ddof=1) / np.sqrt(rdf_blocks)
    if frames:
        results.trajectory = np.stack(frames)
        results.trajectory_time = time[frame_samples]
    checkin_engine(engine)
    return results


def quench_lj(
    state: MDState,
    fmax: float | None = None,
    max_steps: int = 20000,
    dt_start: float = 0.002,
    dt_max: float = 0.02,
    max_step: float = 0.1,
    check_every: int = 50,
    cutoff: float = DEFAULT_CUTOFF,
    cluster_cutoff: float | None = None,
    device: str | None = None,
) -> QuenchResult:
    """Minimise the LJ energy of every system with FIRE (all systems in one batch).

    Args:
        fmax: converged when the largest atomic force is below this (epsilon/sigma); default
            1e-3 in float32 (force rounding noise is ~1e-5) and 1e-7 in float64.
        max_steps: FIRE iterations at most.
        dt_start, dt_max: initial and largest FIRE time step (tau).
        max_step: largest displacement of an atom in one iteration (sigma).
        check_every: iterations between convergence checks (a host sync). A system found
            converged at a check stops moving, so each system's result is the same as in a
            run of its own (batch-independent, bit for bit).
    """
    engine = checkout_engine(state, device, cutoff=cutoff, cluster_cutoff=cluster_cutoff)
    wp, k, n_sys = engine.wp, engine.kernels, engine.n_systems
    if fmax is None:
        fmax = 1e-7 if engine.dtype == np.float64 else 1e-3
    engine.v.zero_()
    s = engine.scalar
    dt_sys = wp.full(n_sys, s(dt_start), dtype=s, device=engine.device)
    alpha = wp.full(n_sys, s(0.1), dtype=s, device=engine.device)
    n_positive = wp.zeros(n_sys, dtype=wp.int32, device=engine.device)
    mix_v, mix_f, force_max = (wp.zeros(n_sys, dtype=s, device=engine.device) for _ in range(3))
    steps = 0
    engine.overflow.zero_()
    while steps < max_steps:
        for _ in range(check_every):
            wp.launch(
                k.fire_system,
                n_sys,
                [
                    engine.v,
                    engine.f,
                    engine.sys_start,
                    s(dt_max),
                    dt_sys,
                    alpha,
                    n_positive,
                    mix_v,
                    mix_f,
                    force_max,
                ],
                device=engine.device,
            )
            wp.launch(
                k.fire_atom,
                engine.n_atoms,
                [
                    engine.x,
                    engine.v,
                    engine.f,
                    engine.mass,
                    engine.atom_sys,
                    dt_sys,
                    mix_v,
                    mix_f,
                    s(max_step),
                ],
                device=engine.device,
            )
            engine._update_forces()
        # a list overflow (only possible for periodic systems) is repaired once per block;
        # the few iterations with incomplete lists only perturb the descent path
        if engine._grow_on_overflow():
            engine.rebuild_all()
        steps += check_every
        done = force_max.numpy() < fmax
        if done.all():
            break
        if done.any():
            # freeze converged systems (a zero FIRE step is a fixed point), so that each
            # system stops where it would stop alone and its result is batch-independent
            step_size = dt_sys.numpy()
            step_size[done] = 0
            dt_sys.assign(step_size)
    sums = engine.energies()
    forces = engine.forces()
    fmax_now = np.array(
        [
            np.linalg.norm(forces[a:b], axis=1).max()
            for a, b in zip(
                engine.sys_start.numpy()[:-1], engine.sys_start.numpy()[1:], strict=True
            )
        ]
    )
    result = QuenchResult(
        energy=sums["potential"],
        fmax=fmax_now,
        converged=fmax_now < fmax,
        n_steps=steps,
        state=engine.state(),
    )
    checkin_engine(engine)
    return result
