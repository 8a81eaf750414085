"""The shared neighbour lists (labtwin.simulators.neighbours) against a brute-force numpy
enumeration of every pair and periodic image.

Exactness: positions are random float64 numbers, so no pair sits within round-off (1e-15
relative) of the list radius, and the lists must hold exactly the brute-force pairs: no
tolerance. Each test checks the search it means to exercise was the one chosen.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

wp = pytest.importorskip("warp")

from labtwin.simulators.neighbours import NeighbourLists  # noqa: E402
from labtwin.simulators.neighbours._kernels import (  # noqa: E402
    SEARCH_CELLS,
    SEARCH_IMAGES,
    SEARCH_NEAREST,
)

wp.config.quiet = True
CUTOFF, SKIN = 0.8, 0.2
R_LIST = CUTOFF + SKIN


def brute_pairs(x: np.ndarray, cell: np.ndarray, periodic: bool, r: float) -> set:
    """Every (i, j, n) with |x_j + n cell - x_i| < r, n integer, (j, n) != (i, 0)."""
    if periodic:
        spacing = 1.0 / np.linalg.norm(np.linalg.inv(cell), axis=0)  # lattice-plane spacings
        reach = np.ceil(r / spacing + np.ptp(x @ np.linalg.inv(cell), axis=0)).astype(int) + 1
        images = np.array(list(itertools.product(*[range(-m, m + 1) for m in reach])))
    else:
        images = np.zeros((1, 3), dtype=int)
    out = set()
    for n in images:
        d = x[None, :, :] + n @ cell - x[:, None, :]
        i, j = np.nonzero(np.einsum("ijk,ijk->ij", d, d) < r * r)
        for a, b in zip(i, j):
            if a != b or np.any(n):
                out.add((int(a), int(b), *map(int, n)))
    return out


def make_lists(systems, *, half: bool, packed: bool, capacity: int = 64, deforming=False):
    """NeighbourLists over ``systems``: (positions, cell rows, periodic) tuples."""
    x = np.concatenate([s[0] for s in systems])
    counts = [len(s[0]) for s in systems]
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    cells = np.stack([s[1] for s in systems])
    periodic = np.array([s[2] for s in systems])
    cutoff = np.full(len(systems), CUTOFF)
    xd = wp.array(x, dtype=wp.vec3d, device="cpu")
    atom_sys = wp.array(np.repeat(np.arange(len(systems)), counts).astype(np.int32), device="cpu")
    sys_start = wp.array(start, dtype=wp.int32, device="cpu")
    cell = wp.array(cells, dtype=wp.mat33d, device="cpu") if deforming else None
    active = wp.ones(len(systems), dtype=wp.int32, device="cpu") if deforming else None
    lists = NeighbourLists(
        xd, atom_sys, sys_start, cells, periodic, cutoff, SKIN,
        half=half, packed=packed, capacity=capacity, cell=cell, active=active, device="cpu",
    )  # fmt: skip
    return lists, start


def listed(lists: NeighbourLists, start: np.ndarray) -> list[set]:
    """Per system, the set of (i, j, n) the rows hold (indices within the system); asserts
    that no entry is listed twice. A half list's pair is written as (i < j, n) whichever row
    holds it (the cell search halves its stencil in space, not by index)."""
    i, j, n = lists.pairs()
    system = np.searchsorted(start, i, side="right") - 1
    out = [set() for _ in range(len(start) - 1)]
    for s, a, b, m in zip(system, i, j, n):
        if lists.half and b < a:
            a, b, m = b, a, -m
        key = (int(a - start[s]), int(b - start[s]), *map(int, m))
        assert key not in out[s], f"entry {key} listed twice"
        out[s].add(key)
    return out


def expected(lists: NeighbourLists, systems, start, half: bool) -> list[set]:
    """Brute-force pairs from the positions the rows refer to (home-box for packed rows)."""
    xl = lists.xw.numpy()
    out = []
    for s, (_, cell, periodic) in enumerate(systems):
        pairs = brute_pairs(xl[start[s] : start[s + 1]], cell, periodic, R_LIST)
        out.append({p for p in pairs if p[1] > p[0]} if half else pairs)
    return out


def fluid(n_atoms: int, lengths, rng, unwrapped: float = 0.0):
    """Random positions in an orthorhombic box, displaced by whole boxes up to ``unwrapped``."""
    lengths = np.asarray(lengths, dtype=np.float64)
    x = rng.uniform(0, 1, (n_atoms, 3)) * lengths
    x += np.round(rng.uniform(-unwrapped, unwrapped, (n_atoms, 3))) * lengths
    return x, np.diag(lengths), True


def triclinic(n_atoms: int, cell, rng):
    cell = np.asarray(cell, dtype=np.float64)
    frac = rng.uniform(-1.5, 2.5, (n_atoms, 3))  # unwrapped: up to two cells out
    return frac @ cell, cell, True


def cluster(n_atoms: int, rng):
    return rng.normal(0, 0.6, (n_atoms, 3)), np.eye(3), False


@pytest.mark.parametrize("half", [True, False], ids=["half", "full"])
def test_packed_rows_match_brute_force_per_search(half):
    rng = np.random.default_rng(1)
    systems = [
        fluid(300, [4.0, 4.2, 4.5], rng, unwrapped=1),  # >= 6 cells of r/2 per edge
        fluid(60, [2.6, 2.2, 2.9], rng, unwrapped=1),  # at least 2 r across: nearest image
        fluid(20, [1.5, 1.3, 1.8], rng, unwrapped=2),  # under 2 r: several images of j
        cluster(25, rng),
    ]
    lists, start = make_lists(systems, half=half, packed=True)
    assert lists.search_host.tolist() == [
        SEARCH_CELLS,
        SEARCH_NEAREST,
        SEARCH_IMAGES,
        SEARCH_NEAREST,
    ]
    assert not lists.rebuild_all()
    got, want = listed(lists, start), expected(lists, systems, start, half)
    for s in range(len(systems)):
        assert got[s] == want[s], f"system {s}"
    # the packed images refer to home-box positions
    assert np.abs(lists.pairs()[2]).max() <= 1
    xw = lists.xw.numpy()
    for s, (_, cell, _) in enumerate(systems[:3]):
        frac = xw[start[s] : start[s + 1]] / np.diag(cell)
        assert frac.min() >= 0 and frac.max() < 1
    if not half:
        i, j, n = lists.pairs()
        key = i.astype(np.int64) * 2**40 + ((j.astype(np.int64) << 5) | ((n + 1) @ [9, 3, 1]))
        assert np.all(np.diff(key) > 0), "full packed rows are sorted by (j, image)"


def nearest_rows_by_rule(lists: NeighbourLists, start: np.ndarray) -> list[list[int]]:
    """The packed rows of all-pairs nearest-image systems as the one-candidate-at-a-time rule
    writes them, in the lists' float type: every j after i (half rows) or every j but i, in
    index order; d = x_i - x_j from home-box positions, n = +-1 where d is beyond +-L/2,
    e = d - n L, kept where e.e < r^2, each entry (j << 5) | (n + 1) . (9, 3, 1)."""
    real = lists.dtype
    xl = lists.xw.numpy().astype(real)
    box = lists.box.numpy().astype(real)
    r2max = lists.list_radius.numpy()[0] * lists.list_radius.numpy()[0]
    rows = []
    for s in range(len(start) - 1):
        b, h, per = box[s], real(0.5) * box[s], lists.periodic_host[s]
        for i in range(start[s], start[s + 1]):
            row = []
            for j in range(i + 1 if lists.half else start[s], start[s + 1]):
                if j == i:
                    continue
                d = xl[i] - xl[j]
                n = np.where(d > h, 1, np.where(d < -h, -1, 0)) if per else np.zeros(3, int)
                e = d - n.astype(real) * b
                if (e[0] * e[0] + e[1] * e[1]) + e[2] * e[2] < r2max:
                    row.append((j << 5) | int((n + 1) @ [9, 3, 1]))
            rows.append(row)
    return rows


@pytest.mark.parametrize("dtype", [wp.vec3f, wp.vec3d], ids=["float32", "float64"])
@pytest.mark.parametrize("half", [True, False], ids=["half", "full"])
def test_nearest_rows_are_the_rule_entry_for_entry(half, dtype):
    """The all-pairs search (C++, four candidates' arithmetic at a time on the CPU) writes
    each row's entries in the order and with the float arithmetic of the one-at-a-time rule,
    so the MD force loop sums in the same order: rows compared as lists, not sets."""
    rng = np.random.default_rng(7)
    systems = [fluid(61, [2.6, 2.2, 2.9], rng, unwrapped=1), cluster(23, rng)]
    lists, start = make_lists(systems, half=half, packed=True)
    lists = NeighbourLists(
        wp.array(lists.x.numpy(), dtype=dtype, device="cpu"), lists.atom_sys, lists.sys_start,
        np.stack([s[1] for s in systems]), [s[2] for s in systems], np.full(2, CUTOFF), SKIN,
        half=half, packed=True, capacity=64, device="cpu",
    )  # fmt: skip
    assert lists.search_host.tolist() == [SEARCH_NEAREST, SEARCH_NEAREST]
    assert not lists.rebuild_all()
    counts, nbr = lists.nbr_count.numpy(), lists.nbr.numpy()
    got = [nbr[i, : counts[i]].tolist() for i in range(lists.n_atoms)]
    assert got == nearest_rows_by_rule(lists, start)
    assert sum(counts) > 2 * lists.n_atoms  # rows with entries, not empty ones
    assert any(c % 4 for c in counts)  # rows ending part-way through a group of four


def test_shift_rows_triclinic_and_self_images_match_brute_force():
    rng = np.random.default_rng(2)
    shear = np.array([[1.6, 0.0, 0.0], [0.7, 1.5, 0.0], [-0.4, 0.5, 1.7]])
    systems = [
        triclinic(12, shear, rng),
        triclinic(1, 0.4 * np.eye(3), rng),  # one atom, 0.4 r across: 80 of its own images
        triclinic(2, [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]], rng),  # primitive fcc
        fluid(40, [2.5, 2.5, 2.5], rng, unwrapped=2),  # orthorhombic: still the image loop
    ]
    lists, start = make_lists(systems, half=False, packed=False, deforming=True)
    assert lists.search_host.tolist() == [SEARCH_IMAGES] * 4
    lists.rebuild_all()
    got, want = listed(lists, start), expected(lists, systems, start, half=False)
    for s in range(len(systems)):
        assert got[s] == want[s], f"system {s}"
    assert len(want[1]) == 80  # n with |n|^2 < (1 / 0.4)^2: 6 + 12 + 8 + 6 + 24 + 24
    # rows ordered by (j, image), image lexicographic
    i, j, n = lists.pairs()
    key = np.column_stack([i, j, n]).tolist()
    assert key == sorted(key)


def test_overflowing_rows_grow_until_complete():
    rng = np.random.default_rng(3)
    systems = [fluid(300, [4.0, 4.0, 4.0], rng), fluid(20, [1.5, 1.5, 1.5], rng)]
    for packed in (True, False):
        lists, start = make_lists(systems, half=False, packed=packed, capacity=3)
        assert lists.rebuild_all(), "capacity 3 must overflow"
        longest = lists.nbr_count.numpy().max()
        assert lists.capacity > longest  # every row fits, with its scratch slot
        assert listed(lists, start) == expected(lists, systems, start, half=False)


def test_skin_test_rebuilds_only_the_system_that_moved():
    rng = np.random.default_rng(4)
    systems = [fluid(50, [3.0, 3.0, 3.0], rng), fluid(50, [3.0, 3.0, 3.0], rng)]
    lists, start = make_lists(systems, half=True, packed=True)
    lists.rebuild_all()
    x = lists.x.numpy()
    x[:] += rng.uniform(-1, 1, x.shape) * 0.99 * SKIN / 2 / np.sqrt(3)  # all under skin / 2
    lists.x.assign(x)
    lists.launch_update()
    assert lists.rebuild.numpy().tolist() == [0, 0]
    moved = start[1] + 7  # one atom of system 1 beyond skin / 2 from where lists were built
    x[moved] = lists.x_ref.numpy()[moved] + [0.0, 0.0, 0.51 * SKIN]
    lists.x.assign(x)
    lists.launch_update()
    assert lists.rebuild.numpy().tolist() == [0, 1]
    got, want = listed(lists, start), expected(lists, systems, start, half=True)
    assert got[1] == want[1]  # rebuilt at the new positions
    assert np.array_equal(lists.x_ref.numpy()[start[1] :], x[start[1] :])


def test_strain_test_rebuilds_a_deformed_cell():
    rng = np.random.default_rng(5)
    systems = [triclinic(8, 2.0 * np.eye(3), rng), triclinic(8, 2.0 * np.eye(3), rng)]
    lists, start = make_lists(systems, half=False, packed=False, deforming=True)
    lists.rebuild_all()
    cells = lists.cell.numpy()
    cells[0] = cells[0] @ (np.eye(3) + 0.01 * np.eye(3))  # 1 % strain: within the skin's bound
    cells[1] = cells[1] @ (np.eye(3) + 0.3 * np.eye(3))  # 30 %: pairs may have come in
    lists.cell.assign(cells)
    lists.launch_update()
    assert lists.rebuild.numpy().tolist() == [0, 1]
    new = [(s[0], c, True) for s, c in zip(systems, cells)]
    assert listed(lists, start)[1] == expected(lists, new, start, half=False)[1]
