"""Warp kernels that build batched Verlet neighbour lists, built once per float type.

Systems are contiguous atom ranges ``sys_start[s]:sys_start[s+1]``; every kernel runs over all
atoms (or systems, or cells) of the batch in one launch and touches only the systems flagged
in ``rebuild``. :class:`~labtwin.simulators.neighbours.NeighbourLists` owns the arrays and
says which kernels run in which order; its module docstring explains the choices (search,
row layout, encoding).

- Skin tests: :func:`check_displacement` (atoms in a fixed box: rebuild when one moved more
  than half the skin) and :func:`check_deformation` (a cell that changes too: displacement
  and cell strain together).
- Home-box positions (``wrap_positions``) and cell lists (``clear_cells``, ``bin_atoms``,
  ``scan_cells``, ``sort_atoms_by_cell``).
- :func:`build`: the rows, by one of three searches per system (``SEARCH_*``), written in one
  of two encodings (packed ``(j << 5) | image code`` or ``j`` plus an integer image shift).

This module must not use ``from __future__ import annotations``: Warp reads the annotations.
"""

import functools
from types import SimpleNamespace

import warp as wp

#: per-system searches of :func:`build`: 5 x 5 x 5 cell stencil (orthorhombic, home-box
#: positions), all pairs at the nearest image (no periodic image or a box at least twice the
#: list radius), all pairs at every image within the list radius (small or triclinic cells)
SEARCH_CELLS, SEARCH_NEAREST, SEARCH_IMAGES = range(3)
#: bits of a packed entry below the neighbour index: the image code (nx+1)*9+(ny+1)*3+(nz+1)
IMAGE_BITS = 5


