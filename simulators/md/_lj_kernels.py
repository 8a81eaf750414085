"""Warp kernels for batched Lennard-Jones MD (reduced units), built once per float type.

Every kernel runs over all atoms (or all systems, or all cells) of the whole batch in one
launch. Systems are contiguous atom ranges ``sys_start[s]:sys_start[s+1]``.

Two neighbour-list layouts, chosen by device in :class:`~labtwin.simulators.md.lj_warp.WarpLJ`:

- CPU, half lists (``half = 1``): row ``i`` holds the neighbours ``j > i`` only, and
  :func:`lj_forces_half` applies Newton's third law, writing ``f[j]`` as well as ``f[i]``:
  half the pair work of a full list. Warp runs a CPU launch as one serial loop over the
  threads, so these plain (non-atomic) writes are race-free and the summation order is fixed:
  ``f[i]`` receives the pairs of the atoms ``k < i`` of its system in the order of ``k``, then
  its own row. Cells are filled by that same serial loop, so each cell lists its atoms by
  index and each row is a deterministic function of the positions at the rebuild; no row is
  sorted. Rebuild times are per system (half-skin displacement), so a system's trajectory is
  the same alone or in any batch, and the same from run to run.
- CUDA, full lists (``half = 0``): each pair is stored for both atoms, each thread writes only
  its own atom's force (no float atomics). Cells are filled by atomics in a racy order, so
  rows are sorted by atom index (insertion sort): pairs beyond the cutoff contribute exactly
  nothing, so forces, to the last bit, do not depend on when lists are rebuilt.

This module must not use ``from __future__ import annotations``: Warp reads the annotations.
"""

import functools
from types import SimpleNamespace

import warp as wp

from labtwin.simulators.md._fire_kernels import make_fire_kernels


