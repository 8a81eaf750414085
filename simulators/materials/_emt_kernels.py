"""Warp kernels for batched EMT (Effective Medium Theory), built once per float type.

Functional form of Jacobsen, Stoltze and Nørskov, Surf. Sci. 366, 394 (1996), written as in
ASE's ``ase.calculators.emt`` (which the tests compare with). For atom i with neighbours j at
distance r (pairs with r < ``rc_list``; w(r) = 1 / (1 + exp(acut (r - rc))) the smooth cutoff):

    sigma1_i = sum_j chi_ij w exp(-eta2_j (r - beta s0_j)),      chi_ij = n0_j / n0_i
    s_i      = -log(sigma1_i / (12 gamma1_i)) / (beta eta2_i)    (neutral-sphere radius offset)
    E_i      = E0_i (1 + lambda_i s_i) exp(-lambda_i s_i) + 6 V0_i exp(-kappa_i s_i)
               + 1/2 sum_j [c_i chi_ij w exp(-kappa_j (r / beta - s0_j))
                            + c_j / chi_ij w exp(-kappa_i (r / beta - s0_i))] - E0_i,

with c = -V0 / (2 gamma2). Forces need dE/dsigma1 of both atoms of a pair, so a first pass
(``density``) computes it per atom and a second (``forces``) the forces and the per-atom
virial 1/2 sum_j (dE/dr / r) d d^T (d = x_j - x_i).

Neighbour lists are the shared ones (:class:`labtwin.simulators.neighbours.NeighbourLists`,
full rows in its shift encoding): each entry is a neighbour j and the integer image n of it,
found by visiting every periodic image within the list radius (cells smaller than twice the
cutoff see several images of one atom, and of themselves); the separation is x_j - x_i + n h
from the never-wrapped positions. Each thread writes only its own atom, and rows come out in
a fixed order (neighbour index, then image), so results do not depend on the batch, the skin
or when lists were rebuilt. Per-system sums are taken in float64 by one thread per system.
Cells marked inactive (``active[s] == 0``: converged cells of a relaxation) are skipped and
keep their last results.

The relaxation kernels map generalised coordinates (per system: its atoms' positions in the
reference frame of the cell, then three rows of ``cell_factor`` times the deformation D, with
cell = cell0 D and x = x_ref D in row-vector convention, as ASE's ``UnitCellFilter``) to
positions and cell, and forces and virial back to generalised forces; FIRE itself is the MD
engine's (:mod:`labtwin.simulators.md._fire_kernels`).

This module must not use ``from __future__ import annotations``: Warp reads the annotations.
"""

import functools
from types import SimpleNamespace

import warp as wp

#: columns of the per-atom parameter table (``par``)
P_E0, P_S0, P_V0, P_ETA2, P_KAPPA, P_LAMBDA, P_N0, P_INV12GAMMA1, P_NEGHALFV0OVERGAMMA2 = range(9)
N_PAR = 9
#: columns of the per-system cutoff table (``cut``): midpoint rc, slope acut, list radius (Å);
#: pairs beyond the list radius contribute nothing (the neighbour rows add a skin to it)
C_RC, C_ACUT, C_RLIST = range(3)
#: beta = (16 pi / 3)^(1/3) / sqrt(2), with ASE's historical rounding
BETA = 1.809


