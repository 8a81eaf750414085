"""FIRE minimisation kernels for batched systems, built once per float type.

Shared by the Lennard-Jones quench (:func:`labtwin.simulators.md.lj_warp.quench_lj`) and the
EMT relaxation (:mod:`labtwin.simulators.materials.emt_warp`). The degrees of freedom are
vec3 rows (atom positions, and for a cell relaxation three cell rows per system); a system is
a contiguous range ``sys_start[s]:sys_start[s+1]`` of rows, ``atom_sys`` the system of each
row. ``fire_system`` (one thread per system) decides the velocity mixing and time step from
the power F.v, ``fire_atom`` (one thread per row) mixes and takes the step.

This module must not use ``from __future__ import annotations``: Warp reads the annotations.
"""

import functools
from types import SimpleNamespace

import warp as wp


@functools.cache
def make_fire_kernels(scalar: type) -> SimpleNamespace:
    """FIRE kernels for ``scalar`` = ``wp.float32`` or ``wp.float64``, in one Warp module each."""
    vec3 = wp.types.vector(3, scalar)
    module = f"labtwin_fire_{scalar.__name__}"

    @wp.kernel(enable_backward=False, module=module)
    def fire_system(
        v: wp.array(dtype=vec3),
        f: wp.array(dtype=vec3),
        sys_start: wp.array(dtype=wp.int32),
        dt_max: scalar,
        dt_sys: wp.array(dtype=scalar),
        alpha: wp.array(dtype=scalar),
        n_positive: wp.array(dtype=wp.int32),
        mix_v: wp.array(dtype=scalar),
        mix_f: wp.array(dtype=scalar),
        fmax: wp.array(dtype=scalar),
    ):
        # FIRE (Bitzek et al., PRL 97, 170201 (2006)): per-system power P = F.v decides whether
        # to steer v along F and lengthen the step, or to stop and shorten it.
        s = wp.tid()
        power = scalar(0.0)
        v2 = scalar(0.0)
        f2 = scalar(0.0)
        fm = scalar(0.0)
        for i in range(sys_start[s], sys_start[s + 1]):
            power += wp.dot(f[i], v[i])
            v2 += wp.dot(v[i], v[i])
            fi2 = wp.dot(f[i], f[i])
            f2 += fi2
            fm = wp.max(fm, fi2)
        fmax[s] = wp.sqrt(fm)
        a = alpha[s]
        if power > scalar(0.0):
            mix_v[s] = scalar(1.0) - a
            mix_f[s] = a * wp.sqrt(v2 / wp.max(f2, scalar(1e-30)))
            n_positive[s] = n_positive[s] + 1
            if n_positive[s] > 5:
                dt_sys[s] = wp.min(dt_sys[s] * scalar(1.1), dt_max)
                alpha[s] = a * scalar(0.99)
        else:
            mix_v[s] = scalar(0.0)
            mix_f[s] = scalar(0.0)
            n_positive[s] = 0
            dt_sys[s] = dt_sys[s] * scalar(0.5)
            alpha[s] = scalar(0.1)

    @wp.kernel(enable_backward=False, module=module)
    def fire_atom(
        x: wp.array(dtype=vec3),
        v: wp.array(dtype=vec3),
        f: wp.array(dtype=vec3),
        mass: wp.array(dtype=scalar),
        atom_sys: wp.array(dtype=wp.int32),
        dt_sys: wp.array(dtype=scalar),
        mix_v: wp.array(dtype=scalar),
        mix_f: wp.array(dtype=scalar),
        max_step: scalar,
    ):
        # mix velocities, then a semi-implicit Euler step with the displacement capped
        i = wp.tid()
        s = atom_sys[i]
        h = dt_sys[s]
        vi = mix_v[s] * v[i] + mix_f[s] * f[i]
        vi = vi + (h / mass[i]) * f[i]
        dx = h * vi
        length = wp.length(dx)
        if length > max_step:
            dx = dx * (max_step / length)
        x[i] = x[i] + dx
        v[i] = vi

    return SimpleNamespace(fire_system=fire_system, fire_atom=fire_atom)