@functools.cache
def make_kernels(scalar: type) -> SimpleNamespace:
    """Kernels for ``scalar`` = ``wp.float32`` or ``wp.float64``, in one Warp module each."""
    vec3 = wp.types.vector(3, scalar)
    module = f"labtwin_md_lj_{scalar.__name__}"

    @wp.func
    def min_image(d: vec3, box: vec3, inv_box: vec3, periodic: int) -> vec3:
        if periodic == 0:
            return d
        return vec3(
            d[0] - box[0] * wp.round(d[0] * inv_box[0]),
            d[1] - box[1] * wp.round(d[1] * inv_box[1]),
            d[2] - box[2] * wp.round(d[2] * inv_box[2]),
        )

    @wp.func
    def cell_coord(x: scalar, length: scalar, n: int) -> int:
        u = x / length - wp.floor(x / length)  # wrapped fractional coordinate in [0, 1)
        c = int(u * scalar(n))
        return wp.clamp(c, 0, n - 1)

    @wp.kernel(enable_backward=False, module=module)
    def reset_flags(rebuild: wp.array(dtype=wp.int32), value: int):
        s = wp.tid()
        rebuild[s] = value

    @wp.kernel(enable_backward=False, module=module)
    def check_displacement(
        x: wp.array(dtype=vec3),
        x_ref: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        half_skin2: wp.array(dtype=scalar),
        rebuild: wp.array(dtype=wp.int32),
    ):
        # positions are never wrapped, so the raw difference is the true displacement
        i = wp.tid()
        s = atom_sys[i]
        d = x[i] - x_ref[i]
        if wp.dot(d, d) > half_skin2[s]:
            rebuild[s] = 1

    @wp.func
    def image_range(d: scalar, length: scalar, inv_length: scalar, reach: scalar) -> wp.vec2i:
        # images n (d - n L) of a coordinate difference d within reach (< L) of 0: the
        # nearest, and the next one where that is within reach too. Home-box positions give
        # |d| < L, so n is in {-1, 0, 1}; the clamp keeps blown-up (huge or NaN) positions
        # from making image codes outside the table
        n0 = wp.clamp(int(wp.round(d * inv_length)), -1, 1)
        delta = d - scalar(n0) * length
        if length - wp.abs(delta) < reach:
            if delta > scalar(0.0):
                return wp.vec2i(n0, wp.min(n0 + 1, 1))
            return wp.vec2i(wp.max(n0 - 1, -1), n0)
        return wp.vec2i(n0, n0)

    @wp.kernel(enable_backward=False, module=module)
    def wrap_positions(
        x: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        box: wp.array(dtype=vec3),
        inv_box: wp.array(dtype=vec3),
        periodic: wp.array(dtype=wp.int32),
        rebuild: wp.array(dtype=wp.int32),
        offset: wp.array(dtype=vec3),
        xw: wp.array(dtype=vec3),
    ):
        # xw = x - offset, with offset (whole box lengths) reset where the system's lists are
        # rebuilt, so xw is in the home box at a rebuild and near it until the next one
        i = wp.tid()
        s = atom_sys[i]
        if rebuild[s] != 0 and periodic[s] != 0:
            b = box[s]
            ib = inv_box[s]
            xi = x[i]
            offset[i] = vec3(
                b[0] * wp.floor(xi[0] * ib[0]),
                b[1] * wp.floor(xi[1] * ib[1]),
                b[2] * wp.floor(xi[2] * ib[2]),
            )
        xw[i] = x[i] - offset[i]

    @wp.kernel(enable_backward=False, module=module)
    def clear_cells(
        cell_sys: wp.array(dtype=wp.int32),
        rebuild: wp.array(dtype=wp.int32),
        cell_count: wp.array(dtype=wp.int32),
    ):
        c = wp.tid()
        if rebuild[cell_sys[c]] != 0:
            cell_count[c] = 0

    @wp.kernel(enable_backward=False, module=module)
    def bin_atoms(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        box: wp.array(dtype=vec3),
        n_cells: wp.array(dtype=wp.vec3i),
        cell_offset: wp.array(dtype=wp.int32),
        rebuild: wp.array(dtype=wp.int32),
        cell_count: wp.array(dtype=wp.int32),
        atom_cell: wp.array(dtype=wp.int32),
        atom_slot: wp.array(dtype=wp.int32),
    ):
        # each atom's cell and its place in it; on the CPU (a serial launch) the places
        # follow atom index
        i = wp.tid()
        s = atom_sys[i]
        nc = n_cells[s]
        if rebuild[s] == 0 or nc[0] == 0:
            return
        b = box[s]
        cx = cell_coord(xw[i][0], b[0], nc[0])
        cy = cell_coord(xw[i][1], b[1], nc[1])
        cz = cell_coord(xw[i][2], b[2], nc[2])
        cid = cell_offset[s] + (cx * nc[1] + cy) * nc[2] + cz
        atom_cell[i] = cid
        atom_slot[i] = wp.atomic_add(cell_count, cid, 1)

    @wp.kernel(enable_backward=False, module=module)
    def scan_cells(
        n_cells: wp.array(dtype=wp.vec3i),
        cell_offset: wp.array(dtype=wp.int32),
        sys_start: wp.array(dtype=wp.int32),
        rebuild: wp.array(dtype=wp.int32),
        cell_count: wp.array(dtype=wp.int32),
        cell_start: wp.array(dtype=wp.int32),
    ):
        # one thread per system: where each of its cells starts in the cell-ordered atoms
        s = wp.tid()
        nc = n_cells[s]
        if rebuild[s] == 0 or nc[0] == 0:
            return
        p = sys_start[s]
        for c in range(cell_offset[s], cell_offset[s] + nc[0] * nc[1] * nc[2]):
            cell_start[c] = p
            p += cell_count[c]

    @wp.kernel(enable_backward=False, module=module)
    def sort_atoms_by_cell(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        n_cells: wp.array(dtype=wp.vec3i),
        rebuild: wp.array(dtype=wp.int32),
        atom_cell: wp.array(dtype=wp.int32),
        atom_slot: wp.array(dtype=wp.int32),
        cell_start: wp.array(dtype=wp.int32),
        cell_atom: wp.array(dtype=wp.int32),
        cell_x: wp.array(dtype=vec3),
    ):
        # the system's atoms (and their home-box positions) in cell order
        i = wp.tid()
        s = atom_sys[i]
        if rebuild[s] == 0 or n_cells[s][0] == 0:
            return
        p = cell_start[atom_cell[i]] + atom_slot[i]
        cell_atom[p] = i
        cell_x[p] = xw[i]

    @wp.func
    def wrap_count(c: int, n: int) -> int:
        # periodic image of cell coordinate c in [-2, n + 1] (n >= 5): -1, 0 or 1
        if c < 0:
            return -1
        if c >= n:
            return 1
        return 0

    @wp.func
    def image_code(nx: int, ny: int, nz: int) -> int:
        return (nx + 1) * 9 + (ny + 1) * 3 + (nz + 1)

    @wp.kernel(enable_backward=False, module=module)
    def build_neighbours(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        sys_start: wp.array(dtype=wp.int32),
        box: wp.array(dtype=vec3),
        inv_box: wp.array(dtype=vec3),
        periodic: wp.array(dtype=wp.int32),
        list_radius: wp.array(dtype=scalar),
        n_cells: wp.array(dtype=wp.vec3i),
        cell_offset: wp.array(dtype=wp.int32),
        cell_count: wp.array(dtype=wp.int32),
        cell_start: wp.array(dtype=wp.int32),
        cell_atom: wp.array(dtype=wp.int32),
        cell_x: wp.array(dtype=vec3),
        atom_cell: wp.array(dtype=wp.int32),
        atom_slot: wp.array(dtype=wp.int32),
        rebuild: wp.array(dtype=wp.int32),
        half: int,
        x: wp.array(dtype=vec3),
        x_ref: wp.array(dtype=vec3),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_count: wp.array(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # Entries are (j << 5) | image code: the pair (i, j + n L) with n in {-1, 0, 1}^3, from
        # the home-box positions xw, so that forces need no minimum image. Every image of j
        # within the list radius is listed (a box under twice the radius holds several).
        # half = 1: j > i only (CPU, Newton's third law); half = 0: all j != i, each row
        # then sorted (CUDA, where cells fill in a racy order).
        i = wp.tid()
        s = atom_sys[i]
        if rebuild[s] == 0:
            return
        x_ref[i] = x[i]
        xi = xw[i]
        b = box[s]
        ib = inv_box[s]
        per = periodic[s]
        reach = list_radius[s]
        r2max = reach * reach
        # a row holds at most capacity - 1 entries; the last slot takes rejected candidates
        last = nbr.shape[1] - 1
        n = int(0)  # noqa: UP018 - Warp needs int() for a variable mutated in loops
        nc = n_cells[s]
        if nc[0] == 0:
            # all pairs of the system
            first = sys_start[s]
            if half != 0:
                first = i + 1
            single = per == 0 or wp.min(b) >= scalar(2.0) * reach
            h = scalar(0.5) * b
            for j in range(first, sys_start[s + 1]):
                if j != i:
                    d = xi - xw[j]
                    if single:
                        # at most one image within reach: the nearest (home-box positions,
                        # so |d| < L per axis)
                        nx = int(0)  # noqa: UP018
                        ny = int(0)  # noqa: UP018
                        nz = int(0)  # noqa: UP018
                        if per != 0:
                            nx = wp.where(d[0] > h[0], 1, wp.where(d[0] < -h[0], -1, 0))
                            ny = wp.where(d[1] > h[1], 1, wp.where(d[1] < -h[1], -1, 0))
                            nz = wp.where(d[2] > h[2], 1, wp.where(d[2] < -h[2], -1, 0))
                        e = d - vec3(scalar(nx) * b[0], scalar(ny) * b[1], scalar(nz) * b[2])
                        # branch-free: write the candidate, keep it if within reach
                        nbr[i, wp.min(n, last)] = (j << 5) | image_code(nx, ny, nz)
                        n += wp.where(wp.dot(e, e) < r2max, 1, 0)
                    else:
                        # a box under twice the list radius: up to two images per axis
                        rx = image_range(d[0], b[0], ib[0], reach)
                        ry = image_range(d[1], b[1], ib[1], reach)
                        rz = image_range(d[2], b[2], ib[2], reach)
                        for mx in range(rx[0], rx[1] + 1):
                            for my in range(ry[0], ry[1] + 1):
                                for mz in range(rz[0], rz[1] + 1):
                                    e = d - vec3(
                                        scalar(mx) * b[0], scalar(my) * b[1], scalar(mz) * b[2]
                                    )
                                    if wp.dot(e, e) < r2max:
                                        nbr[i, wp.min(n, last)] = (j << 5) | image_code(mx, my, mz)
                                        n += 1
        else:
            # cells at least half the list radius wide: the 5 x 5 x 5 cells around i's,
            # unfolded across the periodic boundary (each (cell, image) once), read as runs
            # of consecutive cells along z from the cell-ordered atoms. For a half list only
            # the upper half of them (offsets after (0, 0, 0) in lexicographic order) and the
            # atoms after i in its own cell (index order there), so each pair is found once.
            cx = cell_coord(xi[0], b[0], nc[0])
            cy = cell_coord(xi[1], b[1], nc[1])
            cz = cell_coord(xi[2], b[2], nc[2])
            own = atom_cell[i]
            first_x = -2
            if half != 0:
                first_x = 0
            for ox in range(first_x, 3):
                ix = wrap_count(cx + ox, nc[0])
                ax = cx + ox - ix * nc[0]
                for oy in range(-2, 3):
                    if half != 0 and ox == 0 and oy < 0:
                        continue
                    iy = wrap_count(cy + oy, nc[1])
                    ay = cy + oy - iy * nc[1]
                    column = cell_offset[s] + (ax * nc[1] + ay) * nc[2]
                    z_first = cz - 2
                    if half != 0 and ox == 0 and oy == 0:
                        z_first = cz
                    for image_z in range(3):
                        # the part of the run z_first .. cz + 2 in periodic image iz
                        iz = image_z - 1
                        lo = wp.max(z_first, iz * nc[2]) - iz * nc[2]
                        hi = wp.min(cz + 2, iz * nc[2] + nc[2] - 1) - iz * nc[2]
                        if lo <= hi:
                            p_first = cell_start[column + lo]
                            p_end = cell_start[column + hi] + cell_count[column + hi]
                            if half != 0 and column + lo == own and iz == 0:
                                p_first = cell_start[own] + atom_slot[i] + 1
                            shift = vec3(scalar(ix) * b[0], scalar(iy) * b[1], scalar(iz) * b[2])
                            code = image_code(ix, iy, iz)
                            xs = xi - shift
                            for p in range(p_first, p_end):
                                j = cell_atom[p]
                                if j != i:
                                    d = xs - cell_x[p]
                                    nbr[i, wp.min(n, last)] = (j << 5) | code
                                    n += wp.where(wp.dot(d, d) < r2max, 1, 0)
        if half == 0:
            # insertion sort of the row (deterministic summation order)
            m = wp.min(n, last)
            for a in range(1, m):
                key = nbr[i, a]
                c = a - 1
                while c >= 0:
                    if nbr[i, c] > key:
                        nbr[i, c + 1] = nbr[i, c]
                        c -= 1
                    else:
                        break
                nbr[i, c + 1] = key
        if n >= last:
            wp.atomic_max(overflow, 1, n + 1)
            n = last
        nbr_count[i] = n

    @wp.kernel(enable_backward=False, module=module)
    def lj_forces(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        image_shift: wp.array2d(dtype=vec3),
        cutoff2: wp.array(dtype=scalar),
        energy_shift: wp.array(dtype=scalar),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_count: wp.array(dtype=wp.int32),
        f: wp.array(dtype=vec3),
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=scalar),
    ):
        # full lists (CUDA). U = 4 (r^-12 - r^-6) for r < rc (minus the optional shift); each
        # atom gets half of each pair energy and half of each pair virial r . F = 24 (2 r^-12 - r^-6).
        i = wp.tid()
        s = atom_sys[i]
        xi = xw[i]
        rc2 = cutoff2[s]
        shift = energy_shift[s]
        fi = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        e = scalar(0.0)
        w = scalar(0.0)
        for k in range(nbr_count[i]):
            entry = nbr[i, k]
            d = xi - xw[entry >> 5] - image_shift[s, entry & 31]
            r2 = wp.dot(d, d)
            if r2 < rc2:
                inv2 = scalar(1.0) / r2
                inv6 = inv2 * inv2 * inv2
                pair_virial = scalar(24.0) * inv6 * (scalar(2.0) * inv6 - scalar(1.0))
                fi = fi + (pair_virial * inv2) * d
                e = e + scalar(2.0) * inv6 * (inv6 - scalar(1.0)) - scalar(0.5) * shift
                w = w + scalar(0.5) * pair_virial
        f[i] = fi
        atom_energy[i] = e
        atom_virial[i] = w

    @wp.kernel(enable_backward=False, module=module)
    def zero_forces(f: wp.array(dtype=vec3)):
        i = wp.tid()
        f[i] = vec3(scalar(0.0), scalar(0.0), scalar(0.0))

    half_row = wp.func_native(_half_row_snippet(scalar))(_half_row_signature(vec3, scalar))

    @wp.kernel(enable_backward=False, module=module)
    def lj_forces_half(
        xw: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        image_shift: wp.array2d(dtype=vec3),
        cutoff2: wp.array(dtype=scalar),
        energy_shift: wp.array(dtype=scalar),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_count: wp.array(dtype=wp.int32),
        f: wp.array(dtype=vec3),
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=scalar),
        energy: int,
    ):
        # half lists, CPU only (a serial launch; f zeroed first by zero_forces): each pair
        # once, its force added to i and subtracted from j (Newton's third law); atom i books
        # the whole energy and virial of the pairs of its row, computed only where
        # ``energy`` is set (the steps whose sums are read). The row loop is C++ (see
        # _half_row_snippet).
        i = wp.tid()
        s = atom_sys[i]
        half_row(
            xw,
            image_shift,
            nbr,
            f,
            atom_energy,
            atom_virial,
            i,
            s,
            nbr_count[i],
            cutoff2[s],
            energy_shift[s],
            energy,
        )

    @wp.kernel(enable_backward=False, module=module)
    def langevin_baoa(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        v_mid: wp.array(dtype=vec3),
        f: wp.array(dtype=vec3),
        mass: wp.array(dtype=scalar),
        atom_sys: wp.array(dtype=wp.int32),
        sys_start: wp.array(dtype=wp.int32),
        c1: wp.array(dtype=scalar),
        c2: wp.array(dtype=scalar),
        temperature: wp.array(dtype=scalar),
        seed: wp.array(dtype=wp.int32),
        step: wp.array(dtype=wp.int32),
        dt: scalar,
    ):
        # B (half kick), A (half drift), O (exact Ornstein-Uhlenbeck), A (half drift) of BAOAB.
        # With friction 0 (c1 = 1, c2 = 0) this is the first half of velocity Verlet (NVE).
        # v_mid keeps the velocities after O, which the kinetic temperature is read from: the
        # full-step velocities of BAOAB are cooler than the thermostat by O(dt^2) (by
        # (omega dt)^2 / 4 for a harmonic mode), the mid-step ones only at higher order.
        i = wp.tid()
        s = atom_sys[i]
        inv_m = scalar(1.0) / mass[i]
        half = scalar(0.5) * dt
        vi = v[i] + (half * inv_m) * f[i]
        xi = x[i] + half * vi
        if c2[s] != scalar(0.0):
            # counter-based RNG keyed by (system seed, step, atom index within the system)
            key = wp.rand_init(seed[s], step[0])
            rng = wp.rand_init(wp.int32(key), i - sys_start[s])
            noise = vec3(scalar(wp.randn(rng)), scalar(wp.randn(rng)), scalar(wp.randn(rng)))
            vi = c1[s] * vi + (c2[s] * wp.sqrt(temperature[s] * inv_m)) * noise
        x[i] = xi + half * vi
        v[i] = vi
        v_mid[i] = vi

    @wp.kernel(enable_backward=False, module=module)
    def kick(
        v: wp.array(dtype=vec3),
        f: wp.array(dtype=vec3),
        mass: wp.array(dtype=scalar),
        step: wp.array(dtype=wp.int32),
        dt: scalar,
    ):
        # final B (half kick) of BAOAB / velocity Verlet; thread 0 advances the step counter
        i = wp.tid()
        v[i] = v[i] + (scalar(0.5) * dt / mass[i]) * f[i]
        if i == 0:
            step[0] = step[0] + 1

    @wp.kernel(enable_backward=False, module=module)
    def system_sums(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        v_mid: wp.array(dtype=vec3),
        c2: wp.array(dtype=scalar),
        mass: wp.array(dtype=scalar),
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=scalar),
        x_origin: wp.array(dtype=vec3),
        sys_start: wp.array(dtype=wp.int32),
        row: int,
        kinetic: wp.array2d(dtype=wp.float64),
        potential: wp.array2d(dtype=wp.float64),
        virial: wp.array2d(dtype=wp.float64),
        msd: wp.array2d(dtype=wp.float64),
    ):
        # one thread per system, summing its atoms in order (deterministic), in float64; the
        # kinetic energy of a thermostatted system from its mid-step (post-O) velocities
        s = wp.tid()
        thermostatted = c2[s] != scalar(0.0)
        ke = wp.float64(0.0)
        pe = wp.float64(0.0)
        vir = wp.float64(0.0)
        d2 = wp.float64(0.0)
        dsum = wp.vec3d(0.0, 0.0, 0.0)
        for i in range(sys_start[s], sys_start[s + 1]):
            vi = wp.vec3d(v[i])
            if thermostatted:
                vi = wp.vec3d(v_mid[i])
            ke += wp.float64(0.5) * wp.float64(mass[i]) * wp.dot(vi, vi)
            pe += wp.float64(atom_energy[i])
            vir += wp.float64(atom_virial[i])
            d = wp.vec3d(x[i] - x_origin[i])
            d2 += wp.dot(d, d)
            dsum += d
        n = wp.float64(sys_start[s + 1] - sys_start[s])
        kinetic[row, s] = ke
        potential[row, s] = pe
        virial[row, s] = vir
        # mean squared displacement about the system's centre of mass motion
        msd[row, s] = d2 / n - wp.dot(dsum, dsum) / (n * n)

    @wp.kernel(enable_backward=False, module=module)
    def rdf_histogram(
        x: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        sys_start: wp.array(dtype=wp.int32),
        box: wp.array(dtype=vec3),
        inv_box: wp.array(dtype=vec3),
        periodic: wp.array(dtype=wp.int32),
        bin_width: scalar,
        block: int,
        hist: wp.array3d(dtype=wp.int32),
    ):
        # ordered pairs of each periodic system (integer atomics: order-independent)
        i = wp.tid()
        s = atom_sys[i]
        if periodic[s] == 0:
            return
        n_bins = hist.shape[2]
        for j in range(sys_start[s], sys_start[s + 1]):
            if j != i:
                d = min_image(x[i] - x[j], box[s], inv_box[s], 1)
                k = int(wp.length(d) / bin_width)
                if k < n_bins:
                    wp.atomic_add(hist, block, s, k, 1)

    kernels = {k: v for k, v in locals().items() if isinstance(v, wp.Kernel)}
    fire = make_fire_kernels(scalar)  # FIRE is shared with the EMT engine
    return SimpleNamespace(**kernels, fire_system=fire.fire_system, fire_atom=fire.fire_atom)


