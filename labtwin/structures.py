"""Structures as artifacts: one convention for atoms, molecules, boxes and crystals.

A measurement that has a structure behind it (an MD box, a cluster, a molecule's
conformer, a relaxed crystal) stores it among its ``artifacts`` under the names
below, as plain numpy arrays, so the run store writes them as ``.npy`` files
(never pickle) and any reader (the viewer, a notebook, a third-party tool) finds
them by name:

=========================  ======================  ======================================
artifact                   shape, dtype            meaning
=========================  ======================  ======================================
``structure_numbers``      ``(n,)`` int            atomic numbers; 0 is a pseudo-atom (a
                                                   Lennard-Jones particle)
``structure_positions``    ``(n, 3)`` or           Cartesian positions in ångström; a 3-D
                           ``(frames, n, 3)``      array is a trajectory, oldest frame first
                           float
``structure_cell``         ``(3, 3)`` or           lattice vectors as rows, in ångström,
                           ``(frames, 3, 3)``      for a periodic structure (absent: not
                           float                   periodic); per frame when the box moves
``structure_bonds``        ``(m, 3)`` int          bonds as ``(i, j, order)``, 0-based atom
                                                   indices, order 1, 2, 3 (aromatic: 4)
=========================  ======================  ======================================

Reduced-unit labs (Lennard-Jones) store positions in units of sigma with
pseudo-atoms (number 0); a viewer draws them as spheres of diameter one.
Trajectories are subsampled by the lab to at most :data:`MAX_FRAMES` frames.

:func:`structure_artifacts` builds and checks the arrays; :func:`read_structure`
turns a measurement's artifacts back into a :class:`Structure`, and
:func:`run_structure` reads one record's structure from a run directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

NUMBERS = "structure_numbers"
POSITIONS = "structure_positions"
CELL = "structure_cell"
BONDS = "structure_bonds"
NAMES = (NUMBERS, POSITIONS, CELL, BONDS)

MAX_FRAMES = 50
"""The most trajectory frames a lab stores per experiment (the viewer plays them back)."""


@dataclass(frozen=True)
class Structure:
    """Atoms with positions (one frame or a trajectory), an optional cell and bonds."""

    numbers: np.ndarray  # (n,) int
    positions: np.ndarray  # (frames, n, 3) float, ångström
    cell: np.ndarray | None = None  # (frames, 3, 3) float, ångström, rows are lattice vectors
    bonds: np.ndarray | None = None  # (m, 3) int: i, j, order

    @property
    def n_atoms(self) -> int:
        return int(self.numbers.shape[0])

    @property
    def n_frames(self) -> int:
        return int(self.positions.shape[0])

    @property
    def periodic(self) -> bool:
        return self.cell is not None

    def frame(self, index: int = -1) -> tuple[np.ndarray, np.ndarray | None]:
        """Positions ``(n, 3)`` and cell ``(3, 3)`` (or ``None``) of one frame."""
        positions = self.positions[index]
        if self.cell is None:
            return positions, None
        cell = self.cell[index] if self.cell.shape[0] > 1 else self.cell[0]
        return positions, cell


def subsample_frames(frames: np.ndarray, max_frames: int = MAX_FRAMES) -> np.ndarray:
    """At most ``max_frames`` evenly spaced frames, always keeping the first and the last."""
    frames = np.asarray(frames)
    if frames.shape[0] <= max_frames:
        return frames
    keep = np.unique(np.linspace(0, frames.shape[0] - 1, max_frames).round().astype(int))
    return frames[keep]


def structure_artifacts(
    numbers: np.ndarray,
    positions: np.ndarray,
    cell: np.ndarray | None = None,
    bonds: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """The artifact arrays of one structure, checked; merge them into a measurement's artifacts.

    ``positions`` is ``(n, 3)`` or a trajectory ``(frames, n, 3)`` (subsampled here to
    :data:`MAX_FRAMES`); ``cell`` is ``(3, 3)`` or one per frame; ``bonds`` is
    ``(m, 2)`` (order 1 assumed) or ``(m, 3)``. The arrays are copies.
    """
    numbers = np.array(numbers, dtype=np.int64).reshape(-1)  # copies: the artifacts' own
    positions = np.array(positions, dtype=np.float64)
    n = numbers.shape[0]
    if positions.ndim == 2:
        positions = positions[None]
    if positions.ndim != 3 or positions.shape[1:] != (n, 3):
        raise ValueError(f"positions must be ({n}, 3) or (frames, {n}, 3), got {positions.shape}")
    if not np.all(np.isfinite(positions)):
        raise ValueError("positions must be finite")
    if np.any(numbers < 0) or np.any(numbers > 118):
        raise ValueError("atomic numbers must lie in 0..118 (0: a pseudo-atom)")
    out = {NUMBERS: numbers}
    n_frames = positions.shape[0]
    positions = subsample_frames(positions)
    out[POSITIONS] = positions if positions.shape[0] > 1 else positions[0]
    if cell is not None:
        cell = np.array(cell, dtype=np.float64)
        if cell.shape == (3, 3):
            out[CELL] = cell
        elif cell.shape == (n_frames, 3, 3):
            out[CELL] = subsample_frames(cell)
        else:
            raise ValueError(f"cell must be (3, 3) or ({n_frames}, 3, 3), got {cell.shape}")
    if bonds is not None:
        bonds = np.array(bonds, dtype=np.int64)
        if bonds.ndim == 2 and bonds.shape[1] == 2:
            bonds = np.column_stack([bonds, np.ones(len(bonds), dtype=np.int64)])
        if bonds.ndim != 2 or bonds.shape[1] != 3:
            raise ValueError(f"bonds must be (m, 2) or (m, 3), got {bonds.shape}")
        if bonds.size and (bonds[:, :2].min() < 0 or bonds[:, :2].max() >= n):
            raise ValueError("bond indices must be atoms of the structure")
        out[BONDS] = bonds.reshape(-1, 3)
    return out


def has_structure(artifacts: Mapping[str, object]) -> bool:
    """Whether a measurement's artifacts hold a structure."""
    return NUMBERS in artifacts and POSITIONS in artifacts


