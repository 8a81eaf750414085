"""Warp kernel of the adaptive Dormand-Prince 5(4) integrator, one thread per reactor.

A kernel is generated per reaction network from its two arrays, the net stoichiometry
(R reactions by S species, products minus reactants) and the reactant index (R by M,
each reaction's reactant molecules as species indices, padded with S for a factor of
1): both are compile-time constants, the loops over them unrolled, so a rate is only
the products it needs and a species' derivative only its non-zero terms. (Read from
device arrays instead, the same kernel ran at 0.7 times the speed.) Warp compiles it
once per network and caches it on disk; float64 throughout.

Each thread integrates one reactor from 0 to its ``t_end`` through the sample times
``t_end * j / (n_samples - 1)``, landing on each exactly (the step before a sample is
shortened to end there, or stretched by up to 10 % to avoid a sliver of a step). Step
control is the standard one of Hairer, Norsett & Wanner (Solving ODEs I, section II.4;
scipy's RK45 uses the same): the error estimate's RMS over species, scaled by
``atol + rtol * max(|c|, |c_new|)``, accepts a step at or below 1, and the next step is
``h * clamp(0.9 err^(-1/5), 0.2, 5)`` (no growth right after a rejection). The first
step is Hairer's starting-step estimate. A thread reads nothing of another reactor and
uses no atomics, so a reactor's result does not depend on the batch, and a launch is
deterministic.

A reactor that needs more than ``max_steps`` steps, whose step underflows or whose
state stops being finite gets status 1 and NaN from that sample on.

This module must not use ``from __future__ import annotations``: Warp reads the annotations.
"""

import functools
import hashlib
from types import SimpleNamespace

import warp as wp

from labtwin.simulators.warp_runtime import init_warp

init_warp()  # no start-up banner or module-load lines (labtwin.simulators.warp_runtime)


def _f64(x: float):
    """A float64 constant of the kernels (full double precision in the generated code)."""
    return wp.constant(wp.float64(x))


# Dormand & Prince (1980) RK5(4)7M tableau; E = fifth- minus fourth-order weights (the
# error estimate), whose stage 7 is f at the new state (first same as last: FSAL)
A21 = _f64(1 / 5)
A31, A32 = _f64(3 / 40), _f64(9 / 40)
A41, A42, A43 = _f64(44 / 45), _f64(-56 / 15), _f64(32 / 9)
A51, A52, A53, A54 = _f64(19372 / 6561), _f64(-25360 / 2187), _f64(64448 / 6561), _f64(-212 / 729)
A61, A62, A63 = _f64(9017 / 3168), _f64(-355 / 33), _f64(46732 / 5247)
A64, A65 = _f64(49 / 176), _f64(-5103 / 18656)
B1, B3, B4 = _f64(35 / 384), _f64(500 / 1113), _f64(125 / 192)
B5, B6 = _f64(-2187 / 6784), _f64(11 / 84)
E1, E3, E4 = _f64(71 / 57600), _f64(-71 / 16695), _f64(71 / 1920)
E5, E6, E7 = _f64(-17253 / 339200), _f64(22 / 525), _f64(-1 / 40)