def _half_row_snippet(scalar: type) -> str:
    """C++ body of the half-list row loop of :func:`make_kernels`' ``lj_forces_half``.

    Warp's generated code indexes every array element through a bounds-wrapping, byte-strided
    address computation; on the CPU that made this loop (the MD engine's hot spot) about 1.6x
    slower than the same loop over raw pointers. The arrays are the engine's own (made by
    ``wp.zeros`` or from numpy arrays, so contiguous). The arithmetic is the Warp
    expression it replaces, operation for operation and in the same order, so the results
    are the same to the last bit (tested against a pure-Warp copy of the kernel):
    d = (x_i - x_j) - shift; a pair beyond the cutoff adds exact zeros (branch-free: a branch
    on r < rc is mispredicted for about a third of the pairs of a liquid);
    F_ij = (24 r^-6 (2 r^-6 - 1) / r^2) d is added to f_i and subtracted from f_j;
    U_ij = 4 r^-6 (r^-6 - 1) - shift and the virial 24 r^-6 (2 r^-6 - 1) are booked on i.
    """
    real = {wp.float32: "float", wp.float64: "double"}[scalar]
    return f"""
    typedef {real} real;
    const real* X = reinterpret_cast<const real*>(xw.data);
    const real* S = reinterpret_cast<const real*>(image_shift.data)
        + (size_t)s * (size_t)image_shift.shape[1] * 3;
    const int* row = nbr.data + (size_t)i * (size_t)nbr.shape[1];
    real* F = reinterpret_cast<real*>(f.data);
    const real x0 = X[3 * i], x1 = X[3 * i + 1], x2 = X[3 * i + 2];
    real f0 = real(0.0), f1 = real(0.0), f2 = real(0.0);
    real e = real(0.0), w = real(0.0);
    for (int k = 0; k < count; ++k) {{
        const int entry = row[k];
        const int j = entry >> 5;
        const real* sh = S + 3 * (entry & 31);
        const real d0 = (x0 - X[3 * j]) - sh[0];
        const real d1 = (x1 - X[3 * j + 1]) - sh[1];
        const real d2 = (x2 - X[3 * j + 2]) - sh[2];
        const real r2 = d0 * d0 + d1 * d1 + d2 * d2;
        const real inside = r2 < rc2 ? real(1.0) : real(0.0);
        const real inv2 = real(1.0) / r2;
        const real inv6 = inv2 * inv2 * inv2 * inside;
        const real pair_virial = real(24.0) * inv6 * (real(2.0) * inv6 - real(1.0));
        const real g = pair_virial * inv2;
        const real g0 = g * d0, g1 = g * d1, g2 = g * d2;
        f0 = f0 + g0;
        f1 = f1 + g1;
        f2 = f2 + g2;
        F[3 * j] = F[3 * j] - g0;
        F[3 * j + 1] = F[3 * j + 1] - g1;
        F[3 * j + 2] = F[3 * j + 2] - g2;
        if (energy) {{
            e = (e + real(4.0) * inv6 * (inv6 - real(1.0))) - shift * inside;
            w = w + pair_virial;
        }}
    }}
    F[3 * i] = F[3 * i] + f0;
    F[3 * i + 1] = F[3 * i + 1] + f1;
    F[3 * i + 2] = F[3 * i + 2] + f2;
    if (energy) {{
        atom_energy.data[i] = e;
        atom_virial.data[i] = w;
    }}
"""


def _half_row_signature(vec3: type, scalar: type):
    """The Python signature Warp reads for the native half-list row function."""

    def half_row(
        xw: wp.array(dtype=vec3),
        image_shift: wp.array2d(dtype=vec3),
        nbr: wp.array2d(dtype=wp.int32),
        f: wp.array(dtype=vec3),
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=scalar),
        i: int,
        s: int,
        count: int,
        rc2: scalar,
        shift: scalar,
        energy: int,
    ): ...

    return half_row
