"""Every Warp module of labtwin's engines compiles for CUDA, on a machine without a GPU.

The CUDA paths (MD, neighbour lists, FIRE, EMT, the reactors' kinetics) run only where a
device is, which CI does not have. Warp's wheel ships NVRTC, so each module is compiled
ahead of time here to PTX for sm_90 (the H100/H200 class) with ``wp.compile_aot_module``:
a native snippet or a Warp construct that CUDA rejects fails here, not on the first GPU run.
The CPU-only branches of the native snippets (4-lane vector loops) are compiled out under
NVRTC; ``test_cuda_builds_take_the_scalar_loops`` checks the guard that selects them.
"""

from __future__ import annotations

import numpy as np
import pytest

wp = pytest.importorskip("warp")
wp.config.quiet = True
wp.init()

ARCH = 90


def _nvrtc_archs() -> set[int]:
    from warp._src.context import runtime

    return set(getattr(runtime, "nvrtc_supported_archs", None) or ())


pytestmark = pytest.mark.skipif(
    ARCH not in _nvrtc_archs(), reason=f"this Warp build has no NVRTC for sm_{ARCH}"
)


def _engine_modules() -> list[str]:
    """Build every kernel factory of the engines (both float types) and name their modules."""
    from labtwin.simulators.kinetics._kernels import make_kernel
    from labtwin.simulators.kinetics.network import _constants
    from labtwin.simulators.materials._emt_kernels import make_kernels as emt
    from labtwin.simulators.md._fire_kernels import make_fire_kernels as fire
    from labtwin.simulators.md._lj_kernels import make_kernels as lj
    from labtwin.simulators.neighbours._kernels import make_kernels as neighbours
    from labtwin.tasks.reactor import NETWORK

    names = []
    for scalar in (wp.float32, wp.float64):
        for factory in (lj, neighbours, fire, emt):
            kernels = vars(factory(scalar))
            names += {k.module.name for k in kernels.values() if isinstance(k, wp.Kernel)}
    names.append(make_kernel(*_constants(NETWORK)).dopri5.module.name)  # the reactor labs'
    return sorted(set(names))


def test_every_engine_module_compiles_for_cuda(tmp_path) -> None:
    names = _engine_modules()
    assert any("md_lj" in n for n in names) and any("kinetics" in n for n in names)
    for name in names:
        files = wp.compile_aot_module(name, arch=ARCH, module_dir=tmp_path, use_ptx=True)
        assert files and all(f.stat().st_size > 0 for f in files), name
    assert len(list(tmp_path.glob(f"*.sm{ARCH}.ptx"))) == len(names)


def test_cuda_builds_take_the_scalar_loops(tmp_path) -> None:
    """A snippet whose CUDA branch holds an ``#error`` fails to compile for CUDA and runs on
    the CPU: the guard the engines' snippets use picks the branch by compiler."""
    snippet = """
#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#error the CUDA branch
#else
    out[i] = 2 * i;
#endif
"""

    @wp.func_native(snippet)
    def twice(out: wp.array(dtype=wp.int32), i: int): ...

    @wp.kernel(enable_backward=False, module="labtwin_test_cuda_guard")
    def fill(out: wp.array(dtype=wp.int32)):
        i = wp.tid()
        twice(out, i)

    out = wp.zeros(4, dtype=wp.int32, device="cpu")
    wp.launch(fill, 4, [out], device="cpu")
    assert np.array_equal(out.numpy(), [0, 2, 4, 6])
    with pytest.raises(Exception, match="build failed"):
        wp.compile_aot_module("labtwin_test_cuda_guard", arch=ARCH, module_dir=tmp_path)