@functools.cache
def make_kernel(stoichiometry: tuple, reactants: tuple) -> SimpleNamespace:
    """The integrator for one network, in a Warp module of its own.

    ``stoichiometry`` is the net stoichiometric matrix as R rows of S floats and
    ``reactants`` each reaction's reactant molecules as R rows of species indices
    (padded with S); both are baked into the kernel as constants.
    """
    n_species, n_reactions = len(stoichiometry[0]), len(stoichiometry)
    n_slots = len(reactants[0])
    f64 = wp.float64
    vec = wp.types.vector(n_species, f64)
    rates_vec = wp.types.vector(n_reactions, f64)
    digest = hashlib.sha1(repr((stoichiometry, reactants)).encode()).hexdigest()[:12]
    module = f"labtwin_kinetics_dopri5_{digest}"

    @wp.func
    def derivative(c: vec, k: rates_vec) -> vec:
        dc = vec()
        for r in range(wp.static(n_reactions)):
            rate = k[r]
            for m in range(wp.static(n_slots)):
                if wp.static(reactants[r][m] < n_species):
                    rate = rate * c[wp.static(reactants[r][m])]
            for s in range(wp.static(n_species)):
                if wp.static(stoichiometry[r][s] != 0.0):
                    dc[s] = dc[s] + f64(wp.static(stoichiometry[r][s])) * rate
        return dc

    @wp.func
    def error_norm(err: vec, c: vec, c_new: vec, rtol: f64, atol: f64) -> f64:
        total = f64(0.0)
        for s in range(wp.static(n_species)):
            scale = atol + rtol * wp.max(wp.abs(c[s]), wp.abs(c_new[s]))
            e = err[s] / scale
            total = total + e * e
        return wp.sqrt(total / f64(wp.static(float(n_species))))

    @wp.func
    def store(samples: wp.array3d(dtype=f64), i: int, j: int, c: vec, t: f64):
        for s in range(wp.static(n_species)):
            samples[i, j, s] = c[s]
        samples[i, j, wp.static(n_species)] = t

    @wp.kernel(enable_backward=False, module=module)
    def dopri5(
        inputs: wp.array2d(dtype=f64),
        rtol: f64,
        atol: f64,
        max_steps: int,
        samples: wp.array3d(dtype=f64),
        counts: wp.array2d(dtype=wp.int32),
    ):
        i = wp.tid()
        n_samples = samples.shape[1]
        c = vec()
        for s in range(wp.static(n_species)):
            c[s] = inputs[i, s]
        kr = rates_vec()
        for r in range(wp.static(n_reactions)):
            kr[r] = inputs[i, wp.static(n_species) + r]
        end = inputs[i, wp.static(n_species + n_reactions)]
        store(samples, i, 0, c, f64(0.0))
        f = derivative(c, kr)

        # starting step (Hairer, Norsett & Wanner, II.4): h0 from |c| / |f|, then h1 from
        # a second-derivative estimate by an Euler step of h0, for an order-5 method
        d0 = f64(0.0)
        d1 = f64(0.0)
        for s in range(wp.static(n_species)):
            scale = atol + rtol * wp.abs(c[s])
            d0 = d0 + (c[s] / scale) * (c[s] / scale)
            d1 = d1 + (f[s] / scale) * (f[s] / scale)
        d0 = wp.sqrt(d0 / f64(wp.static(float(n_species))))
        d1 = wp.sqrt(d1 / f64(wp.static(float(n_species))))
        h = f64(1.0e-6)
        if d0 > f64(1.0e-5) and d1 > f64(1.0e-5):
            h = f64(0.01) * d0 / d1
        if end > f64(0.0):
            h = wp.min(h, end / f64(float(n_samples - 1)))
            f_euler = derivative(c + h * f, kr)
            d2 = error_norm(f_euler - f, c, c, rtol, atol) / h
            h1 = wp.max(f64(1.0e-6), f64(1.0e-3) * h)
            if wp.max(d1, d2) > f64(1.0e-15):
                h1 = wp.pow(f64(0.01) / wp.max(d1, d2), f64(0.2))
            h = wp.max(wp.min(f64(100.0) * h, h1), f64(1.0e-12) * end)

        t = f64(0.0)
        # Warp: a variable changed inside a dynamic loop is declared by constructor, not literal
        accepted = int(0)  # noqa: UP018
        rejected = int(0)  # noqa: UP018
        failed = int(0)  # noqa: UP018
        for j in range(1, n_samples):
            target = end * (f64(float(j)) / f64(float(n_samples - 1)))
            if j == n_samples - 1:
                target = end
            just_rejected = int(0)  # noqa: UP018
            while t < target and failed == 0:
                step = h
                landing = int(0)  # noqa: UP018
                if t + f64(1.1) * step >= target:
                    step = target - t
                    landing = 1
                k2 = derivative(c + step * (A21 * f), kr)
                k3 = derivative(c + step * (A31 * f + A32 * k2), kr)
                k4 = derivative(c + step * (A41 * f + A42 * k2 + A43 * k3), kr)
                k5 = derivative(c + step * (A51 * f + A52 * k2 + A53 * k3 + A54 * k4), kr)
                k6 = derivative(
                    c + step * (A61 * f + A62 * k2 + A63 * k3 + A64 * k4 + A65 * k5),
                    kr,
                )
                c_new = c + step * (B1 * f + B3 * k3 + B4 * k4 + B5 * k5 + B6 * k6)
                k7 = derivative(c_new, kr)
                err_vec = step * (E1 * f + E3 * k3 + E4 * k4 + E5 * k5 + E6 * k6 + E7 * k7)
                err = error_norm(err_vec, c, c_new, rtol, atol)
                if err <= f64(1.0):  # false for NaN: a non-finite step is never accepted
                    if landing == 1:
                        t = target
                    else:
                        t = t + step
                    c = c_new
                    f = k7
                    accepted += 1
                    factor = f64(5.0)
                    if err > f64(0.0):
                        factor = wp.min(f64(5.0), f64(0.9) * wp.pow(err, f64(-0.2)))
                    if just_rejected == 1:
                        factor = wp.min(factor, f64(1.0))
                    factor = wp.max(factor, f64(0.2))
                    if landing == 1:  # a step shortened to land on a sample keeps the free h
                        h = wp.max(step * factor, h)
                    else:
                        h = step * factor
                    just_rejected = 0
                else:
                    rejected += 1
                    factor = f64(0.2)
                    if err == err:  # finite error: the usual shrink; NaN: shrink by 5
                        factor = wp.max(f64(0.2), f64(0.9) * wp.pow(err, f64(-0.2)))
                    h = step * factor
                    just_rejected = 1
                if accepted + rejected >= max_steps or h <= f64(1.0e-14) * end:
                    if t < target:
                        failed = 1
            if failed == 1:
                c = c * f64(wp.nan)
            store(samples, i, j, c, target)
        counts[i, 0] = accepted
        counts[i, 1] = rejected
        counts[i, 2] = failed

    return SimpleNamespace(dopri5=dopri5, vec=vec)