@functools.cache
def make_kernels(scalar: type) -> SimpleNamespace:
    """Kernels for ``scalar`` = ``wp.float32`` or ``wp.float64``, in one Warp module each."""
    vec3 = wp.types.vector(3, scalar)
    mat33 = wp.types.matrix((3, 3), scalar)
    module = f"labtwin_materials_emt_{scalar.__name__}"
    beta = scalar(BETA)

    @wp.func
    def separation(x: wp.array(dtype=vec3), i: int, j: int, shift: wp.vec3i, h: mat33) -> vec3:
        return (
            x[j]
            - x[i]
            + (scalar(shift[0]) * h[0] + scalar(shift[1]) * h[1] + scalar(shift[2]) * h[2])
        )

    @wp.kernel(enable_backward=False, module=module)
    def density(
        x: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        active: wp.array(dtype=wp.int32),
        cell: wp.array(dtype=mat33),
        cut: wp.array2d(dtype=scalar),
        par: wp.array2d(dtype=scalar),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_shift: wp.array2d(dtype=wp.vec3i),
        nbr_count: wp.array(dtype=wp.int32),
        atom_energy: wp.array(dtype=scalar),
        deds: wp.array(dtype=scalar),
        pair_self: wp.array2d(dtype=scalar),
        pair_other: wp.array2d(dtype=scalar),
        pair_direct: wp.array2d(dtype=scalar),
    ):
        # sigma1, the cohesive and atomic-sphere energies of atom i and dE_i/dsigma1_i; for
        # each pair within rc_list, the pieces of dE/dr / r that ``forces`` combines with
        # dE/dsigma1 of both atoms: d sigma1_i/dr / r, d sigma1_j/dr / r and the pair term's
        i = wp.tid()
        s = atom_sys[i]
        if active[s] == 0:
            return
        h = cell[s]
        rc = cut[s, C_RC]
        acut = cut[s, C_ACUT]
        r2max = cut[s, C_RLIST] * cut[s, C_RLIST]
        e0 = par[i, P_E0]
        n0 = par[i, P_N0]
        s0 = par[i, P_S0]
        eta2 = par[i, P_ETA2]
        kappa = par[i, P_KAPPA]
        half_c = par[i, P_NEGHALFV0OVERGAMMA2]
        sigma1 = scalar(0.0)
        pair = scalar(0.0)
        found = int(0)  # noqa: UP018 - Warp needs int() for a variable mutated in loops
        for k in range(nbr_count[i]):
            j = nbr[i, k]
            d = separation(x, i, j, nbr_shift[i, k], h)
            r2 = wp.dot(d, d)
            if r2 >= r2max:
                continue
            found += 1
            r = wp.sqrt(r2)
            w = scalar(1.0) / (scalar(1.0) + wp.exp(acut * (r - rc)))
            dwdr_w = acut * (w - scalar(1.0))
            chi = par[j, P_N0] / n0
            eta2_j = par[j, P_ETA2]
            kappa_j = par[j, P_KAPPA]
            s0_j = par[j, P_S0]
            dsig1s = wp.exp(-eta2_j * (r - beta * s0_j)) * chi * w
            dsig1o = wp.exp(-eta2 * (r - beta * s0)) / chi * w
            es = half_c * wp.exp(-kappa_j * (r / beta - s0_j)) * chi * w
            eo = par[j, P_NEGHALFV0OVERGAMMA2] * wp.exp(-kappa * (r / beta - s0)) / chi * w
            sigma1 += dsig1s
            pair += es + eo
            pair_self[i, k] = dsig1s * (dwdr_w - eta2_j) / r
            pair_other[i, k] = dsig1o * (dwdr_w - eta2) / r
            pair_direct[i, k] = (es * (dwdr_w - kappa_j / beta) + eo * (dwdr_w - kappa / beta)) / r
        if found == 0:
            # an isolated atom: no density, cohesive energy 0 (E = -E0), as ASE
            atom_energy[i] = -e0
            deds[i] = scalar(0.0)
            return
        lam = par[i, P_LAMBDA]
        ds = -wp.log(sigma1 * par[i, P_INV12GAMMA1]) / (beta * eta2)
        lds = lam * ds
        exp_lds = wp.exp(-lds)
        six_v0 = scalar(6.0) * par[i, P_V0] * wp.exp(-kappa * ds)
        e = e0 * (scalar(1.0) + lds) * exp_lds + six_v0 + scalar(0.5) * pair
        atom_energy[i] = e - e0
        de = -e0 * lam * lds * exp_lds - kappa * six_v0
        deds[i] = de / (-beta * eta2 * sigma1)  # dE/dsigma1 (ds/dsigma1 folded in)

    @wp.kernel(enable_backward=False, module=module)
    def forces(
        x: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        active: wp.array(dtype=wp.int32),
        cell: wp.array(dtype=mat33),
        cut: wp.array2d(dtype=scalar),
        nbr: wp.array2d(dtype=wp.int32),
        nbr_shift: wp.array2d(dtype=wp.vec3i),
        nbr_count: wp.array(dtype=wp.int32),
        deds: wp.array(dtype=scalar),
        pair_self: wp.array2d(dtype=scalar),
        pair_other: wp.array2d(dtype=scalar),
        pair_direct: wp.array2d(dtype=scalar),
        f: wp.array(dtype=vec3),
        atom_virial: wp.array(dtype=mat33),
    ):
        # F_i = sum_j (dE/dr / r) d over both atoms' density terms and the pair term; the
        # virial row keeps half of each pair's d (dE/dr / r) d^T (the other half is j's)
        i = wp.tid()
        s = atom_sys[i]
        if active[s] == 0:
            return
        h = cell[s]
        r2max = cut[s, C_RLIST] * cut[s, C_RLIST]
        dedsi = deds[i]
        fi = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        vir = mat33()
        for k in range(nbr_count[i]):
            j = nbr[i, k]
            d = separation(x, i, j, nbr_shift[i, k], h)
            if wp.dot(d, d) >= r2max:
                continue
            g = dedsi * pair_self[i, k] + deds[j] * pair_other[i, k] + pair_direct[i, k]
            fi = fi + g * d
            vir = vir + (scalar(0.5) * g) * wp.outer(d, d)
        f[i] = fi
        atom_virial[i] = vir

    @wp.kernel(enable_backward=False, module=module)
    def system_sums(
        atom_energy: wp.array(dtype=scalar),
        atom_virial: wp.array(dtype=mat33),
        sys_start: wp.array(dtype=wp.int32),
        active: wp.array(dtype=wp.int32),
        energy: wp.array(dtype=wp.float64),
        virial: wp.array(dtype=wp.mat33d),
    ):
        # one thread per system, atoms in order (deterministic), in float64;
        # virial = V * stress (ASE's sign: positive under tension)
        s = wp.tid()
        if active[s] == 0:
            return
        e = wp.float64(0.0)
        w = wp.mat33d()
        for i in range(sys_start[s], sys_start[s + 1]):
            e += wp.float64(atom_energy[i])
            v = atom_virial[i]
            for a in range(3):
                for b in range(3):
                    w[a, b] = w[a, b] + wp.float64(v[a, b])
        energy[s] = e
        virial[s] = w

    # ------------------------------------------------------------ relaxation (cell filter)
    @wp.kernel(enable_backward=False, module=module)
    def set_cell(
        xg: wp.array(dtype=vec3),
        sys_start: wp.array(dtype=wp.int32),
        cell_factor: wp.array(dtype=scalar),
        cell0: wp.array(dtype=mat33),
        deform: wp.array(dtype=mat33),
        cell: wp.array(dtype=mat33),
    ):
        # D from the system's three generalised cell rows (after its atoms); cell = cell0 D
        s = wp.tid()
        row = sys_start[s + 1] + 3 * s
        inv = scalar(1.0) / cell_factor[s]
        dm = mat33()
        for k in range(3):
            for c in range(3):
                dm[k, c] = xg[row + k][c] * inv
        deform[s] = dm
        cell[s] = cell0[s] * dm

    @wp.kernel(enable_backward=False, module=module)
    def set_positions(
        xg: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        deform: wp.array(dtype=mat33),
        x: wp.array(dtype=vec3),
    ):
        i = wp.tid()
        s = atom_sys[i]
        x[i] = xg[i + 3 * s] * deform[s]

    @wp.kernel(enable_backward=False, module=module)
    def project_forces(
        f: wp.array(dtype=vec3),
        atom_sys: wp.array(dtype=wp.int32),
        deform: wp.array(dtype=mat33),
        free: wp.array(dtype=scalar),
        fg: wp.array(dtype=vec3),
    ):
        # dE/dx_ref = dE/dx D^T, zero on fixed atoms (free = 0), so FIRE never moves them
        i = wp.tid()
        s = atom_sys[i]
        fg[i + 3 * s] = free[i] * (deform[s] * f[i])

    @wp.kernel(enable_backward=False, module=module)
    def project_cell(
        virial: wp.array(dtype=wp.mat33d),
        sys_start: wp.array(dtype=wp.int32),
        deform: wp.array(dtype=mat33),
        cell_factor: wp.array(dtype=scalar),
        relax_cell: wp.array(dtype=wp.int32),
        fg: wp.array(dtype=vec3),
    ):
        # -dE/dD / cell_factor = -D^{-T} (V stress) / cell_factor; zero for a fixed cell
        s = wp.tid()
        row = sys_start[s + 1] + 3 * s
        w = mat33()
        for a in range(3):
            for b in range(3):
                w[a, b] = scalar(virial[s][a, b])
        g = wp.inverse(wp.transpose(deform[s])) * w
        scale = -scalar(relax_cell[s]) / cell_factor[s]
        for k in range(3):
            fg[row + k] = scale * vec3(g[k, 0], g[k, 1], g[k, 2])

    return SimpleNamespace(**{k: v for k, v in locals().items() if isinstance(v, wp.Kernel)})