def read_structure(artifacts: Mapping[str, np.ndarray]) -> Structure:
    """A :class:`Structure` from artifact arrays (as a measurement or ``Run.artifact`` gives them)."""
    if not has_structure(artifacts):
        raise KeyError(f"no structure: artifacts need {NUMBERS!r} and {POSITIONS!r}")
    numbers = np.asarray(artifacts[NUMBERS], dtype=np.int64).reshape(-1)
    positions = np.asarray(artifacts[POSITIONS], dtype=np.float64)
    if positions.ndim == 2:
        positions = positions[None]
    if positions.ndim != 3 or positions.shape[1:] != (numbers.shape[0], 3):
        raise ValueError(
            f"positions of shape {positions.shape} do not fit {numbers.shape[0]} atoms"
        )
    cell = artifacts.get(CELL)
    if cell is not None:
        cell = np.asarray(cell, dtype=np.float64)
        cell = cell[None] if cell.ndim == 2 else cell
    bonds = artifacts.get(BONDS)
    if bonds is not None:
        bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 3)
    return Structure(numbers, positions, cell, bonds)


def run_structure(run: Any, record_line: Mapping[str, Any]) -> Structure | None:
    """The structure of one record of a run read back by :func:`labtwin.runs.load` (None if
    its measurement has none): ``record_line`` is one of ``run.record_lines``, whose
    measurement names its artifact files; ``run.artifact`` reads them (no pickle)."""
    paths = (record_line.get("measurement") or {}).get("artifacts") or {}
    if not has_structure(paths):
        return None
    return read_structure({name: run.artifact(paths[name]) for name in NAMES if name in paths})
