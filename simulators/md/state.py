"""Batched state of many independent small particle systems.

Atoms of all systems live in one set of per-atom arrays; ``system_idx`` maps each atom to
its system and is non-decreasing, so each system's atoms are one contiguous block. Per-system
arrays hold the orthorhombic box lengths and whether the system is periodic (a fluid box) or
an isolated cluster (box ignored).

Arrays are NumPy arrays on the host (``device == "numpy"``) or ``warp.array`` objects on a
Warp device (``"cpu"``, ``"cuda"``, ``"cuda:0"``) after :meth:`MDState.to`. Slicing and
concatenation work on host copies and return a state on the original device.
Units are those of the engine using the state (reduced LJ units for ``lj_warp``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

_PER_ATOM = ("positions", "velocities", "masses", "system_idx")
_PER_SYSTEM = ("box", "periodic")


@dataclass
class MDState:
    """Positions, velocities and masses of atoms in ``n_systems`` independent systems.

    Attributes:
        positions: (n_atoms, 3) coordinates, not wrapped into the box (length units).
        velocities: (n_atoms, 3) velocities (length / time).
        masses: (n_atoms,) masses (mass units).
        system_idx: (n_atoms,) int32 index of each atom's system, non-decreasing, 0..n_systems-1.
        box: (n_systems, 3) orthorhombic box edge lengths (length units); unused when not periodic.
        periodic: (n_systems,) bool, True for a periodic box, False for an isolated cluster.
    """

    positions: Any
    velocities: Any
    masses: Any
    system_idx: Any
    box: Any
    periodic: Any

    def __post_init__(self) -> None:
        if self.device == "numpy":
            self._check()

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_arrays(
        cls,
        positions: np.ndarray,
        system_idx: np.ndarray,
        box: np.ndarray,
        periodic: np.ndarray | bool = True,
        velocities: np.ndarray | None = None,
        masses: np.ndarray | float = 1.0,
        dtype: type = np.float32,
    ) -> MDState:
        """Build a host state, casting floats to ``dtype`` (float32 default, float64 on request)."""
        positions = np.asarray(positions, dtype=dtype).reshape(-1, 3)
        n_atoms = len(positions)
        system_idx = np.asarray(system_idx, dtype=np.int32).reshape(n_atoms)
        n_systems = int(system_idx.max()) + 1 if n_atoms else 0
        box = np.broadcast_to(np.asarray(box, dtype=dtype), (n_systems, 3)).copy()
        periodic = np.broadcast_to(np.asarray(periodic, dtype=bool), (n_systems,)).copy()
        if velocities is None:
            velocities = np.zeros_like(positions)
        velocities = np.asarray(velocities, dtype=dtype).reshape(n_atoms, 3)
        masses = np.broadcast_to(np.asarray(masses, dtype=dtype), (n_atoms,)).copy()
        return cls(positions, velocities, masses, system_idx, box, periodic)

    def _check(self) -> None:
        n = len(self.positions)
        for name in _PER_ATOM:
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} rows, expected {n}")
        if n and np.any(np.diff(self.system_idx) < 0):
            raise ValueError("system_idx must be non-decreasing (each system's atoms contiguous)")
        if n and (self.system_idx[0] != 0 or np.any(np.diff(self.system_idx) > 1)):
            raise ValueError("system_idx must run over 0..n_systems-1 without gaps")
        if len(self.box) != self.n_systems or len(self.periodic) != self.n_systems:
            raise ValueError("box and periodic need one row per system")

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

    def volume(self) -> np.ndarray:
        """(n_systems,) box volumes (length^3); NaN for clusters."""
        box = self._host("box").astype(np.float64)
        return np.where(self._host("periodic"), box.prod(axis=1), np.nan)

    # ---------------------------------------------------------------- device moves
    def _host(self, name: str) -> np.ndarray:
        value = getattr(self, name)
        return value if isinstance(value, np.ndarray) else value.numpy()

    def numpy(self) -> MDState:
        """A host copy (NumPy arrays); ``self`` if already on the host."""
        if self.device == "numpy":
            return self
        arrays = {f.name: self._host(f.name).copy() for f in fields(self)}
        arrays["periodic"] = arrays["periodic"].astype(bool)
        return MDState(**arrays)

    def to(self, device: str) -> MDState:
        """The same state on ``device``: ``"numpy"`` for host arrays, else a Warp device."""
        host = self.numpy()
        if device == "numpy":
            return host
        import warp as wp

        wp.init()
        vec3 = wp.vec3d if host.dtype == np.float64 else wp.vec3f
        return MDState(
            positions=wp.array(host.positions, dtype=vec3, device=device),
            velocities=wp.array(host.velocities, dtype=vec3, device=device),
            masses=wp.array(host.masses, device=device),
            system_idx=wp.array(host.system_idx, dtype=wp.int32, device=device),
            box=wp.array(host.box, dtype=vec3, device=device),
            periodic=wp.array(host.periodic.astype(np.int32), dtype=wp.int32, device=device),
        )

    def astype(self, dtype: type) -> MDState:
        """Host copy with float arrays cast to ``dtype`` (np.float32 or np.float64)."""
        h = self.numpy()
        return MDState(
            h.positions.astype(dtype),
            h.velocities.astype(dtype),
            h.masses.astype(dtype),
            h.system_idx.copy(),
            h.box.astype(dtype),
            h.periodic.astype(bool),
        )

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
        out = MDState(
            positions=h.positions[atoms].copy(),
            velocities=h.velocities[atoms].copy(),
            masses=h.masses[atoms].copy(),
            system_idx=np.repeat(np.arange(len(order), dtype=np.int32), counts),
            box=h.box[order].copy(),
            periodic=np.asarray(h.periodic, dtype=bool)[order].copy(),
        )
        return out.to(device)

    def __getitem__(self, systems: int | slice | Sequence[int] | np.ndarray) -> MDState:
        return self.select(systems)

    @staticmethod
    def concatenate(states: Sequence[MDState]) -> MDState:
        """One state holding all systems of ``states`` in order (on the first state's device)."""
        device = states[0].device
        hosts = [s.numpy() for s in states]
        offsets = np.cumsum([0] + [h.n_systems for h in hosts[:-1]])
        dtype = np.result_type(*[h.dtype for h in hosts])
        out = MDState(
            positions=np.concatenate([h.positions for h in hosts]).astype(dtype),
            velocities=np.concatenate([h.velocities for h in hosts]).astype(dtype),
            masses=np.concatenate([h.masses for h in hosts]).astype(dtype),
            system_idx=np.concatenate(
                [h.system_idx + o for h, o in zip(hosts, offsets, strict=True)]
            ).astype(np.int32),
            box=np.concatenate([h.box for h in hosts]).astype(dtype),
            periodic=np.concatenate([np.asarray(h.periodic, dtype=bool) for h in hosts]),
        )
        return out.to(device)
