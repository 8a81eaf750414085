"""Surface energies of the fcc EMT metals: low-index slabs, many in one batched relaxation.

A slab is built with pymatgen's ``SlabGenerator`` from the conventional fcc cell at the
metal's zero-pressure lattice constant (:func:`~labtwin.simulators.materials.vacancy.bulk_reference`):
the (100), (110) or (111) facet, the 1x1 surface cell (one atom per layer), exactly
``layers`` atomic planes (pymatgen stacks whole oriented unit cells; the planes above
``layers`` are removed), and a vacuum gap along c, perpendicular to the surface. The cell is
periodic in-plane and the slab is isolated across the gap: the gap is at least twice the
EMT pair-list radius (:data:`VACUUM_OVER_CUTOFF`), so no pair spans it. An elemental fcc
slab of any number of planes has both faces equivalent (an inversion centre at its middle
plane or between its two middle planes: :func:`faces_equivalent` checks it with pymatgen's
``SpacegroupAnalyzer``).

The surface energy of the relaxed slab (positions relaxed by batched FIRE,
:func:`~labtwin.simulators.materials.emt_warp.relax_emt`, the cell fixed at the bulk
in-plane lattice) is

    gamma = (E_slab - N e_bulk) / (2 A)

with N the atoms, A the area of the surface cell and e_bulk the energy per atom of the
perfect crystal; in eV/Å^2 and J/m^2 (1 eV/Å^2 = 16.0218 J/m^2). Every protocol of a call
relaxes in one batch (per-slab tolerances and step limits, float64, asap's cutoff
convention unless a caller asks for ASE's), and a slab's result does not depend on its
batch. A protocol may free only the outer ``relax_layers`` planes of each face and hold the
planes between at their bulk positions (the usual slab protocol), and may accept gaps below
twice the list radius (``min_vacuum_A``), across which the slab feels its periodic image.
:func:`thickness_series` measures gamma against the number of layers in one batch
and reports the differences between successive thicknesses, so convergence in thickness
can be judged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from labtwin.simulators.materials.emt import EMT_ELEMENTS
from labtwin.simulators.materials.emt_warp import Cutoff, cutoff_parameters, emt_evaluate, relax_emt
from labtwin.simulators.materials.structure import Structure
from labtwin.simulators.materials.vacancy import bulk_reference

#: the facet families offered, by the sorted absolute Miller indices of a member
FACETS: tuple[tuple[int, int, int], ...] = ((1, 0, 0), (1, 1, 0), (1, 1, 1))
#: a slab needs an interior plane between its two faces
MIN_LAYERS = 3
MAX_LAYERS = 60
#: the vacuum gap is at least this many times the EMT pair-list radius (5.0-5.9 Å)
VACUUM_OVER_CUTOFF = 2.0
#: default vacuum gap, Å (over twice the list radius of either convention, 11.8 Å at most)
DEFAULT_VACUUM_A = 14.0
#: atoms whose heights differ by less than this (Å) lie in one plane (the closest planes of
#: these facets are a / (2 sqrt 2) >= 1.24 Å apart)
LAYER_TOLERANCE_A = 0.2
#: 1 eV/Å^2 in J/m^2
EV_PER_A2_IN_J_M2 = 16.02176634


def facet_miller(miller: Sequence[int]) -> tuple[int, int, int]:
    """``miller`` as a tuple of three integers without a common factor; ``ValueError`` if it
    is not three integers, is (0, 0, 0) or belongs to none of the :data:`FACETS` families."""
    try:
        values = [int(m) for m in miller]
        exact = all(float(m) == v for m, v in zip(miller, values, strict=True))
    except (TypeError, ValueError):
        raise ValueError(f"a Miller index is three integers, not {miller!r}") from None
    if len(values) != 3 or not exact:
        raise ValueError(f"a Miller index is three integers, not {miller!r}")
    if not any(values):
        raise ValueError("the Miller index (0, 0, 0) names no plane")
    divisor = math.gcd(*values)
    reduced = tuple(v // divisor for v in values)
    family = tuple(sorted((abs(v) for v in reduced), reverse=True))
    if family not in FACETS:
        names = ", ".join("(" + "".join(map(str, f)) + ")" for f in FACETS)
        raise ValueError(
            f"Miller index {tuple(values)} is not a low-index facet; offered: the {names} families"
        )
    return reduced  # type: ignore[return-value]


@dataclass(frozen=True)
class Slab:
    """A slab and its geometry.

    ``structure`` is periodic along all three cell vectors: a and b span the surface (the
    bulk in-plane lattice), c is perpendicular to it and holds the slab and the vacuum gap.
    ``layer`` (n,) is each atom's plane, 0 at the bottom; ``area_A2`` is |a x b|;
    ``thickness_A`` the distance between the outermost planes; ``vacuum_A`` the gap between
    the top plane and the periodic image of the bottom one.
    """

    element: str
    miller: tuple[int, int, int]
    structure: Structure
    layer: np.ndarray
    area_A2: float
    thickness_A: float
    vacuum_A: float

    @property
    def n_layers(self) -> int:
        return int(self.layer.max()) + 1

    @property
    def n_atoms(self) -> int:
        return len(self.structure)


def assign_layers(heights: np.ndarray, tolerance: float = LAYER_TOLERANCE_A) -> np.ndarray:
    """Each height's plane index (0 for the lowest plane), planes being groups of heights
    whose successive gaps are below ``tolerance`` (Å)."""
    order = np.argsort(heights)
    gaps = np.diff(heights[order]) > tolerance
    index = np.empty(len(heights), dtype=np.int64)
    index[order] = np.concatenate([[0], np.cumsum(gaps)])
    return index


def build_slab(
    element: str,
    miller: Sequence[int],
    layers: int,
    vacuum_A: float = DEFAULT_VACUUM_A,
    cutoff: Cutoff = "asap",
    min_vacuum_A: float | None = None,
) -> Slab:
    """The ``layers``-plane slab of ``element``'s ``miller`` facet with a ``vacuum_A`` gap
    (module doc); ``ValueError`` with the reason for an element without EMT parameters, a
    Miller index outside the offered facets, too few or too many layers, or a gap too
    small to isolate the slab from its images (below ``min_vacuum_A``, by default
    :data:`VACUUM_OVER_CUTOFF` times the pair-list radius; a caller that studies the gap
    itself may allow thinner ones, across which the slab feels its periodic image)."""
    from pymatgen.core import Lattice as PmgLattice
    from pymatgen.core import Structure as PmgStructure
    from pymatgen.core.surface import SlabGenerator

    if element not in EMT_ELEMENTS:
        raise ValueError(f"no EMT parameters for {element!r}; one of {', '.join(EMT_ELEMENTS)}")
    hkl = facet_miller(miller)
    if isinstance(layers, bool) or int(layers) != layers:
        raise ValueError(f"layers must be an integer, not {layers!r}")
    layers = int(layers)
    if not MIN_LAYERS <= layers <= MAX_LAYERS:
        raise ValueError(
            f"{layers} layers: a slab needs {MIN_LAYERS} to {MAX_LAYERS} atomic planes "
            f"(at least one interior plane between its two faces)"
        )
    rc_list = cutoff_parameters([element], cutoff)[2]
    if min_vacuum_A is None:
        min_vacuum = VACUUM_OVER_CUTOFF * rc_list
        why = f"{VACUUM_OVER_CUTOFF:g} times EMT's pair-list radius ({min_vacuum:.2f} Å)"
    else:
        min_vacuum, why = float(min_vacuum_A), f"{float(min_vacuum_A):g} Å"
    if not (math.isfinite(vacuum_A) and vacuum_A >= min_vacuum):
        raise ValueError(
            f"a vacuum gap of {vacuum_A} Å does not isolate the slab: it must be at least {why}"
        )

    a0, _ = bulk_reference(element, cutoff)
    conventional = PmgStructure(
        PmgLattice.cubic(a0),
        [element] * 4,
        [[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]],
    )
    spacing = conventional.lattice.d_hkl(hkl) / (1 if sum(v % 2 for v in hkl) == 3 else 2)
    with warnings.catch_warnings():  # spglib's notice about its own error handling
        warnings.simplefilter("ignore", DeprecationWarning)
        generator = SlabGenerator(
            conventional,
            hkl,
            min_slab_size=layers * spacing,
            min_vacuum_size=vacuum_A,
            primitive=True,
            max_normal_search=max(abs(v) for v in hkl),
            reorient_lattice=True,
        )
        (pmg_slab,) = generator.get_slabs()  # one termination for these elemental facets
    a, b = np.array(pmg_slab.lattice.matrix[:2])
    normal = np.cross(a, b)
    area = float(np.linalg.norm(normal))
    normal /= area
    positions = np.array(pmg_slab.cart_coords)
    # unwrap heights into one contiguous slab (the generator may wrap planes across c)
    c_height = float(pmg_slab.lattice.matrix[2] @ normal)
    heights = np.mod(positions @ normal, c_height)
    ordered = np.sort(heights)
    gaps = np.diff(np.concatenate([ordered, [ordered[0] + c_height]]))
    start = ordered[(np.argmax(gaps) + 1) % len(ordered)]  # the plane above the widest gap
    heights = np.mod(heights - start + 0.5 * LAYER_TOLERANCE_A, c_height)
    plane = assign_layers(heights)
    if plane.max() + 1 < layers:
        raise RuntimeError(f"the generator stacked {plane.max() + 1} planes, {layers} asked")
    keep = plane < layers
    positions, heights, plane = positions[keep], heights[keep], plane[keep]
    # in-plane coordinates from pymatgen; heights from the bottom plane, the slab lifted by
    # half the gap into a cell whose c is the surface normal
    in_plane = positions - np.outer(positions @ normal, normal)
    bottom = heights[plane == 0].mean()
    z = heights - bottom
    thickness = float(z.max())
    cell = np.array([a, b, normal * (thickness + vacuum_A)])
    positions = in_plane + np.outer(z + 0.5 * vacuum_A, normal)
    structure = Structure((element,) * len(positions), positions, cell)
    return Slab(element, hkl, structure, plane, area, thickness, float(vacuum_A))


def faces_equivalent(slab: Slab, tolerance_A: float = 1e-3) -> bool:
    """Whether a symmetry operation of the slab (pymatgen's ``SpacegroupAnalyzer``) maps its
    top face onto its bottom one (an inversion, a mirror in the middle plane or a two-fold
    axis in it: any operation that reverses the surface normal)."""
    from pymatgen.symmetry.analyzer import SpacegroupAnalyzer

    with warnings.catch_warnings():  # spglib's notice about its own error handling
        warnings.simplefilter("ignore", DeprecationWarning)
        analyzer = SpacegroupAnalyzer(slab.structure.to_pymatgen(), symprec=tolerance_A)
        operations = analyzer.get_symmetry_operations(cartesian=True)
    normal = slab.structure.cell[2] / np.linalg.norm(slab.structure.cell[2])
    return any(float(normal @ op.rotation_matrix @ normal) < -0.5 for op in operations)


@dataclass(frozen=True)
class SurfaceProtocol:
    """How to measure one surface energy: ``element``'s ``miller`` facet as a slab of
    ``layers`` planes and a ``vacuum_A`` gap, positions relaxed by FIRE to ``fmax`` (eV/Å)
    in at most ``max_steps`` steps (0: the unrelaxed, bulk-terminated slab), the cell fixed.
    ``relax_layers`` planes on each face are free to move and the planes between them are
    held at their bulk positions (the usual slab protocol); None frees every plane.
    ``min_vacuum_A`` lowers the smallest gap accepted (:func:`build_slab`)."""

    element: str
    miller: tuple[int, int, int]
    layers: int
    fmax: float = 1e-3
    max_steps: int = 1000
    vacuum_A: float = DEFAULT_VACUUM_A
    relax_layers: int | None = None
    min_vacuum_A: float | None = None

    def fixed_planes(self, layer: np.ndarray) -> np.ndarray:
        """(n,) bool: True for the atoms of planes held in place (module doc)."""
        if self.relax_layers is None:
            return np.zeros(len(layer), dtype=bool)
        n = int(layer.max()) + 1
        return (layer >= self.relax_layers) & (layer < n - self.relax_layers)


@dataclass(frozen=True)
class SurfaceResult:
    """One measured surface energy; ``max_force_eV_A`` is the largest residual force,
    ``relax_steps`` the FIRE steps taken (convergence checked every 10 steps and at the
    step limit)."""

    protocol: SurfaceProtocol
    surface_energy_eV_A2: float
    unrelaxed_surface_energy_eV_A2: float
    slab_energy_eV: float
    bulk_energy_per_atom_eV: float
    n_atoms: int
    n_layers: int
    area_A2: float
    relax_steps: int
    max_force_eV_A: float
    converged: bool
    structure: Structure

    @property
    def surface_energy_J_m2(self) -> float:
        return self.surface_energy_eV_A2 * EV_PER_A2_IN_J_M2

    @property
    def unrelaxed_surface_energy_J_m2(self) -> float:
        return self.unrelaxed_surface_energy_eV_A2 * EV_PER_A2_IN_J_M2

    @property
    def force_evaluations(self) -> int:
        return self.relax_steps + 1


def surface_energy(slab_energy: float, n_atoms: int, bulk_energy: float, area: float) -> float:
    """gamma = (E_slab - N e_bulk) / (2 A): eV/Å^2 from eV, atoms, eV/atom and Å^2."""
    return (slab_energy - n_atoms * bulk_energy) / (2.0 * area)


def measure_surfaces(
    protocols: Sequence[SurfaceProtocol], cutoff: Cutoff = "asap", device: str | None = None
) -> list[SurfaceResult]:
    """Build every protocol's slab, relax all of them in one batch (cell fixed) and return
    their surface energies; ``ValueError`` (from :func:`build_slab`) on bad input."""
    if not protocols:
        return []
    slabs = [
        build_slab(p.element, p.miller, p.layers, p.vacuum_A, cutoff, p.min_vacuum_A)
        for p in protocols
    ]
    for p in protocols:
        if not (p.fmax > 0 and int(p.max_steps) == p.max_steps and p.max_steps >= 0):
            raise ValueError(f"{p}: fmax must be positive and max_steps a non-negative integer")
        if p.relax_layers is not None and not (int(p.relax_layers) == p.relax_layers >= 0):
            raise ValueError(f"{p}: relax_layers must be a non-negative integer or None")
    cells = [s.structure for s in slabs]
    bulk = [bulk_reference(p.element, cutoff)[1] for p in protocols]
    unrelaxed = emt_evaluate(cells, device=device, cutoff=cutoff).energy
    relaxed = relax_emt(
        cells,
        fmax=[p.fmax for p in protocols],
        max_steps=[int(p.max_steps) for p in protocols],
        cell=False,
        device=device,
        cutoff=cutoff,
        fixed=np.concatenate([p.fixed_planes(s.layer) for p, s in zip(protocols, slabs)]),
    )
    structures = relaxed.structures()
    return [
        SurfaceResult(
            protocol=p,
            surface_energy_eV_A2=surface_energy(relaxed.energy[i], s.n_atoms, bulk[i], s.area_A2),
            unrelaxed_surface_energy_eV_A2=surface_energy(
                unrelaxed[i], s.n_atoms, bulk[i], s.area_A2
            ),
            slab_energy_eV=float(relaxed.energy[i]),
            bulk_energy_per_atom_eV=float(bulk[i]),
            n_atoms=s.n_atoms,
            n_layers=s.n_layers,
            area_A2=s.area_A2,
            relax_steps=int(relaxed.n_steps[i]),
            max_force_eV_A=float(relaxed.max_force[i]),
            converged=bool(relaxed.converged[i]),
            structure=structures[i],
        )
        for i, (p, s) in enumerate(zip(protocols, slabs, strict=True))
    ]


@dataclass(frozen=True)
class ThicknessSeries:
    """gamma of one facet against the number of layers; ``change_J_m2[i]`` is
    gamma(layers[i + 1]) - gamma(layers[i])."""

    element: str
    miller: tuple[int, int, int]
    layers: tuple[int, ...]
    surface_energy_J_m2: np.ndarray
    unrelaxed_surface_energy_J_m2: np.ndarray
    change_J_m2: np.ndarray
    results: tuple[SurfaceResult, ...]

    @property
    def last_change_J_m2(self) -> float:
        """|gamma(thickest) - gamma(next thickest)|: how far the series is from converged."""
        return float(abs(self.change_J_m2[-1]))


def thickness_series(
    element: str,
    miller: Sequence[int],
    layers: Sequence[int],
    fmax: float = 1e-3,
    max_steps: int = 1000,
    vacuum_A: float = DEFAULT_VACUUM_A,
    cutoff: Cutoff = "asap",
    device: str | None = None,
) -> ThicknessSeries:
    """gamma of ``element``'s ``miller`` facet for each number of ``layers`` (two or more,
    increasing), every slab relaxed in one batch."""
    counts = tuple(int(n) for n in layers)
    if len(counts) < 2 or any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
        raise ValueError(f"a thickness series needs two or more increasing layer counts: {layers}")
    hkl = facet_miller(miller)
    protocols = [SurfaceProtocol(element, hkl, n, fmax, max_steps, vacuum_A) for n in counts]
    results = measure_surfaces(protocols, cutoff, device)
    gamma = np.array([r.surface_energy_J_m2 for r in results])
    return ThicknessSeries(
        element=element,
        miller=hkl,
        layers=counts,
        surface_energy_J_m2=gamma,
        unrelaxed_surface_energy_J_m2=np.array([r.unrelaxed_surface_energy_J_m2 for r in results]),
        change_J_m2=np.diff(gamma),
        results=tuple(results),
    )
