"""Warp kernels for batched Lennard-Jones MD (reduced units), built once per float type.

Every kernel runs over all atoms (or all systems, or all cells) of the whole batch in one
launch. Systems are contiguous atom ranges ``sys_start[s]:sys_start[s+1]``.

The neighbour lists are built by :class:`labtwin.simulators.neighbours.NeighbourLists`
(packed entries ``(j << 5) | image code`` from home-box positions ``xw``, the image's shift
read from ``image_shift``); the force kernels here read them. Two layouts, chosen by device
in :class:`~labtwin.simulators.md.lj_warp.WarpLJ`:

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

#: entries of a neighbour row whose pair terms the CPU loop computes before it adds them up
#: (a multiple of 4; see :func:`_half_row_snippet`): 64 holds a whole row of a liquid at
#: rc = 2.5 sigma (36 entries on average) and did as well as 32 or 128 in paired timings
ROW_BLOCK = 64


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

    On the CPU a row goes in blocks of :data:`ROW_BLOCK` entries, in two passes: the pair
    terms of four entries at a time in 4-lane vectors (clang's vector extension; Warp's CPU
    code targets baseline x86-64, whose SSE2 divides four floats in about the time of one),
    then, one entry after another, the sums into f_i and the writes to f_j (which may repeat
    a j, so they stay scalar and in row order). Lanes compute what the scalar code computes,
    with the same operations in the same order and no fused multiply-adds on that target, so
    the results are the bits of the one-pass loop; pass-two sums keep its order. A block's
    last group fills its unused lanes with the row's last entry and discards them. Measured
    against the one-pass loop on float32 boxes (the kernel alone, paired launches): 1.16-1.48x
    at 256 atoms, 1.09-1.44x at 2,048, 1.03-1.16x at 64. NVRTC (the CUDA build of the module,
    where this kernel is never launched) compiles the one-pass loop.
    """
    real = {wp.float32: "float", wp.float64: "double"}[scalar]
    lane_int = {wp.float32: "int", wp.float64: "long long"}[scalar]
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
#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
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
#else
    typedef real lanes __attribute__((vector_size(4 * sizeof(real))));
    typedef {lane_int} lane_mask __attribute__((vector_size(4 * sizeof(real))));
    const int B = {ROW_BLOCK};
    const lanes one = {{real(1.0), real(1.0), real(1.0), real(1.0)}};
    const lanes rc2v = {{rc2, rc2, rc2, rc2}};
    const lanes shiftv = {{shift, shift, shift, shift}};
    const lanes x0v = {{x0, x0, x0, x0}}, x1v = {{x1, x1, x1, x1}}, x2v = {{x2, x2, x2, x2}};
    lanes G0[B / 4], G1[B / 4], G2[B / 4], PV[B / 4], U[B / 4], SH[B / 4];
    for (int k0 = 0; k0 < count; k0 += B) {{
        const int n = count - k0 < B ? count - k0 : B;
        for (int q = 0; q < n; q += 4) {{
            lanes a0, a1, a2, s0, s1, s2;
            for (int l = 0; l < 4; ++l) {{
                const int entry = row[k0 + q + l < count ? k0 + q + l : count - 1];
                const int j = entry >> 5;
                const real* sh = S + 3 * (entry & 31);
                a0[l] = X[3 * j];
                a1[l] = X[3 * j + 1];
                a2[l] = X[3 * j + 2];
                s0[l] = sh[0];
                s1[l] = sh[1];
                s2[l] = sh[2];
            }}
            const lanes d0 = (x0v - a0) - s0;
            const lanes d1 = (x1v - a1) - s1;
            const lanes d2 = (x2v - a2) - s2;
            const lanes r2 = d0 * d0 + d1 * d1 + d2 * d2;
            const lanes inside = (lanes)((lane_mask)one & (r2 < rc2v));
            const lanes inv2 = one / r2;
            const lanes inv6 = inv2 * inv2 * inv2 * inside;
            const lanes pair_virial = real(24.0) * inv6 * (real(2.0) * inv6 - real(1.0));
            const lanes g = pair_virial * inv2;
            G0[q / 4] = g * d0;
            G1[q / 4] = g * d1;
            G2[q / 4] = g * d2;
            if (energy) {{
                PV[q / 4] = pair_virial;
                U[q / 4] = real(4.0) * inv6 * (inv6 - real(1.0));
                SH[q / 4] = shiftv * inside;
            }}
        }}
        const real* g0 = reinterpret_cast<const real*>(G0);
        const real* g1 = reinterpret_cast<const real*>(G1);
        const real* g2 = reinterpret_cast<const real*>(G2);
        for (int q = 0; q < n; ++q) {{
            const int j = row[k0 + q] >> 5;
            f0 = f0 + g0[q];
            f1 = f1 + g1[q];
            f2 = f2 + g2[q];
            F[3 * j] = F[3 * j] - g0[q];
            F[3 * j + 1] = F[3 * j + 1] - g1[q];
            F[3 * j + 2] = F[3 * j + 2] - g2[q];
        }}
        if (energy) {{
            const real* pv = reinterpret_cast<const real*>(PV);
            const real* u = reinterpret_cast<const real*>(U);
            const real* sh = reinterpret_cast<const real*>(SH);
            for (int q = 0; q < n; ++q) {{
                e = (e + u[q]) - sh[q];
                w = w + pv[q];
            }}
        }}
    }}
#endif
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
