"""Batched Verlet neighbour lists on Warp devices, shared by the MD and EMT engines.

:class:`NeighbourLists` owns everything about a batch's lists: the rows, the reference
positions (and cell) of the last rebuild, per-system rebuild flags, the skin test, cell
lists, home-box positions, the row capacity and its growth on overflow. An engine gives it
its positions (and, for a cell that changes, its cell array), asks it to launch the list
kernels of a step (:meth:`NeighbourLists.launch_update`, recorded for replay where the
engine records launches) and, after a chunk of steps, whether a row overflowed
(:meth:`NeighbourLists.grow_on_overflow`). Kernels: :mod:`._kernels`.

What was chosen, and why:

- **Search, per system** (:meth:`NeighbourLists.searches`): cell lists (5 x 5 x 5 cells at
  least half the list radius wide) for orthorhombic boxes of six or more such cells per edge,
  where cells prune pairs; all pairs at the nearest image for isolated systems and boxes at
  least twice the list radius across; all pairs at every periodic image within the list
  radius for smaller or triclinic cells (which see several images of an atom, and of
  themselves). Below six cells per edge the 125 stencil cells hold more atoms than the box,
  so an all-pairs search costs less.
- **Layout**: half rows (``j > i``, each pair once) where launches are serial (CPU: Newton's
  third law halves the pair work, and a serial launch fills cells in index order, so rows are
  a deterministic function of the positions at the rebuild) or full rows (each pair for both
  atoms: one writer per force on CUDA, cell rows sorted because cells fill in a racy order).
- **Two row encodings behind one search**: *packed* (MD) stores ``(j << 5) | image code``
  with the image ``n`` of j in {-1, 0, 1}^3, from home-box positions ``xw`` that the force
  loop reads with a 27-entry shift table: one int per pair, no minimum image in the hot loop
  (the MD force loop's speed). *Shifts* (EMT) store ``j`` and an integer image vector ``n``
  relative to the engine's own, never wrapped, positions: any number of images (a cell
  smaller than twice the cutoff) and triclinic cells, and the engine's force loops read
  ``x_j - x_i + n h`` without a wrap step. Cell lists need home-box positions, so they run
  with the packed encoding; EMT's cells (1-108 atoms, under three list radii across) are
  where cells prune nothing anyway. Every search writes through one ``emit`` function.
- **Skin tests**: in a fixed box a system's lists are rebuilt when one of its atoms moved
  more than half the skin since the last rebuild (per-system flags, so a system's rebuild
  times, and with half rows its summation order, do not depend on the batch); for a cell
  that changes (cell relaxations) the test bounds displacement and strain together.
- **Overflow**: a row holds at most ``capacity - 1`` entries (the last slot takes rejected
  candidates, so the searches write branch-free); a longer row is cut, its length recorded,
  and :meth:`NeighbourLists.grow_on_overflow` enlarges every row. What is redone then is the
  engine's choice (a chunk of MD steps from its start, a block of FIRE iterations).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: launch(kernel, dim, inputs): an engine's launcher (it may record launches for replay)
Launcher = Callable[[Any, int, list[Any]], None]

#: cells per edge below which the 5 x 5 x 5 stencil holds more atoms than the box
MIN_CELLS_PER_EDGE = 6


class NeighbourLists:
    """Verlet lists of a batch of systems (see the module docstring).

    Args:
        x: (n_atoms,) Warp vec3 array of the engine's positions (never wrapped); read at
            every launch, so the engine updates it in place.
        atom_sys, sys_start: the engine's Warp int32 arrays (system of each atom; first atom
            of each system, n_systems + 1 entries).
        cells: (n_systems, 3, 3) lattice vectors as rows (host); a non-periodic system's
            entry is ignored.
        periodic: (n_systems,) bool.
        cutoff: (n_systems,) interaction radius (pairs beyond it contribute nothing; ``inf``
            for all pairs of an isolated system).
        skin: the list radius is ``cutoff + skin``.
        half: half rows (``j > i``) instead of full rows.
        packed: packed entries ``(j << 5) | image code`` from home-box positions (``xw``),
            else ``nbr`` holds j and ``nbr_shift`` the image.
        capacity: initial row capacity (entries + 1).
        cell: the engine's (n_systems,) Warp mat33 array of cells where they change (then
            the skin test bounds strain too); None for fixed cells (made from ``cells``).
        active: the engine's (n_systems,) Warp int32 array, 0 for systems left alone
            (never rebuilt); None: every system is active.
        device: Warp device.
    """

    def __init__(
        self,
        x: Any,
        atom_sys: Any,
        sys_start: Any,
        cells: np.ndarray,
        periodic: np.ndarray,
        cutoff: np.ndarray,
        skin: float,
        *,
        half: bool,
        packed: bool,
        capacity: int,
        cell: Any = None,
        active: Any = None,
        device: str,
    ) -> None:
        import warp as wp

        from labtwin.simulators.neighbours._kernels import SEARCH_CELLS, make_kernels

        self.wp, self.device = wp, device
        self.scalar = x.dtype._wp_scalar_type_
        self.dtype = np.float64 if self.scalar == wp.float64 else np.float32
        self.vec3 = x.dtype
        self.mat33 = wp.types.matrix((3, 3), self.scalar)
        self.kernels = make_kernels(self.scalar)
        self.x, self.atom_sys, self.sys_start = x, atom_sys, sys_start
        self.n_atoms = int(x.shape[0])
        self.n_systems = int(sys_start.shape[0]) - 1
        self.half, self.packed = bool(half), bool(packed)
        self.deforming = cell is not None
        self.active = active
        if self.packed and self.n_atoms >= 2**26:
            raise ValueError("at most 2**26 atoms per batch (packed entries hold j << 5)")

        cells = np.asarray(cells, dtype=np.float64).reshape(self.n_systems, 3, 3)
        periodic = np.asarray(periodic, dtype=bool)
        cutoff = np.asarray(cutoff, dtype=np.float64)
        r_list = cutoff + skin
        self.periodic_host, self.list_radius_host = periodic, r_list
        box = np.diagonal(cells, axis1=1, axis2=2)
        orthorhombic = np.all(cells == box[:, :, None] * np.eye(3), axis=(1, 2))
        searches, n_cells = self.searches(
            box, orthorhombic & self.packed, periodic, r_list, self.dtype
        )
        self.search_host, self.n_cells_host = searches, n_cells
        cells_per_system = n_cells.prod(axis=1)

        def arr(values: np.ndarray, dtype: Any) -> Any:
            return wp.array(values, dtype=dtype, device=device)

        s = self.scalar
        self.search = arr(searches.astype(np.int32), wp.int32)
        self.box = arr(box.astype(self.dtype), self.vec3)
        with np.errstate(divide="ignore"):  # a triclinic cell's diagonal may hold a zero
            self.inv_box = arr((1.0 / box).astype(self.dtype), self.vec3)
        self.periodic = arr(periodic.astype(np.int32), wp.int32)
        self.cutoff = arr(cutoff.astype(self.dtype), s)
        self.list_radius = arr(r_list.astype(self.dtype), s)
        self.half_skin2 = arr(np.full(self.n_systems, (skin / 2) ** 2, dtype=self.dtype), s)
        self.cell = cell if cell is not None else arr(cells.astype(self.dtype), self.mat33)
        self.cell_ref = wp.zeros(self.n_systems, dtype=self.mat33, device=device)
        self.n_cells = arr(n_cells.astype(np.int32), wp.vec3i)
        offsets = np.concatenate([[0], np.cumsum(cells_per_system)]).astype(np.int32)
        self.cell_offset = arr(offsets[:-1], wp.int32)
        self.n_cells_total = int(offsets[-1])
        self.cell_sys = arr(
            np.repeat(np.arange(self.n_systems), cells_per_system).astype(np.int32), wp.int32
        )
        n_cells_alloc = max(self.n_cells_total, 1)
        self.cell_count = wp.zeros(n_cells_alloc, dtype=wp.int32, device=device)
        self.cell_start = wp.zeros(n_cells_alloc, dtype=wp.int32, device=device)
        self.atom_cell = wp.zeros(self.n_atoms, dtype=wp.int32, device=device)
        self.atom_slot = wp.zeros(self.n_atoms, dtype=wp.int32, device=device)
        self.cell_atom = wp.zeros(self.n_atoms, dtype=wp.int32, device=device)
        self.cell_x = wp.zeros(self.n_atoms, dtype=self.vec3, device=device)
        self.rebuild = wp.zeros(self.n_systems, dtype=wp.int32, device=device)
        self.overflow = wp.zeros(1, dtype=wp.int32, device=device)
        self.x_ref = wp.zeros_like(x)
        if self.packed:
            self.offset = wp.zeros_like(x)  # box lengths taken off x at the last rebuild
            self.xw = wp.clone(x)  # x - offset: home-box positions the rows refer to
        else:
            self.offset, self.xw = None, x
        self.nbr_count = wp.zeros(self.n_atoms, dtype=wp.int32, device=device)
        self.capacity = max(int(capacity), 2)
        self.uses_cells = bool(np.any(searches == SEARCH_CELLS))
        self._allocate()

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def searches(
        box: np.ndarray,
        orthorhombic: np.ndarray,
        periodic: np.ndarray,
        r_list: np.ndarray,
        dtype: type = np.float64,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The search of each system (``SEARCH_*`` of :mod:`._kernels`) and its cells per edge
        (zero where cells are not used), from the cells' diagonals ``box``; whether a box is
        twice the list radius across is decided in the kernels' float type ``dtype``. Cells
        and the nearest image need home-box positions: pass ``orthorhombic`` False for rows
        that refer to unwrapped positions (the shift encoding)."""
        from labtwin.simulators.neighbours._kernels import (
            SEARCH_CELLS,
            SEARCH_IMAGES,
            SEARCH_NEAREST,
        )

        half_radius = np.where(np.isfinite(r_list), r_list / 2, np.inf)[:, None]
        n_cells = np.where(
            (periodic & orthorhombic)[:, None], np.floor(box / half_radius * (1 - 1e-9)), 0
        ).astype(int)
        n_cells[np.any(n_cells < MIN_CELLS_PER_EDGE, axis=1)] = 0
        wide = orthorhombic & (box.astype(dtype).min(axis=1) >= 2 * r_list.astype(dtype))
        searches = np.where(
            n_cells[:, 0] > 0,
            SEARCH_CELLS,
            np.where(~periodic | wide, SEARCH_NEAREST, SEARCH_IMAGES),
        )
        return searches, n_cells

    def _allocate(self) -> None:
        wp = self.wp
        shape = (self.n_atoms, self.capacity)
        self.nbr = wp.zeros(shape, dtype=wp.int32, device=self.device)
        self.nbr_shift = wp.zeros(
            (1, 1) if self.packed else shape, dtype=wp.vec3i, device=self.device
        )

    def _default_launch(self, kernel: Any, dim: int, inputs: list[Any]) -> None:
        self.wp.launch(kernel, dim, inputs, device=self.device)

    # ------------------------------------------------------------------ launches
    def launch_flags(self, value: int, go: Launcher | None = None) -> None:
        """Flag every (active) system for a rebuild (``value`` 1) or none (0)."""
        go = go or self._default_launch
        if value and self.active is not None:
            self.wp.copy(self.rebuild, self.active)
            return
        go(self.kernels.reset_flags, self.n_systems, [self.rebuild, int(value)])

    def launch_check(self, go: Launcher | None = None) -> None:
        """Flag the systems whose lists may miss a pair within the cutoff (the skin test)."""
        go = go or self._default_launch
        k = self.kernels
        go(k.reset_flags, self.n_systems, [self.rebuild, 0])
        if self.deforming:
            go(
                k.check_deformation,
                self.n_systems,
                [
                    self.x,
                    self.sys_start,
                    self.active,
                    self.cell,
                    self.x_ref,
                    self.cell_ref,
                    self.cutoff,
                    self.list_radius,
                    self.rebuild,
                ],
            )
        else:
            go(
                k.check_displacement,
                self.n_atoms,
                [self.x, self.x_ref, self.atom_sys, self.half_skin2, self.rebuild],
            )

    def launch_build(self, go: Launcher | None = None) -> None:
        """Home-box positions (packed encoding), then the rows of the flagged systems."""
        go = go or self._default_launch
        k = self.kernels
        if self.packed:
            go(
                k.wrap_positions,
                self.n_atoms,
                [
                    self.x,
                    self.atom_sys,
                    self.box,
                    self.inv_box,
                    self.periodic,
                    self.rebuild,
                    self.offset,
                    self.xw,
                ],
            )
        if self.n_cells_total:
            go(k.clear_cells, self.n_cells_total, [self.cell_sys, self.rebuild, self.cell_count])
            go(
                k.bin_atoms,
                self.n_atoms,
                [
                    self.xw,
                    self.atom_sys,
                    self.box,
                    self.n_cells,
                    self.cell_offset,
                    self.rebuild,
                    self.cell_count,
                    self.atom_cell,
                    self.atom_slot,
                ],
            )
            go(
                k.scan_cells,
                self.n_systems,
                [
                    self.n_cells,
                    self.cell_offset,
                    self.sys_start,
                    self.rebuild,
                    self.cell_count,
                    self.cell_start,
                ],
            )
            go(
                k.sort_atoms_by_cell,
                self.n_atoms,
                [
                    self.xw,
                    self.atom_sys,
                    self.n_cells,
                    self.rebuild,
                    self.atom_cell,
                    self.atom_slot,
                    self.cell_start,
                    self.cell_atom,
                    self.cell_x,
                ],
            )
        go(
            k.build,
            self.n_atoms,
            [
                self.xw,
                self.x,
                self.atom_sys,
                self.sys_start,
                self.search,
                self.box,
                self.cell,
                self.periodic,
                self.list_radius,
                self.n_cells,
                self.cell_offset,
                self.cell_count,
                self.cell_start,
                self.cell_atom,
                self.cell_x,
                self.atom_cell,
                self.atom_slot,
                self.rebuild,
                int(self.half),
                int(self.packed),
                self.x_ref,
                self.cell_ref,
                self.nbr,
                self.nbr_shift,
                self.nbr_count,
                self.overflow,
            ],
        )

    def launch_update(self, go: Launcher | None = None) -> None:
        """The skin test, then rebuilds where it failed (a step's list work, no host sync)."""
        self.launch_check(go)
        self.launch_build(go)

    # ------------------------------------------------------------------ host side
    def rebuild_all(self) -> bool:
        """Rebuild every (active) system's rows now, growing capacity until none overflows;
        True if the capacity grew (arrays were replaced)."""
        grew = False
        while True:
            self.overflow.zero_()
            self.launch_flags(1)
            self.launch_build()
            if not self.grow_on_overflow():
                return grew
            grew = True

    def grow_on_overflow(self) -> bool:
        """True (after enlarging every row, so that the lists must be rebuilt) if a row
        overflowed since ``overflow`` was last cleared; clears it."""
        needed = int(self.overflow.numpy()[0])
        if not needed:
            return False
        self.resize(max(int(needed * 1.25) + 8, self.capacity))
        self.overflow.zero_()
        return True

    def resize(self, capacity: int) -> None:
        """New, empty rows of ``capacity`` (entries + 1); the lists must then be rebuilt."""
        self.capacity = max(int(capacity), 2)
        self._allocate()

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows on the host: (i, j, n) of every entry, n the (n_entries, 3) integer image
        of j (``x_j + n h`` is the neighbour), in row order."""
        counts = self.nbr_count.numpy()
        nbr = self.nbr.numpy()
        i = np.repeat(np.arange(self.n_atoms), counts)
        k = np.concatenate([np.arange(c) for c in counts]) if counts.size else counts
        entry = nbr[i, k]
        if self.packed:
            code = entry & 31
            n = np.stack([code // 9, code // 3 % 3, code % 3], axis=1) - 1
            return i, entry >> 5, n
        return i, entry, self.nbr_shift.numpy()[i, k].reshape(-1, 3)
