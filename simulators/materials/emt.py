"""The EMT calculator: asap3's compiled EMT where installed, else ASE's own.

Both are Effective Medium Theory with the parameters of Jacobsen, Stoltze and Nørskov,
Surf. Sci. 366, 394 (1996), for Al, Cu, Ag, Au, Ni, Pd and Pt. ASE's EMT is asked for asap's
cutoff (``asap_cutoff=True``: the cutoff set by the elements present, not by every element ASE
has parameters for), and then the two agree on energies, forces and stresses to round-off
(1e-7 eV/atom, 1e-6 eV/Å on a distorted Cu-Au-Ni-Al cell; ``tests/materials``). asap3 is
about 30 times faster on a 108-atom cell.
"""

from __future__ import annotations

from typing import Any, Literal

#: ``"warp"`` is the batched engine of :mod:`~labtwin.simulators.materials.emt_warp` (asap's
#: cutoff there too): it has no ASE calculator; the functions that take a backend batch
#: their cells through it instead
Backend = Literal["asap3", "ase", "warp"]

#: elements with EMT parameters from the 1996 paper
EMT_ELEMENTS: tuple[str, ...] = ("Al", "Cu", "Ag", "Au", "Ni", "Pd", "Pt")


def emt_backend(preferred: str = "auto") -> Backend:
    """``"asap3"`` when asap3 imports (and ``preferred`` is ``"auto"`` or ``"asap3"``), else
    ``"ase"``; ``"warp"`` or ``"ase"`` when asked for."""
    if preferred in ("ase", "warp"):
        return preferred  # type: ignore[return-value]
    if preferred not in ("auto", "asap3"):
        raise ValueError(f"unknown EMT backend {preferred!r}; 'auto', 'asap3', 'ase' or 'warp'")
    try:
        import asap3  # noqa: F401
    except ImportError:
        if preferred == "asap3":
            raise
        return "ase"
    return "asap3"


def make_calculator(backend: Backend) -> Any:
    """A fresh EMT calculator of ``backend`` (one per structure: they cache neighbour lists)."""
    if backend == "asap3":
        from asap3 import EMT

        return EMT()
    if backend == "ase":
        from ase.calculators.emt import EMT

        return EMT(asap_cutoff=True)
    if backend == "warp":
        raise ValueError("the warp EMT engine is batched and has no ASE calculator (emt_warp)")
    raise ValueError(f"unknown EMT backend {backend!r}")


def backend_version(backend: Backend) -> dict[str, str]:
    import ase

    out = {"ase": ase.__version__}
    if backend == "warp":
        from importlib.metadata import version

        out["warp-lang"] = version("warp-lang")
    if backend == "asap3":
        import asap3

        out["asap3"] = asap3.__version__
    return out
