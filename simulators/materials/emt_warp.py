"""Batched EMT in NVIDIA Warp: energies, forces, stresses and relaxations of many small cells.

Effective Medium Theory with the parameters of Jacobsen, Stoltze and Nørskov, Surf. Sci.
366, 394 (1996), for Al, Cu, Ag, Au, Ni, Pd and Pt, in the functional form of ASE's
``ase.calculators.emt.EMT`` (kernels in :mod:`._emt_kernels`). Many periodic cells of any
sizes and shapes (triclinic, and smaller than twice the cutoff: every periodic image within
the cutoff is visited) are evaluated in one launch per stage, on ``cuda`` when Warp sees a
GPU, else on ``cpu``; float64 or float32.

Cutoff conventions (both are ASE's, chosen with ``cutoff``):

- ``"ase"`` (default): ``EMT()``. The smooth cutoff is set by the largest neutral-sphere
  radius in ASE's whole parameter table (Ag's s0 = 3.01 bohr), the same for every cell:
  midpoint rc = beta s0 (sqrt 3 + 2) / 2 = 5.38 Å, list radius rc + 0.5 Å.
- ``"asap"``: ``EMT(asap_cutoff=True)``, the convention of asap3 and of
  :mod:`~labtwin.simulators.materials.emt`: the cutoff is set by the largest s0 among the
  elements present in each cell, list radius 1.045 rc.

Both agree with ASE's EMT to float64 round-off (``tests/materials/test_emt_warp.py``).

Relaxation (:func:`relax_emt`): FIRE (the MD engine's kernels,
:mod:`labtwin.simulators.md._fire_kernels`) on the positions, and with ``cell=True`` on the
cell through the generalised coordinates of ASE's ``UnitCellFilter`` (cell rows scaled by the
number of atoms, so the generalised cell forces are the virial per atom and one ``fmax``
bounds forces, eV/Å, and stress times volume per atom). Converged systems are frozen at the
next check, so each system's result is the same as in a batch of its own.

Warp is imported lazily; importing this module does not initialise it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

import numpy as np

# one Warp start-up and device choice for every engine (the MD kernels' own)
from labtwin.simulators.md.lj_warp import _warp, default_device
from labtwin.simulators.md.state import MDState
from labtwin.simulators.neighbours import NeighbourLists

Cutoff = Literal["ase", "asap"]

#: E0 (eV), s0 (bohr), V0 (eV), eta2, kappa, lambda (1/bohr), n0 (1/bohr^3): Jacobsen,
#: Stoltze and Nørskov (1996) as tabulated in ASE (Al is ASE's later fit)
EMT_PARAMETERS: dict[str, tuple[float, float, float, float, float, float, float]] = {
    "Al": (-3.28, 3.00, 1.493, 1.240, 2.000, 1.169, 0.00700),
    "Cu": (-3.51, 2.67, 2.476, 1.652, 2.740, 1.906, 0.00910),
    "Ag": (-2.96, 3.01, 2.132, 1.652, 2.790, 1.892, 0.00547),
    "Au": (-3.80, 3.00, 2.321, 1.674, 2.873, 2.182, 0.00703),
    "Ni": (-4.44, 2.60, 3.673, 1.669, 2.757, 1.948, 0.01030),
    "Pd": (-3.90, 2.87, 2.773, 1.818, 3.107, 2.155, 0.00688),
    "Pt": (-5.85, 2.90, 4.067, 1.812, 3.145, 2.192, 0.00802),
}
#: the largest s0 (bohr) of ASE's whole table (its extra H, C, N, O included): Ag's
ASE_GLOBAL_S0_BOHR = 3.01
BOHR_A = 0.5291772105638411  # ase.units.Bohr (CODATA 2014), Å
_Z = {"Al": 13, "Cu": 29, "Ag": 47, "Au": 79, "Ni": 28, "Pd": 46, "Pt": 78}
_SYMBOL = {z: s for s, z in _Z.items()}
#: standard atomic weights (amu, as ase.data.atomic_masses): the masses a crystal batch carries
_MASS_AMU = {
    "Al": 26.9815385, "Cu": 63.546, "Ag": 107.8682, "Au": 196.966569, "Ni": 58.6934,
    "Pd": 106.42, "Pt": 195.084,
}  # fmt: skip
#: a cell whose volume per atom is below this (Å^3) is refused (nearest neighbours of these
#: metals sit at 2.5-2.9 Å, 11-17 Å^3 per atom)
MIN_VOLUME_PER_ATOM_A3 = 1.0


# ------------------------------------------------------------------------ batched crystals
class CrystalBatch(MDState):
    """Many periodic cells in one batched state: the MD engine's :class:`MDState` with its
    optional crystal fields required (a subclass with no fields of its own, so slicing,
    concatenation, dtype and device moves are the MD state's).

    ``numbers`` (n_atoms,) atomic numbers; ``positions`` (n_atoms, 3) Cartesian positions, Å
    (need not be wrapped into the cell); ``cell`` (n_systems, 3, 3) lattice vectors as rows,
    Å; ``system_idx`` (n_atoms,) int32, non-decreasing; every system ``periodic``; ``masses``
    the atomic masses (amu); ``velocities`` zero unless given. Host arrays are float64 when
    built by :meth:`from_structures`.
    """

    def __post_init__(self) -> None:
        if self.numbers is None or self.cell is None:
            raise ValueError("a crystal batch carries species (numbers) and cells")
        super().__post_init__()
        if self.device == "numpy" and not np.all(self.periodic):
            raise ValueError("every cell of a crystal batch is periodic")

    @classmethod
    def from_structures(cls, structures: Sequence[Any]) -> CrystalBatch:
        """From labtwin :class:`~labtwin.simulators.materials.Structure` objects or ASE
        ``Atoms`` (periodic in all three directions); raises ``ValueError`` on bad input."""
        if len(structures) == 0:
            raise ValueError("no structures to evaluate")
        numbers, positions, cells, index = [], [], [], []
        for s, item in enumerate(structures):
            if hasattr(item, "get_atomic_numbers"):  # ASE Atoms
                if not np.all(item.pbc):
                    raise ValueError(f"structure {s}: EMT cells must be periodic along all axes")
                z = np.asarray(item.get_atomic_numbers())
                symbols = item.get_chemical_symbols()
                pos, cell = np.asarray(item.positions), np.asarray(item.cell[:])
            else:
                symbols = list(item.species)
                z = np.array([_Z.get(sym, -1) for sym in symbols])
                pos, cell = np.asarray(item.positions), np.asarray(item.cell)
            unknown = sorted({sym for sym in symbols if sym not in EMT_PARAMETERS})
            if unknown:
                raise ValueError(
                    f"structure {s}: no EMT parameters for {', '.join(unknown)}; "
                    f"EMT covers {', '.join(EMT_PARAMETERS)}"
                )
            if len(z) == 0:
                raise ValueError(f"structure {s} has no atoms")
            pos = np.asarray(pos, dtype=np.float64).reshape(-1, 3)
            cell = np.asarray(cell, dtype=np.float64).reshape(3, 3)
            if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(cell))):
                raise ValueError(f"structure {s}: positions and cell must be finite")
            volume = abs(np.linalg.det(cell))
            if not volume / len(z) >= MIN_VOLUME_PER_ATOM_A3:
                raise ValueError(
                    f"structure {s}: cell volume {volume:.3g} Å^3 for {len(z)} atoms is "
                    f"singular or absurdly small (below {MIN_VOLUME_PER_ATOM_A3} Å^3 per atom)"
                )
            numbers.append(z.astype(np.int32))
            positions.append(pos)
            cells.append(cell)
            index.append(np.full(len(z), s, dtype=np.int32))
        numbers_all = np.concatenate(numbers)
        return cls.from_arrays(  # type: ignore[return-value]
            np.concatenate(positions),
            np.concatenate(index),
            periodic=True,
            masses=np.array([_MASS_AMU[_SYMBOL[int(z)]] for z in numbers_all]),
            dtype=np.float64,
            numbers=numbers_all,
            cell=np.stack(cells),
        )

    def volumes(self) -> np.ndarray:
        """(n_systems,) cell volumes, Å^3."""
        return self.volume()

    def symbols(self, system: int) -> tuple[str, ...]:
        start = self.system_start()
        numbers = self._host("numbers")
        return tuple(_SYMBOL[int(z)] for z in numbers[start[system] : start[system + 1]])

    def to_structures(self, sublattices: Sequence[np.ndarray | None] | None = None) -> list[Any]:
        """Each cell as a labtwin :class:`~labtwin.simulators.materials.Structure`."""
        from labtwin.simulators.materials.structure import Structure

        host = self.numpy()
        start = host.system_start()
        out = []
        for s in range(host.n_systems):
            label = None if sublattices is None else sublattices[s]
            out.append(
                Structure(
                    host.symbols(s),
                    host.positions[start[s] : start[s + 1]].astype(np.float64),
                    host.cell[s].astype(np.float64),
                    label,
                )
            )
        return out


def as_crystal_batch(structures: Sequence[Any] | MDState) -> CrystalBatch:
    """``structures`` as a host :class:`CrystalBatch`: a crystal batch as it is, an
    :class:`MDState` that carries species and cells as one, else built from structures."""
    if isinstance(structures, CrystalBatch):
        return structures.numpy()  # type: ignore[return-value]
    if isinstance(structures, MDState):
        host = structures.numpy()
        if host.numbers is None:
            raise ValueError("an MD state without species (numbers) has no EMT parameters")
        unknown = sorted(set(host.numbers.tolist()) - set(_SYMBOL))
        if unknown:
            raise ValueError(f"no EMT parameters for atomic numbers {unknown}")
        arrays = {f.name: getattr(host, f.name) for f in fields(host)}
        arrays["cell"] = host.cells()  # an orthorhombic box as its diagonal cell
        return CrystalBatch(**arrays)
    return CrystalBatch.from_structures(structures)


# ------------------------------------------------------------------------ parameters
def cutoff_parameters(symbols: Sequence[str], cutoff: Cutoff = "ase") -> tuple[float, float, float]:
    """(rc, acut, rc_list) of ASE's EMT for a cell holding ``symbols``: the logistic cutoff
    w(r) = 1 / (1 + exp(acut (r - rc))) has its midpoint between the 3rd and 4th fcc
    neighbour shells of the largest atom and falls to 1e-4 at the 4th; pairs beyond
    ``rc_list`` (Å) are left out."""
    if cutoff == "ase":
        s0 = ASE_GLOBAL_S0_BOHR
    elif cutoff == "asap":
        s0 = max(EMT_PARAMETERS[sym][1] for sym in set(symbols))
    else:
        raise ValueError(f"unknown cutoff convention {cutoff!r}; 'ase' or 'asap'")
    from labtwin.simulators.materials._emt_kernels import BETA

    r1nn = BETA * s0 * BOHR_A
    rc = r1nn * 0.5 * (math.sqrt(3.0) + 2.0)
    acut = math.log(1.0 / 1e-4 - 1.0) / (2.0 * r1nn - rc)
    rc_list = rc * 1.045 if cutoff == "asap" else rc + 0.5
    return rc, acut, rc_list


@functools.cache
def atom_parameters(symbol: str, rc: float, acut: float) -> np.ndarray:
    """The per-atom parameter row of the kernels (columns ``P_*`` of :mod:`._emt_kernels`),
    in Å and eV; gamma1 and gamma2 normalise the fcc sums over three shells under the cutoff."""
    from labtwin.simulators.materials import _emt_kernels as k

    e0, s0, v0, eta2, kappa, lam, n0 = EMT_PARAMETERS[symbol]
    s0, eta2, kappa, lam, n0 = s0 * BOHR_A, eta2 / BOHR_A, kappa / BOHR_A, lam / BOHR_A, n0
    n0 = n0 / BOHR_A**3
    shells = np.array([12.0, 6.0, 24.0])
    r = k.BETA * s0 * np.sqrt([1.0, 2.0, 3.0])
    x = shells / 12.0 / (1.0 + np.exp(acut * (r - rc)))
    gamma1 = x @ np.exp(-eta2 * (r - k.BETA * s0))
    gamma2 = x @ np.exp(-kappa / k.BETA * (r - k.BETA * s0))
    row = np.empty(k.N_PAR)
    row[[k.P_E0, k.P_S0, k.P_V0, k.P_ETA2, k.P_KAPPA, k.P_LAMBDA, k.P_N0]] = (
        e0,
        s0,
        v0,
        eta2,
        kappa,
        lam,
        n0,
    )
    row[k.P_INV12GAMMA1] = 1.0 / (12.0 * gamma1)
    row[k.P_NEGHALFV0OVERGAMMA2] = -0.5 * v0 / gamma2
    row.flags.writeable = False  # cached: shared by every caller
    return row


# ------------------------------------------------------------------------ engine
@dataclass(frozen=True)
class EMTResult:
    """Per-cell energies (eV), forces (n_atoms, 3) (eV/Å), stresses (n_systems, 6) in ASE's
    Voigt order xx, yy, zz, yz, xz, xy (eV/Å^3, positive under tension) and per-atom energies."""

    energy: np.ndarray
    forces: np.ndarray
    stress: np.ndarray
    energies: np.ndarray
    system_start: np.ndarray

    def forces_of(self, system: int) -> np.ndarray:
        return self.forces[self.system_start[system] : self.system_start[system + 1]]


class WarpEMT:
    """Device arrays and kernels for one batch of periodic cells (see the module docstring).

    Args:
        structures: labtwin ``Structure`` objects or ASE ``Atoms``, or a :class:`CrystalBatch`
            (or an :class:`MDState` carrying species and cells).
        dtype: ``np.float64`` (round-off agreement with ASE) or ``np.float32``.
        device: Warp device; default :func:`default_device`.
        cutoff: ``"ase"`` or ``"asap"`` (module docstring).
        skin: neighbour lists hold pairs within rc_list + ``skin`` (Å) and are rebuilt per
            cell only when its atoms or cell have moved enough that a pair left out could
            have come inside rc_list (:meth:`evaluate` rebuilds every list). Pairs beyond
            rc_list contribute nothing and rows are ordered by (neighbour, image), so the
            results do not depend on the skin or on when lists were built, to the last bit.
    """

    def __init__(
        self,
        structures: Sequence[Any] | MDState,
        dtype: type = np.float64,
        device: str | None = None,
        cutoff: Cutoff = "ase",
        skin: float = 0.0,
    ) -> None:
        wp = _warp()
        from labtwin.simulators.materials._emt_kernels import make_kernels

        batch = as_crystal_batch(structures)
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be np.float32 or np.float64, not {dtype}")
        self.wp, self.batch, self.cutoff, self.skin = wp, batch, cutoff, float(skin)
        self.device = str(wp.get_device(device or default_device()))
        self.dtype = dtype
        self.scalar = wp.float64 if dtype == np.float64 else wp.float32
        self.vec3 = wp.types.vector(3, self.scalar)
        self.mat33 = wp.types.matrix((3, 3), self.scalar)
        self.kernels = make_kernels(self.scalar)
        self.n_atoms, self.n_systems = batch.n_atoms, batch.n_systems

        start = batch.system_start()
        cut = np.empty((self.n_systems, 3))
        par = np.empty((self.n_atoms, 9))
        for s in range(self.n_systems):
            numbers = batch.numbers[start[s] : start[s + 1]]
            present = [_SYMBOL[int(z)] for z in np.unique(numbers)]
            cut[s] = cutoff_parameters(present, cutoff)
            for sym in present:
                par[start[s] + np.flatnonzero(numbers == _Z[sym])] = atom_parameters(
                    sym, cut[s, 0], cut[s, 1]
                )
        density = batch.atoms_per_system() / batch.volumes()
        expected = density * 4.0 / 3.0 * np.pi * (cut[:, 2] + self.skin) ** 3
        capacity = int(np.ceil(1.3 * expected.max())) + 17  # entries + the scratch slot

        def arr(values: np.ndarray, dtype: Any) -> Any:
            return wp.array(values, dtype=dtype, device=self.device)

        s, d = self.scalar, self.device
        self.x = arr(batch.positions.astype(dtype), self.vec3)
        self.cell = arr(batch.cell.astype(dtype), self.mat33)
        self.atom_sys = arr(batch.system_idx.astype(np.int32), wp.int32)
        self.sys_start = arr(start, wp.int32)
        self.cut = arr(cut.astype(dtype), s)
        self.par = arr(par.astype(dtype), s)
        self.active = wp.ones(self.n_systems, dtype=wp.int32, device=d)  # cells evaluated
        self.atom_energy = wp.zeros(self.n_atoms, dtype=s, device=d)
        self.deds = wp.zeros(self.n_atoms, dtype=s, device=d)
        self.f = wp.zeros(self.n_atoms, dtype=self.vec3, device=d)
        self.atom_virial = wp.zeros(self.n_atoms, dtype=self.mat33, device=d)
        self.energy = wp.zeros(self.n_systems, dtype=wp.float64, device=d)
        self.virial = wp.zeros(self.n_systems, dtype=wp.mat33d, device=d)
        # full rows of (j, image) pairs from the never-wrapped positions, rebuilt per cell by
        # the displacement-and-strain skin test (labtwin.simulators.neighbours)
        self.lists = NeighbourLists(
            self.x,
            self.atom_sys,
            self.sys_start,
            batch.cell,
            np.ones(self.n_systems, dtype=bool),
            cut[:, 2],
            self.skin,
            half=False,
            packed=False,
            capacity=capacity,
            cell=self.cell,
            active=self.active,
            device=d,
        )
        self._allocate_pairs()

    def _allocate_pairs(self) -> None:
        # per-pair terms, one per row entry; written before they are read (pairs in range)
        shape = (self.n_atoms, self.lists.capacity)
        self.pair_self, self.pair_other, self.pair_direct = (
            self.wp.empty(shape, dtype=self.scalar, device=self.device) for _ in range(3)
        )

    def _launch(self, kernel: Any, dim: int, inputs: list[Any]) -> None:
        self.wp.launch(kernel, dim, inputs, device=self.device)

    def _evaluate_launches(self, rebuild_all: bool) -> None:
        """Neighbour lists (all, or those of cells that moved too far), then energies, forces
        and virials of every cell (no host sync)."""
        k = self.kernels
        if rebuild_all:
            self.lists.launch_flags(1)
        else:
            self.lists.launch_check(self._launch)
        self.lists.launch_build(self._launch)
        lists = [self.lists.nbr, self.lists.nbr_shift, self.lists.nbr_count]
        pairs = [self.pair_self, self.pair_other, self.pair_direct]
        geometry = [self.x, self.atom_sys, self.active, self.cell, self.cut]
        self._launch(
            k.density,
            self.n_atoms,
            [*geometry, self.par, *lists, self.atom_energy, self.deds, *pairs],
        )
        self._launch(
            k.forces,
            self.n_atoms,
            [*geometry, *lists, self.deds, *pairs, self.f, self.atom_virial],
        )
        self._launch(
            k.system_sums,
            self.n_systems,
            [
                self.atom_energy,
                self.atom_virial,
                self.sys_start,
                self.active,
                self.energy,
                self.virial,
            ],
        )

    def resize_lists(self, capacity: int) -> None:
        """Neighbour rows (and per-pair arrays) of ``capacity`` entries + 1; :meth:`evaluate`
        rebuilds them (and grows them again where a row overflows)."""
        self.lists.resize(capacity)
        self._allocate_pairs()

    def grow_on_overflow(self) -> bool:
        """True (after enlarging the neighbour rows and the per-pair arrays, which must then
        all be rebuilt) if the last lists overflowed."""
        if not self.lists.grow_on_overflow():
            return False
        self._allocate_pairs()
        return True

    def evaluate(self) -> EMTResult:
        """Energies, forces and stresses of every cell at the current positions and cells
        (every neighbour list rebuilt)."""
        self.lists.overflow.zero_()
        self._evaluate_launches(rebuild_all=True)
        while self.grow_on_overflow():
            self._evaluate_launches(rebuild_all=True)
        return self.result()

    def result(self) -> EMTResult:
        """The last evaluation's results on the host."""
        volume = np.abs(np.linalg.det(self.cell.numpy().astype(np.float64)))
        virial = self.virial.numpy()
        stress = virial[:, [0, 1, 2, 1, 0, 0], [0, 1, 2, 2, 2, 1]] / volume[:, None]
        return EMTResult(
            energy=self.energy.numpy().copy(),
            forces=self.f.numpy().astype(np.float64),
            stress=stress,
            energies=self.atom_energy.numpy().astype(np.float64),
            system_start=self.batch.system_start(),
        )


def emt_evaluate(
    structures: Sequence[Any] | MDState,
    dtype: type = np.float64,
    device: str | None = None,
    cutoff: Cutoff = "ase",
) -> EMTResult:
    """Energies (eV), forces (eV/Å) and stresses (eV/Å^3) of many cells in one batch."""
    return WarpEMT(structures, dtype=dtype, device=device, cutoff=cutoff).evaluate()


# ------------------------------------------------------------------------ relaxation
@dataclass(frozen=True)
class BatchRelaxResult:
    """Relaxed cells and how each relaxation went (one entry per cell).

    ``max_force`` is the largest generalised force at the end (eV/Å for atoms; for a cell
    relaxation also the virial rows over the number of atoms, eV), the quantity ``fmax``
    bounds; ``n_steps`` the FIRE iterations each cell took before it was frozen.
    """

    batch: CrystalBatch
    energy: np.ndarray
    stress: np.ndarray
    max_force: np.ndarray
    converged: np.ndarray
    n_steps: np.ndarray

    def structures(self, sublattices: Sequence[np.ndarray | None] | None = None) -> list[Any]:
        return self.batch.to_structures(sublattices)


def relax_emt(
    structures: Sequence[Any] | MDState,
    fmax: float | Sequence[float] = 0.01,
    max_steps: int | Sequence[int] = 1000,
    cell: bool | Sequence[bool] = False,
    dtype: type = np.float64,
    device: str | None = None,
    cutoff: Cutoff = "ase",
    dt_start: float = 0.1,
    dt_max: float = 1.0,
    max_step: float = 0.2,
    check_every: int = 10,
    skin: float = 0.5,
    fixed: Sequence[bool] | np.ndarray | None = None,
) -> BatchRelaxResult:
    """Relax every cell's positions (and with ``cell`` its cell) with batched FIRE.

    ``fmax``, ``max_steps`` and ``cell`` are one value for every cell or one per cell (a
    batch of relaxations with different protocols is still one launch per step).

    Args:
        fmax: converged when every generalised force row is below this (eV/Å; module doc).
        max_steps: FIRE iterations at most (0: evaluate only).
        dt_start, dt_max, max_step: FIRE's time steps and largest step of one row (ASE's
            defaults: 0.1, 1.0, 0.2 Å), unit masses.
        check_every: iterations between convergence checks (a host sync); a cell is also
            checked at its own ``max_steps``. A cell found converged (at the start too) or
            out of steps stops moving, so its result does not depend on the batch.
        skin: neighbour-list skin, Å (:class:`WarpEMT`; the results do not depend on it).
        fixed: (n_atoms,) bool over the batch's atoms, True for an atom held in place (its
            force is zeroed before FIRE sees it, as ASE's ``FixAtoms`` does, and left out of
            the convergence test); default none.
    """
    from labtwin.simulators.md._fire_kernels import make_fire_kernels

    engine = WarpEMT(structures, dtype=dtype, device=device, cutoff=cutoff, skin=skin)
    wp, k, dev = engine.wp, engine.kernels, engine.device
    fire = make_fire_kernels(engine.scalar)
    s, n_sys, n_atoms = engine.scalar, engine.n_systems, engine.n_atoms
    batch = engine.batch
    fmax_of = np.broadcast_to(np.asarray(fmax, dtype=np.float64), (n_sys,)).copy()
    steps_of = np.broadcast_to(np.asarray(max_steps, dtype=np.int64), (n_sys,)).copy()
    cell_of = np.broadcast_to(np.asarray(cell, dtype=bool), (n_sys,)).copy()
    if np.any(steps_of < 0) or not np.all(fmax_of > 0):
        raise ValueError("max_steps must be non-negative and fmax positive")
    counts = batch.atoms_per_system()
    start = batch.system_start()
    gen_start = (start + 3 * np.arange(n_sys + 1)).astype(np.int32)
    n_gen = int(gen_start[-1])
    gen_sys = np.repeat(np.arange(n_sys), counts + 3).astype(np.int32)
    xg0 = np.empty((n_gen, 3))
    atom_rows = np.arange(n_atoms) + 3 * batch.system_idx
    xg0[atom_rows] = batch.positions
    cell_rows = (start[1:, None] + 3 * np.arange(n_sys)[:, None] + np.arange(3)).ravel()
    xg0[cell_rows] = (counts[:, None, None] * np.eye(3)).reshape(-1, 3)

    xg = wp.array(xg0.astype(dtype), dtype=engine.vec3, device=dev)
    vg = wp.zeros(n_gen, dtype=engine.vec3, device=dev)
    fg = wp.zeros(n_gen, dtype=engine.vec3, device=dev)
    mass = wp.ones(n_gen, dtype=s, device=dev)
    gen_sys_d = wp.array(gen_sys, dtype=wp.int32, device=dev)
    gen_start_d = wp.array(gen_start, dtype=wp.int32, device=dev)
    cell_factor = wp.array(counts.astype(dtype), dtype=s, device=dev)
    held = np.zeros(n_atoms, dtype=bool) if fixed is None else np.asarray(fixed, dtype=bool)
    if held.shape != (n_atoms,):
        raise ValueError(f"fixed needs one flag per atom ({n_atoms}), got {held.shape}")
    free = wp.array((~held).astype(dtype), dtype=s, device=dev)
    relax_cell = wp.array(cell_of.astype(np.int32), dtype=wp.int32, device=dev)
    cell0 = wp.clone(engine.cell)
    deform = wp.zeros(n_sys, dtype=engine.mat33, device=dev)
    dt_sys = wp.full(n_sys, s(dt_start), dtype=s, device=dev)
    alpha = wp.full(n_sys, s(0.1), dtype=s, device=dev)
    n_positive = wp.zeros(n_sys, dtype=wp.int32, device=dev)
    mix_v, mix_f, force_max = (wp.zeros(n_sys, dtype=s, device=dev) for _ in range(3))

    def forces_at_xg(rebuild_all: bool = False) -> None:
        engine._launch(
            k.set_cell, n_sys, [xg, engine.sys_start, cell_factor, cell0, deform, engine.cell]
        )
        engine._launch(k.set_positions, n_atoms, [xg, engine.atom_sys, deform, engine.x])
        engine._evaluate_launches(rebuild_all)
        engine._launch(k.project_forces, n_atoms, [engine.f, engine.atom_sys, deform, free, fg])
        engine._launch(
            k.project_cell,
            n_sys,
            [engine.virial, engine.sys_start, deform, cell_factor, relax_cell, fg],
        )

    def generalised_fmax() -> np.ndarray:
        norms = np.linalg.norm(fg.numpy().astype(np.float64), axis=1)
        return np.maximum.reduceat(norms, gen_start[:-1])

    engine.lists.overflow.zero_()
    forces_at_xg(rebuild_all=True)
    while engine.grow_on_overflow():
        forces_at_xg(rebuild_all=True)
    n_steps = np.zeros(n_sys, dtype=np.int64)
    done = generalised_fmax() < fmax_of  # converged
    stopped = done | (steps_of == 0)  # frozen: converged or out of steps
    steps = 0
    fire_state = (xg, vg, dt_sys, alpha, n_positive)

    def freeze() -> None:
        # a zero FIRE step is a fixed point; frozen cells are no longer evaluated, so their
        # forces and energies stay those of the frozen positions
        step_size = dt_sys.numpy()
        step_size[stopped] = 0
        dt_sys.assign(step_size)
        engine.active.assign((~stopped).astype(np.int32))

    if stopped.any():
        freeze()
    while not stopped.all():
        running = ~stopped
        # every running cell's next check: the next multiple of check_every, or its last step
        next_check = np.minimum((steps // check_every + 1) * check_every, steps_of)
        target = int(next_check[running].min())
        saved = [wp.clone(a) for a in fire_state]
        for _ in range(target - steps):
            engine._launch(
                fire.fire_system,
                n_sys,
                [
                    vg,
                    fg,
                    gen_start_d,
                    s(dt_max),
                    dt_sys,
                    alpha,
                    n_positive,
                    mix_v,
                    mix_f,
                    force_max,
                ],
            )
            engine._launch(
                fire.fire_atom,
                n_gen,
                [xg, vg, fg, mass, gen_sys_d, dt_sys, mix_v, mix_f, s(max_step)],
            )
            forces_at_xg()
        if engine.grow_on_overflow():
            # neighbour rows were cut short in this block: repeat it from its start
            for a, b in zip(fire_state, saved, strict=True):
                wp.copy(a, b)
            forces_at_xg(rebuild_all=True)
            continue
        steps = target
        n_steps[running] = steps
        checked = running & ((steps % check_every == 0) | (steps == steps_of))
        done = done | (checked & (generalised_fmax() < fmax_of))
        newly = (done | (steps >= steps_of)) & running
        if newly.any():
            stopped = stopped | newly
            freeze()

    result = engine.result()
    final = batch.with_arrays(
        positions=engine.x.numpy().astype(np.float64), cell=engine.cell.numpy().astype(np.float64)
    )
    max_force = generalised_fmax()
    return BatchRelaxResult(
        batch=final,
        energy=result.energy,
        stress=result.stress,
        max_force=max_force,
        converged=max_force < fmax_of,
        n_steps=n_steps,
    )