@functools.cache
def make_kernels(scalar: type) -> SimpleNamespace:
    """Kernels for ``scalar`` = ``wp.float32`` or ``wp.float64``, in one Warp module each."""
    vec3 = wp.types.vector(3, scalar)
    mat33 = wp.types.matrix((3, 3), scalar)
    module = f"labtwin_neighbours_{scalar.__name__}"

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

    @wp.kernel(enable_backward=False, module=module)
    def check_deformation(
        x: wp.array(dtype=vec3),
        sys_start: wp.array(dtype=wp.int32),
        active: wp.array(dtype=wp.int32),
        cell: wp.array(dtype=mat33),
        x_ref: wp.array(dtype=vec3),
        cell_ref: wp.array(dtype=mat33),
        cutoff: wp.array(dtype=scalar),
        list_radius: wp.array(dtype=scalar),
        rebuild: wp.array(dtype=wp.int32),
    ):
        # With cell = cell_ref M and y_i = x_i M^-1, a pair's separation is (d_ref + dy) M,
        # |dy| <= 2 max |y_i - x_ref_i| and |v M| >= (1 - |M - I|_F) |v|; so no pair left
        # out of lists built to the list radius can be inside the cutoff while
        # (1 - |M - I|_F) (list radius - 2 max |y - x_ref|) > cutoff.
        s = wp.tid()
        if active[s] == 0:
            return
        if rebuild[s] != 0:
            return
        m = wp.inverse(cell_ref[s]) * cell[s]
        m_inv = wp.inverse(m)
        strain = scalar(0.0)
        for a in range(3):
            for b in range(3):
                e = m[a, b]
                if a == b:
                    e = e - scalar(1.0)
                strain += e * e
        moved = scalar(0.0)
        for i in range(sys_start[s], sys_start[s + 1]):
            dy = x[i] * m_inv - x_ref[i]
            moved = wp.max(moved, wp.dot(dy, dy))
        margin = (scalar(1.0) - wp.sqrt(strain)) * (list_radius[s] - scalar(2.0) * wp.sqrt(moved))
        if not (margin > cutoff[s]):
            rebuild[s] = 1

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

    @wp.func
    def emit(
        nbr: wp.array2d(dtype=wp.int32),
        nbr_shift: wp.array2d(dtype=wp.vec3i),
        packed: int,
        i: int,
        slot: int,
        j: int,
        nx: int,
        ny: int,
        nz: int,
    ):
        # write the entry (j, image n) to row i's slot in the list's encoding
        if packed != 0:
            nbr[i, slot] = (j << 5) | image_code(nx, ny, nz)
        else:
            nbr[i, slot] = j
            nbr_shift[i, slot] = wp.vec3i(nx, ny, nz)

    nearest_row = wp.func_native(_nearest_row_snippet(scalar))(_nearest_row_signature(vec3, scalar))

    @wp.kernel(enable_backward=False, module=module)
    def build(
        xl: wp.array(dtype=vec3),
        x: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        sys_start: wp.array(dtype=wp.int32),
        search: wp.array(dtype=wp.int32),
        box: wp.array(dtype=vec3),
        cell: wp.array(dtype=mat33),
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
        packed: int,
        x_ref: wp.array(dtype=vec3),
        cell_ref: wp.array(dtype=mat33),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_shift: wp.array2d(dtype=wp.vec3i),
        nbr_count: wp.array(dtype=wp.int32),
        overflow: wp.array(dtype=wp.int32),
    ):
        # Row i lists every image j + n h (n integer, h the cell rows) with
        # |x_j + n h - x_i| < list radius, from the positions xl (home-box positions for the
        # packed encoding, whose images n are in {-1, 0, 1}^3). half = 1: j > i only (each
        # pair once); half = 0: every j, and i's own images, each packed row then sorted.
        # x_ref (and cell_ref) keep the positions (and cell) of the rebuild for the skin test.
        i = wp.tid()
        s = atom_sys[i]
        if rebuild[s] == 0:
            return
        x_ref[i] = x[i]
        if i == sys_start[s]:
            cell_ref[s] = cell[s]
        xi = xl[i]
        b = box[s]
        per = periodic[s]
        reach = list_radius[s]
        r2max = reach * reach
        # a row holds at most capacity - 1 entries; the last slot takes rejected candidates
        last = nbr.shape[1] - 1
        n = int(0)  # noqa: UP018 - Warp needs int() for a variable mutated in loops
        way = search[s]
        if way == SEARCH_NEAREST and packed != 0:
            # as below, in C++ (see _nearest_row_snippet)
            first = sys_start[s]
            if half != 0:
                first = i + 1
            n = nearest_row(xl, nbr, i, first, sys_start[s + 1], b, per, r2max)
        elif way == SEARCH_NEAREST:
            # all pairs of the system, at most one image of each within reach: the nearest
            # (home-box positions, so |d| < L per axis)
            first = sys_start[s]
            if half != 0:
                first = i + 1
            h = scalar(0.5) * b
            for j in range(first, sys_start[s + 1]):
                if j != i:
                    d = xi - xl[j]
                    nx = int(0)  # noqa: UP018
                    ny = int(0)  # noqa: UP018
                    nz = int(0)  # noqa: UP018
                    if per != 0:
                        nx = wp.where(d[0] > h[0], 1, wp.where(d[0] < -h[0], -1, 0))
                        ny = wp.where(d[1] > h[1], 1, wp.where(d[1] < -h[1], -1, 0))
                        nz = wp.where(d[2] > h[2], 1, wp.where(d[2] < -h[2], -1, 0))
                    e = d - vec3(scalar(nx) * b[0], scalar(ny) * b[1], scalar(nz) * b[2])
                    # branch-free: write the candidate, keep it if within reach
                    emit(nbr, nbr_shift, packed, i, wp.min(n, last), j, nx, ny, nz)
                    n += wp.where(wp.dot(e, e) < r2max, 1, 0)
        elif way == SEARCH_IMAGES:
            # every image of every j of the system: an image j + n h within r has fractional
            # separation g + n (g = (x_j - x_i) h^-1) of at most r |b_k| along axis k (b_k
            # the reciprocal columns: 1 / plane spacing), which bounds each n_k (one or two
            # values where the cell is wider than r); the candidates in that slab box are
            # tested. Separations are x_j - x_i + n h, as the shift-encoded force loops
            # compute them. Rows come out ordered by (j, n), n lexicographic.
            hm = cell[s]
            hinv = wp.inverse(hm)
            n_img = wp.vec3i(0, 0, 0)
            width = vec3(scalar(0.0), scalar(0.0), scalar(0.0))  # r |b_k|, with a margin
            for k in range(3):
                bk = wp.sqrt(
                    hinv[0, k] * hinv[0, k] + hinv[1, k] * hinv[1, k] + hinv[2, k] * hinv[2, k]
                )
                n_img[k] = int(wp.floor(reach * bk + scalar(0.5) + scalar(1e-6)))
                width[k] = reach * bk + scalar(1e-5)
            h2 = hm[2]
            first = sys_start[s]
            if half != 0:
                first = i + 1
            for j in range(first, sys_start[s + 1]):
                d0 = xl[j] - xi
                g = d0 * hinv  # fractional separation
                a_lo = int(wp.ceil(-g[0] - width[0]))
                a_hi = wp.min(int(wp.floor(width[0] - g[0])), a_lo + 2 * n_img[0] + 1)
                b_lo = int(wp.ceil(-g[1] - width[1]))
                b_hi = wp.min(int(wp.floor(width[1] - g[1])), b_lo + 2 * n_img[1] + 1)
                c_lo = int(wp.ceil(-g[2] - width[2]))
                c_hi = wp.min(int(wp.floor(width[2] - g[2])), c_lo + 2 * n_img[2] + 1)
                for a in range(a_lo, a_hi + 1):
                    for bb in range(b_lo, b_hi + 1):
                        pv = d0 + scalar(a) * hm[0] + scalar(bb) * hm[1]
                        for c in range(c_lo, c_hi + 1):
                            if j == i and a == 0 and bb == 0 and c == 0:
                                continue
                            d = pv + scalar(c) * h2
                            # a packed code holds images -1..1 only (home-box positions give
                            # no others; this keeps blown-up positions inside the table)
                            fits = packed == 0 or (
                                wp.abs(a) <= 1 and wp.abs(bb) <= 1 and wp.abs(c) <= 1
                            )
                            if fits and wp.dot(d, d) < r2max:
                                emit(nbr, nbr_shift, packed, i, wp.min(n, last), j, a, bb, c)
                                n += 1
        else:
            # cells at least half the list radius wide: the 5 x 5 x 5 cells around i's,
            # unfolded across the periodic boundary (each (cell, image) once), read as runs
            # of consecutive cells along z from the cell-ordered atoms. For a half list only
            # the upper half of them (offsets after (0, 0, 0) in lexicographic order) and the
            # atoms after i in its own cell (index order there), so each pair is found once.
            # Packed encoding only (the images are those of the home-box positions).
            nc = n_cells[s]
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
        if half == 0 and way == SEARCH_CELLS:
            # insertion sort of the row (deterministic summation order: cells fill in a racy
            # order on CUDA; the other searches write rows in (j, image) order)
            m_sort = wp.min(n, last)
            for a_sort in range(1, m_sort):
                key = nbr[i, a_sort]
                c_sort = a_sort - 1
                while c_sort >= 0:
                    if nbr[i, c_sort] > key:
                        nbr[i, c_sort + 1] = nbr[i, c_sort]
                        c_sort -= 1
                    else:
                        break
                nbr[i, c_sort + 1] = key
        if n >= last:
            wp.atomic_max(overflow, 0, n + 1)
            n = last
        nbr_count[i] = n

    return SimpleNamespace(**{k: v for k, v in locals().items() if isinstance(v, wp.Kernel)})