def dopri5(
    stoichiometry: tuple, reactants: tuple, device: str, arrays: tuple, settings: tuple
) -> None:
    """Launch the integrator of one network over all reactors on Warp ``device``.

    ``stoichiometry`` and ``reactants`` as for :func:`make_kernel`. ``arrays`` are three
    contiguous torch tensors on the device (three arrays, not eight: each costs Warp
    tens of microseconds to wrap): the kernel reads ``inputs`` (N, S + R + 1) float64,
    each reactor's c0, k and t_end side by side, and fills ``samples`` (N, n_samples,
    S + 1) float64, the concentrations and then the time of each sample, and ``counts``
    (N, 3) int32: accepted steps, rejected steps, status. ``settings`` are rtol, atol and
    max_steps. On CUDA the launch runs on torch's current stream (no copy, no sync).
    """
    kernels = make_kernel(stoichiometry, reactants)
    inputs, samples, counts = arrays
    rtol, atol, max_steps = settings
    stream = wp.stream_from_torch(inputs.device) if inputs.device.type == "cuda" else None
    args = [
        wp.from_torch(inputs),
        wp.float64(rtol),
        wp.float64(atol),
        int(max_steps),
        wp.from_torch(samples),
        wp.from_torch(counts),
    ]
    wp.launch(kernels.dopri5, dim=inputs.shape[0], inputs=args, device=device, stream=stream)
