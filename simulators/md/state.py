"""Batched state of many independent small particle systems.

Atoms of all systems live in one set of per-atom arrays; ``system_idx`` maps each atom to
its system and is non-decreasing, so each system's atoms are one contiguous block. Per-system
arrays hold the orthorhombic box lengths and whether the system is periodic (a fluid box) or
an isolated cluster (box ignored).

Two optional fields carry what crystals need (the materials engines use this same state:
:class:`labtwin.simulators.materials.emt_warp.CrystalBatch` is a thin subclass):

- ``numbers`` (n_atoms,) int32 species (atomic numbers);
- ``cell`` (n_systems, 3, 3) lattice vectors as rows, any shape of cell. With a cell, ``box``
  is derived from it: the diagonal of an orthorhombic (diagonal) cell, NaN for a triclinic
  one, so an engine that only knows orthorhombic boxes can refuse it
  (:meth:`MDState.orthorhombic`).

Arrays are NumPy arrays on the host (``device == "numpy"``) or ``warp.array`` objects on a
Warp device (``"cpu"``, ``"cuda"``, ``"cuda:0"``) after :meth:`MDState.to`. Slicing and
concatenation work on host copies and return a state on the original device.
Units are those of the engine using the state (reduced LJ units for ``lj_warp``, Å for EMT).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

_PER_ATOM = ("positions", "velocities", "masses", "system_idx")
_PER_SYSTEM = ("box", "periodic")


def box_of_cells(cell: np.ndarray) -> np.ndarray:
    """(n, 3) box lengths of (n, 3, 3) cells: the diagonal where a cell is orthorhombic
    (its off-diagonal entries exactly zero), NaN rows where it is not."""
    cell = np.asarray(cell)
    diagonal = np.diagonal(cell, axis1=1, axis2=2).copy()
    off = cell - np.einsum("ni,ij->nij", diagonal, np.eye(3, dtype=cell.dtype))
    diagonal[np.any(off != 0, axis=(1, 2))] = np.nan
    return diagonal


@dataclass
class MDState:
    """Positions, velocities and masses of atoms in ``n_systems`` independent systems.

    Attributes:
        positions: (n_atoms, 3) coordinates, not wrapped into the box (length units).
        velocities: (n_atoms, 3) velocities (length / time).
        masses: (n_atoms,) masses (mass units).
        system_idx: (n_atoms,) int32 index of each atom's system, non-decreasing, 0..n_systems-1.
        box: (n_systems, 3) orthorhombic box edge lengths (length units); unused when not
            periodic; with a ``cell``, its diagonal (NaN rows for triclinic cells).
        periodic: (n_systems,) bool, True for a periodic box, False for an isolated cluster.
        numbers: optional (n_atoms,) int32 species (atomic numbers); None when not carried.
        cell: optional (n_systems, 3, 3) lattice vectors as rows (length units); None for
            orthorhombic boxes given by ``box`` alone.
    """

    positions: Any
    velocities: Any
    masses: Any
    system_idx: Any
    box: Any
    periodic: Any
    numbers: Any = None
    cell: Any = None

    def __post_init__(self) -> None:
        if self.device == "numpy":
            self._check()

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_arrays(
        cls,
        positions: np.ndarray,
        system_idx: np.ndarray,
        box: np.ndarray | None = None,
        periodic: np.ndarray | bool = True,
        velocities: np.ndarray | None = None,
        masses: np.ndarray | float = 1.0,
        dtype: type = np.float32,
        numbers: np.ndarray | None = None,
        cell: np.ndarray | None = None,
    ) -> MDState:
        """Build a host state, casting floats to ``dtype`` (float32 default, float64 on request).

        Give the orthorhombic ``box`` lengths, or full ``cell`` matrices (``box`` is then
        derived from them and must not be given as well)."""
        positions = np.asarray(positions, dtype=dtype).reshape(-1, 3)
        n_atoms = len(positions)
        system_idx = np.asarray(system_idx, dtype=np.int32).reshape(n_atoms)
        n_systems = int(system_idx.max()) + 1 if n_atoms else 0
        if (box is None) == (cell is None):
            raise ValueError("give either the box lengths or the cell matrices")
        if cell is not None:
            cell = np.broadcast_to(np.asarray(cell, dtype=dtype), (n_systems, 3, 3)).copy()
            box = box_of_cells(cell)
        box = np.broadcast_to(np.asarray(box, dtype=dtype), (n_systems, 3)).copy()
        periodic = np.broadcast_to(np.asarray(periodic, dtype=bool), (n_systems,)).copy()
        if velocities is None:
            velocities = np.zeros_like(positions)
        velocities = np.asarray(velocities, dtype=dtype).reshape(n_atoms, 3)
        masses = np.broadcast_to(np.asarray(masses, dtype=dtype), (n_atoms,)).copy()
        if numbers is not None:
            numbers = np.asarray(numbers, dtype=np.int32).reshape(n_atoms)
        return cls(positions, velocities, masses, system_idx, box, periodic, numbers, cell)

    def _check(self) -> None:
        n = len(self.positions)
        for name in _PER_ATOM:
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, expected {n}")
        if self.numbers is not None and len(self.numbers) != n:
            raise ValueError(f"numbers has {len(self.numbers)} rows, expected {n}")
        if n and np.any(np.diff(self.system_idx) < 0):
            raise ValueError("system_idx must be non-decreasing (each system's atoms contiguous)")
        if n and (self.system_idx[0] != 0 or np.any(np.diff(self.system_idx) > 1)):
            raise ValueError("system_idx must run over 0..n_systems-1 without gaps")
        if len(self.box) != self.n_systems or len(self.periodic) != self.n_systems:
            raise ValueError("box and periodic need one row per system")
        if self.cell is not None:
            if np.shape(self.cell) != (self.n_systems, 3, 3):
                raise ValueError(
                    f"cell has shape {np.shape(self.cell)}, expected (n_systems, 3, 3)"
                )
            if not np.array_equal(box_of_cells(self.cell), self.box, equal_nan=True):
                raise ValueError("box must be the diagonal of an orthorhombic cell (NaN if not)")

    # ---------------------------------------------------------------- sizes
    @property
    def n_atoms(self) -> int:
        return int(self.positions.shape[0])

    @property
    def n_systems(self) -> int:
        return int(self.box.shape[0])

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._host("positions").dtype)

    @property
    def device(self) -> str:
        """``"numpy"`` for host arrays, else the Warp device name (``"cpu"``, ``"cuda:0"``)."""
        if isinstance(self.positions, np.ndarray):
            return "numpy"
        return str(self.positions.device)

    def atoms_per_system(self) -> np.ndarray:
        """(n_systems,) number of atoms in each system."""
        return np.bincount(self._host("system_idx"), minlength=self.n_systems)

    def system_start(self) -> np.ndarray:
        """(n_systems + 1,) offsets: system s holds atoms ``start[s]:start[s+1]``."""
        return np.concatenate([[0], np.cumsum(self.atoms_per_system())]).astype(np.int32)

    def cells(self) -> np.ndarray:
        """(n_systems, 3, 3) host lattice vectors as rows: ``cell``, or the diagonal
        matrices of ``box`` when the state carries no cell."""
        if self.cell is not None:
            return self._host("cell")
        box = self._host("box")
        return np.einsum("ni,ij->nij", box, np.eye(3, dtype=box.dtype))

    def orthorhombic(self) -> np.ndarray:
        """(n_systems,) bool: True where the system's box is orthorhombic (always without a
        ``cell``), False for a triclinic cell."""
        return np.all(np.isfinite(self._host("box")), axis=1)

    def volume(self) -> np.ndarray:
        """(n_systems,) box or cell volumes (length^3); NaN for clusters."""
        if self.cell is not None:
            volume = np.abs(np.linalg.det(self._host("cell").astype(np.float64)))
        else:
            volume = self._host("box").astype(np.float64).prod(axis=1)
        return np.where(self._host("periodic"), volume, np.nan)

    # ---------------------------------------------------------------- device moves
    def _host(self, name: str) -> Any:
        value = getattr(self, name)
        return value if value is None or isinstance(value, np.ndarray) else value.numpy()

    def numpy(self) -> MDState:
        """A host copy (NumPy arrays); ``self`` if already on the host."""
        if self.device == "numpy":
            return self
        arrays = {f.name: self._host(f.name) for f in fields(self)}
        arrays = {k: None if v is None else v.copy() for k, v in arrays.items()}
        arrays["periodic"] = arrays["periodic"].astype(bool)
        return type(self)(**arrays)

    def to(self, device: str) -> MDState:
        """The same state on ``device``: ``"numpy"`` for host arrays, else a Warp device."""
        host = self.numpy()
        if device == "numpy":
            return host
        from labtwin.simulators.warp_runtime import init_warp

        wp = init_warp()
        double = host.dtype == np.float64
        vec3 = wp.vec3d if double else wp.vec3f
        mat33 = wp.mat33d if double else wp.mat33f
        return type(self)(
            positions=wp.array(host.positions, dtype=vec3, device=device),
            velocities=wp.array(host.velocities, dtype=vec3, device=device),
            masses=wp.array(host.masses, device=device),
            system_idx=wp.array(host.system_idx, dtype=wp.int32, device=device),
            box=wp.array(host.box, dtype=vec3, device=device),
            periodic=wp.array(host.periodic.astype(np.int32), dtype=wp.int32, device=device),
            numbers=None
            if host.numbers is None
            else wp.array(host.numbers, dtype=wp.int32, device=device),
            cell=None if host.cell is None else wp.array(host.cell, dtype=mat33, device=device),
        )

    def astype(self, dtype: type) -> MDState:
        """Host copy with float arrays cast to ``dtype`` (np.float32 or np.float64)."""
        h = self.numpy()
        return type(self)(
            h.positions.astype(dtype),
            h.velocities.astype(dtype),
            h.masses.astype(dtype),
            h.system_idx.copy(),
            h.box.astype(dtype),
            h.periodic.astype(bool),
            None if h.numbers is None else h.numbers.copy(),
            None if h.cell is None else h.cell.astype(dtype),
        )

    def with_arrays(self, **arrays: Any) -> MDState:
        """A copy with some fields replaced (a new ``cell`` re-derives ``box``)."""
        if arrays.get("cell") is not None and "box" not in arrays:
            arrays["box"] = box_of_cells(arrays["cell"]).astype(np.asarray(arrays["cell"]).dtype)
        return replace(self, **arrays)

    # ---------------------------------------------------------------- slicing, concatenation
    def select(self, systems: int | slice | Sequence[int] | np.ndarray) -> MDState:
        """The state of a subset of systems (renumbered 0..k-1, in the order given)."""
        device = self.device
        h = self.numpy()
        order = np.arange(h.n_systems)[systems]
        order = np.atleast_1d(order)
        start = h.system_start()
        atoms = np.concatenate([np.arange(start[s], start[s + 1]) for s in order]).astype(int)
        counts = start[order + 1] - start[order]
        out = type(self)(
            positions=h.positions[atoms].copy(),
            velocities=h.velocities[atoms].copy(),
            masses=h.masses[atoms].copy(),
            system_idx=np.repeat(np.arange(len(order), dtype=np.int32), counts),
            box=h.box[order].copy(),
            periodic=np.asarray(h.periodic, dtype=bool)[order].copy(),
            numbers=None if h.numbers is None else h.numbers[atoms].copy(),
            cell=None if h.cell is None else h.cell[order].copy(),
        )
        return out.to(device)

    def __getitem__(self, systems: int | slice | Sequence[int] | np.ndarray) -> MDState:
        return self.select(systems)

    @staticmethod
    def concatenate(states: Sequence[MDState]) -> MDState:
        """One state holding all systems of ``states`` in order (on the first state's device,
        of the first state's type). States without a ``cell`` join ones with a cell as their
        box's diagonal matrices; ``numbers`` must be carried by all states or by none."""
        device = states[0].device
        hosts = [s.numpy() for s in states]
        offsets = np.cumsum([0] + [h.n_systems for h in hosts[:-1]])
        dtype = np.result_type(*[h.dtype for h in hosts])
        with_numbers = {h.numbers is not None for h in hosts}
        if len(with_numbers) > 1:
            raise ValueError("numbers must be carried by every state concatenated or by none")
        any_cell = any(h.cell is not None for h in hosts)
        out = type(states[0])(
            positions=np.concatenate([h.positions for h in hosts]).astype(dtype),
            velocities=np.concatenate([h.velocities for h in hosts]).astype(dtype),
            masses=np.concatenate([h.masses for h in hosts]).astype(dtype),
            system_idx=np.concatenate(
                [h.system_idx + o for h, o in zip(hosts, offsets, strict=True)]
            ).astype(np.int32),
            box=np.concatenate([h.box for h in hosts]).astype(dtype),
            periodic=np.concatenate([np.asarray(h.periodic, dtype=bool) for h in hosts]),
            numbers=np.concatenate([h.numbers for h in hosts]) if True in with_numbers else None,
            cell=np.concatenate([h.cells() for h in hosts]).astype(dtype) if any_cell else None,
        )
        return out.to(device)