def _nearest_row_snippet(scalar: type) -> str:
    """C++ body of the all-pairs nearest-image search of :func:`make_kernels`' ``build`` for
    packed rows: the Warp branch it stands for (``SEARCH_NEAREST``, ``packed == 0`` still runs
    there), operation for operation, returning the row length before the overflow cut.

    For each j of ``first .. end - 1`` but i: d = x_i - x_j from home-box positions, the image
    n = +1 / -1 / 0 per axis where d is beyond +-L/2 (periodic systems), e = d - n L, and the
    candidate ``(j << 5) | code(n)`` written to the row's slot ``min(count, last)``, the count
    advanced where |e|^2 < reach^2 (branch-free; rejected candidates are overwritten or sit
    past the row's end). On the CPU four candidates' arithmetic goes in 4-lane vectors (as
    in the MD force loop: :func:`labtwin.simulators.md._lj_kernels._half_row_snippet`),
    then their writes one after another in j order, so rows are the same, entry for entry,
    as the one-candidate-at-a-time loop that NVRTC compiles for CUDA.
    """
    real = {wp.float32: "float", wp.float64: "double"}[scalar]
    lane_int = {wp.float32: "int", wp.float64: "long long"}[scalar]
    return f"""
    typedef {real} real;
    const real* X = reinterpret_cast<const real*>(xl.data);
    int* row = nbr.data + (size_t)i * (size_t)nbr.shape[1];
    const int last = nbr.shape[1] - 1;
    const real xi0 = X[3 * i], xi1 = X[3 * i + 1], xi2 = X[3 * i + 2];
    const real b0 = box[0], b1 = box[1], b2 = box[2];
    const real h0 = real(0.5) * b0, h1 = real(0.5) * b1, h2 = real(0.5) * b2;
    int n = 0;
#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
    for (int j = first; j < end; ++j) {{
        if (j == i) continue;
        const real d0 = xi0 - X[3 * j], d1 = xi1 - X[3 * j + 1], d2 = xi2 - X[3 * j + 2];
        int nx = 0, ny = 0, nz = 0;
        if (periodic != 0) {{
            nx = d0 > h0 ? 1 : (d0 < -h0 ? -1 : 0);
            ny = d1 > h1 ? 1 : (d1 < -h1 ? -1 : 0);
            nz = d2 > h2 ? 1 : (d2 < -h2 ? -1 : 0);
        }}
        const real e0 = d0 - real(nx) * b0, e1 = d1 - real(ny) * b1, e2 = d2 - real(nz) * b2;
        const int code = (nx + 1) * 9 + (ny + 1) * 3 + (nz + 1);
        row[n < last ? n : last] = (j << 5) | code;
        n += (e0 * e0 + e1 * e1 + e2 * e2) < r2max ? 1 : 0;
    }}
#else
    typedef real lanes __attribute__((vector_size(4 * sizeof(real))));
    typedef {lane_int} lane_int __attribute__((vector_size(4 * sizeof(real))));
    const lanes x0v = {{xi0, xi0, xi0, xi0}}, x1v = {{xi1, xi1, xi1, xi1}};
    const lanes x2v = {{xi2, xi2, xi2, xi2}};
    const lanes b0v = {{b0, b0, b0, b0}}, b1v = {{b1, b1, b1, b1}}, b2v = {{b2, b2, b2, b2}};
    const lanes h0v = {{h0, h0, h0, h0}}, h1v = {{h1, h1, h1, h1}}, h2v = {{h2, h2, h2, h2}};
    const lanes r2v = {{r2max, r2max, r2max, r2max}};
    const lane_int wrap = {{periodic != 0, periodic != 0, periodic != 0, periodic != 0}};
    for (int j0 = first; j0 < end; j0 += 4) {{
        lanes a0, a1, a2;
        for (int l = 0; l < 4; ++l) {{
            const int j = j0 + l < end ? j0 + l : end - 1;
            a0[l] = X[3 * j];
            a1[l] = X[3 * j + 1];
            a2[l] = X[3 * j + 2];
        }}
        const lanes d0 = x0v - a0, d1 = x1v - a1, d2 = x2v - a2;
        // the comparisons give -1 (true) or 0 per lane, so n = (d < -h) - (d > h)
        const lane_int nx = ((d0 < -h0v) - (d0 > h0v)) * wrap;
        const lane_int ny = ((d1 < -h1v) - (d1 > h1v)) * wrap;
        const lane_int nz = ((d2 < -h2v) - (d2 > h2v)) * wrap;
        const lanes e0 = d0 - __builtin_convertvector(nx, lanes) * b0v;
        const lanes e1 = d1 - __builtin_convertvector(ny, lanes) * b1v;
        const lanes e2 = d2 - __builtin_convertvector(nz, lanes) * b2v;
        const lane_int keep = -((e0 * e0 + e1 * e1 + e2 * e2) < r2v);
        const lane_int code = (nx + 1) * 9 + (ny + 1) * 3 + (nz + 1);
        const int lanes_used = end - j0 < 4 ? end - j0 : 4;
        for (int l = 0; l < lanes_used; ++l) {{
            const int j = j0 + l;
            if (j == i) continue;
            row[n < last ? n : last] = (j << 5) | (int)code[l];
            n += (int)keep[l];
        }}
    }}
#endif
    return n;
"""


def _nearest_row_signature(vec3: type, scalar: type):
    """The Python signature Warp reads for the native nearest-image row search."""

    def nearest_row(
        xl: wp.array(dtype=vec3),
        nbr: wp.array2d(dtype=wp.int32),
        i: int,
        first: int,
        end: int,
        box: vec3,
        periodic: int,
        r2max: scalar,
    ) -> int:
        return 0  # a body that returns is how Warp learns the snippet returns an int

    return nearest_row
