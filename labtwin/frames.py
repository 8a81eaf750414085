"""Frames for ``render_mode="rgb_array"``: a campaign, and what its lab last measured.

Every frame is a :data:`FRAME_SIZE` ``(H, W, 3)`` uint8 image (one size for every lab
and every step, as Gymnasium's ``RecordVideo`` needs). The left half shows the scores of
the campaign's experiments and the best so far; the right half shows the lab's *panel*,
what :meth:`labtwin.task.Task.frame_panel` returns for the campaign's records:

- :class:`StructurePanel` — the last measured structure (:mod:`labtwin.structures`)
  as an orthographic projection: atoms as discs coloured by element, bonds as sticks,
  the periodic cell's edges, drawn back to front;
- :class:`SeriesPanel` — curves of one measurement (a reactor's measured time course);
- :class:`NotePanel` — a line of text (nothing measured yet).

A lab without a panel (``frame_panel`` returns None) gets the campaign across the whole
frame. :func:`structure_panel` and :func:`series_panel` pick the last experiment that
has a structure or a given artifact from a campaign's records; a lab opts in by
returning one of them. The core draws with matplotlib's Agg canvas (no display needed);
richer plots and the run viewer live in :mod:`labtwin.rendering`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from labtwin.structures import Structure, has_structure, read_structure

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.gridspec import SubplotSpec

#: (width, height) in pixels of every frame
FRAME_SIZE = (640, 320)
_DPI = 80
_COLOURS = {"ok": "#1f77b4", "invalid": "#d62728", "failed": "#ff7f0e"}

# ---- elements: symbols, display colours (Jmol's) and radii ---------------------------------

SYMBOLS = (
    "X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga "
    "Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm "
    "Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th "
    "Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og"
).split()
"""Element symbols by atomic number; 0 (``X``) is a pseudo-atom."""

_JMOL = {
    0: "#4a7bd0", 1: "#e8e8e8", 3: "#cc80ff", 5: "#ffb5b5", 6: "#909090", 7: "#3050f8",
    8: "#ff0d0d", 9: "#90e050", 11: "#ab5cf2", 12: "#8aff00", 13: "#bfa6a6", 14: "#f0c8a0",
    15: "#ff8000", 16: "#ffff30", 17: "#1ff01f", 19: "#8f40d4", 20: "#3dff00", 26: "#e06633",
    28: "#50d050", 29: "#c88033", 30: "#7d80b0", 35: "#a62929", 46: "#006985", 47: "#c0c0c0",
    53: "#940094", 78: "#d0d0e0", 79: "#ffd123",
}  # fmt: skip
#: covalent radii (Å, Cordero et al. 2008) of common elements; others draw at 1.4 Å
_COVALENT = {
    1: 0.31, 3: 1.28, 5: 0.84, 6: 0.76, 7: 0.71, 8: 0.66, 9: 0.57, 11: 1.66, 12: 1.41,
    13: 1.21, 14: 1.11, 15: 1.07, 16: 1.05, 17: 1.02, 19: 2.03, 20: 1.76, 26: 1.32, 28: 1.24,
    29: 1.32, 30: 1.22, 35: 1.20, 46: 1.39, 47: 1.45, 53: 1.39, 78: 1.36, 79: 1.36,
}  # fmt: skip
_PSEUDO_RADIUS = 0.4  # sigma: a Lennard-Jones particle (diameter 1) drawn with a small gap


def element_colour(number: int) -> str:
    """Display colour of an element (Jmol's where known, a fixed palette otherwise)."""
    if number in _JMOL:
        return _JMOL[number]
    from matplotlib import colormaps, colors

    return colors.to_hex(colormaps["tab20"]((number * 7) % 20 / 20))


def _radii(numbers: np.ndarray, bonded: bool) -> np.ndarray:
    """Disc radii: ball-and-stick where there are bonds, fuller spheres otherwise."""
    scale = 0.45 if bonded else 0.7
    return np.array(
        [_PSEUDO_RADIUS if z == 0 else scale * _COVALENT.get(int(z), 1.4) for z in numbers]
    )


# ---- panels --------------------------------------------------------------------------------


class Panel(Protocol):
    """What a lab draws beside its campaign: ``draw`` fills one cell of the frame's grid.

    ``point`` is the index (0-based, among the campaign's scored records) of the
    experiment the panel shows, ringed in the campaign plot; None for none.
    """

    point: int | None

    def draw(self, fig: Figure, spec: SubplotSpec) -> None: ...


@dataclass(frozen=True)
class NotePanel:
    """A line of text in place of a drawing (e.g. nothing measured yet)."""

    text: str
    point: int | None = None

    def draw(self, fig: Figure, spec: SubplotSpec) -> None:
        ax = fig.add_subplot(spec)
        ax.set_axis_off()
        ax.text(0.5, 0.5, self.text, ha="center", va="center", fontsize=9, wrap=True)


@dataclass(frozen=True)
class SeriesPanel:
    """Curves ``ys[:, k]`` against ``x``, one per label, as measured (markers and lines)."""

    x: np.ndarray
    ys: np.ndarray
    labels: tuple[str, ...]
    xlabel: str = ""
    ylabel: str = ""
    title: str = ""
    point: int | None = None

    def draw(self, fig: Figure, spec: SubplotSpec) -> None:
        ax = fig.add_subplot(spec)
        ys = np.asarray(self.ys, dtype=float).reshape(len(self.x), -1)
        for k in range(ys.shape[1]):
            label = self.labels[k] if k < len(self.labels) else f"{k + 1}"
            ax.plot(self.x, ys[:, k], marker="o", ms=2.5, lw=1.0, label=label)
        ax.set_xlabel(self.xlabel, fontsize=8)
        ax.set_ylabel(self.ylabel, fontsize=8)
        ax.set_title(self.title, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")


@dataclass(frozen=True)
class StructurePanel:
    """One frame of a structure, projected along a fixed view (the same for every step,
    so that a video shows the structure change, not the camera)."""

    structure: Structure
    title: str = ""
    frame: int = -1
    point: int | None = None
    #: view direction: rotation about z, then tilt towards the viewer (degrees)
    azimuth: float = 25.0
    elevation: float = 35.0

    def draw(self, fig: Figure, spec: SubplotSpec) -> None:
        from matplotlib.collections import LineCollection, PolyCollection
        from matplotlib.lines import Line2D

        ax = fig.add_subplot(spec)
        ax.set_axis_off()
        ax.set_aspect("equal")
        ax.set_title(self.title, fontsize=9)
        s = self.structure
        positions, cell = s.frame(self.frame)
        if cell is None:  # a molecule or cluster: its principal axes along the screen
            rotation = _principal_view(positions)
        else:  # a box or crystal: the cell seen from a fixed corner
            rotation = _view_rotation(self.azimuth, self.elevation)
        xyz = positions @ rotation.T  # screen x, y; depth z (larger is nearer)
        bonded = s.bonds is not None and len(s.bonds) > 0
        radii = _radii(s.numbers, bonded)
        colours = [element_colour(int(z)) for z in s.numbers]

        shapes: list[tuple[float, np.ndarray, str]] = []  # (depth, polygon, colour)
        circle = np.stack([np.cos(_ANGLES), np.sin(_ANGLES)], axis=1)
        for k in range(s.n_atoms):
            shapes.append((xyz[k, 2], xyz[k, :2] + radii[k] * circle, colours[k]))
        if bonded:
            width = 0.12 if s.numbers.min() > 0 else 0.08
            for i, j, _order in s.bonds:
                if np.linalg.norm(positions[i] - positions[j]) > 3.0:
                    continue  # a bond across the periodic boundary: not drawn
                mid = 0.5 * (xyz[i] + xyz[j])
                for a in (i, j):
                    shapes.append(
                        (0.5 * (xyz[a, 2] + mid[2]), _stick(xyz[a, :2], mid[:2], width), colours[a])
                    )
        depth = np.array([d for d, _, _ in shapes])
        order = np.argsort(depth, kind="stable")  # far first
        fog = 0.35 * (depth.max() - depth) / max(np.ptp(depth), 1e-9)
        faces = [_lighter(shapes[k][2], fog[k]) for k in order]
        ax.add_collection(
            PolyCollection(
                [shapes[k][1] for k in order],
                facecolors=faces,
                edgecolors="#333333",
                linewidths=0.3,
                zorder=2,
            )
        )

        corners = xyz[:, :2]
        if cell is not None:
            edges = _cell_edges(cell) @ rotation.T  # (12, 2, 3)
            mean_depth = edges[:, :, 2].mean(axis=1)
            middle = (0.5 * cell.sum(axis=0)) @ rotation.T
            for behind, z in ((True, 1), (False, 3)):
                keep = (mean_depth < middle[2]) if behind else (mean_depth >= middle[2])
                ax.add_collection(
                    LineCollection(
                        edges[keep][:, :, :2], colors="#555555", linewidths=0.8, zorder=z
                    )
                )
            corners = np.concatenate([corners, edges.reshape(-1, 3)[:, :2]])
        pad = radii.max() * 1.2
        low, high = corners.min(axis=0) - pad, corners.max(axis=0) + pad
        centre, half = 0.5 * (low + high), 0.5 * max(np.ptp(np.stack([low, high]), axis=0))
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)

        present = sorted(set(int(z) for z in s.numbers))[:8]
        handles = [
            Line2D([], [], ls="", marker="o", ms=6, mfc=element_colour(z), mec="#333333",
                   label="LJ" if z == 0 else SYMBOLS[z] if z < len(SYMBOLS) else str(z))
            for z in present
        ]  # fmt: skip
        ax.legend(handles=handles, fontsize=7, loc="upper right", framealpha=0.6, handletextpad=0.2)


_ANGLES = np.linspace(0.0, 2.0 * np.pi, 20, endpoint=False)


def _view_rotation(azimuth: float, elevation: float) -> np.ndarray:
    """Rows: screen x, screen y and the depth axis (towards the viewer)."""
    a, e = np.radians(azimuth), np.radians(elevation)
    about_z = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0, 0, 1.0]])
    tilt = np.array([[1.0, 0, 0], [0, np.sin(e), np.cos(e)], [0, -np.cos(e), np.sin(e)]])
    return tilt @ about_z


def _principal_view(positions: np.ndarray) -> np.ndarray:
    """Rows: the largest principal axis along screen x, the next along y, tilted by 20 and
    25 degrees so that the depth shows (signs fixed: same structure, same picture)."""
    centred = positions - positions.mean(axis=0)
    if len(positions) < 2:
        return np.eye(3)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    axes = vectors[:, ::-1].T.copy()  # rows, largest first
    for k in range(2):
        if axes[k][np.argmax(np.abs(axes[k]))] < 0:
            axes[k] = -axes[k]
    axes[2] = np.cross(axes[0], axes[1])
    a, b = np.radians(20.0), np.radians(25.0)
    about_x = np.array([[1.0, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    about_y = np.array([[np.cos(b), 0, np.sin(b)], [0, 1.0, 0], [-np.sin(b), 0, np.cos(b)]])
    return about_x @ about_y @ axes


def _stick(a: np.ndarray, b: np.ndarray, width: float) -> np.ndarray:
    """A rectangle of ``width`` from ``a`` to ``b`` (screen coordinates)."""
    d = b - a
    n = np.array([-d[1], d[0]]) / max(np.hypot(*d), 1e-9) * (width / 2)
    return np.array([a + n, b + n, b - n, a - n])


def _cell_edges(cell: np.ndarray) -> np.ndarray:
    """The 12 edges of the parallelepiped spanned by the cell's rows, as (12, 2, 3)."""
    corners = np.array([[i, j, k] for i in (0, 1) for j in (0, 1) for k in (0, 1)]) @ cell
    pairs = [(a, b) for a in range(8) for b in range(a + 1, 8) if bin(a ^ b).count("1") == 1]
    return np.array([[corners[a], corners[b]] for a, b in pairs])


def _lighter(colour: str, amount: float) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    rgb = np.array(to_rgb(colour))
    return tuple(rgb + (1.0 - rgb) * float(amount))


# ---- panels from a campaign's records ------------------------------------------------------


def _scored(records: Sequence[Any]) -> list[Any]:
    """The records the campaign plot shows (those with a score), in order."""
    return [r for r in records if r.score is not None]


def structure_panel(
    records: Sequence[Any], placeholder: str = "no structure measured yet"
) -> Panel:
    """The last structure a campaign's experiments measured, or a note if none has yet.

    ``records`` are :class:`~labtwin.campaign.Record` s (anything with ``kind``,
    ``score`` and ``measurement``).
    """
    scored = _scored(records)
    for index in range(len(scored) - 1, -1, -1):
        record = scored[index]
        artifacts = record.measurement.artifacts
        if record.kind == "experiment" and record.measurement.ok and has_structure(artifacts):
            structure = read_structure(artifacts)
            frames = f", {structure.n_frames} frames" if structure.n_frames > 1 else ""
            title = f"experiment {index + 1}: {structure.n_atoms} atoms{frames}"
            return StructurePanel(structure, title=title, point=index)
    return NotePanel(placeholder)


def series_panel(
    records: Sequence[Any],
    artifact: str,
    labels: Sequence[str],
    xlabel: str = "",
    ylabel: str = "",
    placeholder: str = "nothing measured yet",
) -> Panel:
    """The ``artifact`` table (first column x, the others curves) of the campaign's last
    experiment that has it, or a note if none has yet."""
    scored = _scored(records)
    for index in range(len(scored) - 1, -1, -1):
        record = scored[index]
        table = record.measurement.artifacts.get(artifact)
        if record.kind == "experiment" and record.measurement.ok and table is not None:
            table = np.asarray(table, dtype=float)
            if table.ndim == 2 and table.shape[1] >= 2:
                return SeriesPanel(
                    table[:, 0],
                    table[:, 1:],
                    tuple(labels),
                    xlabel,
                    ylabel,
                    title=f"experiment {index + 1}: {artifact.replace('_', ' ')}",
                    point=index,
                )
    return NotePanel(placeholder)


# ---- the frame -----------------------------------------------------------------------------


def campaign_points(records: Sequence[Any]) -> list[tuple[float, str]]:
    """(score, status) of every scored record, as the campaign plot shows them."""
    return [(float(r.score), r.measurement.status) for r in _scored(records)]


def _draw_campaign(
    ax: Any,
    title: str,
    points: list[tuple[float, str]],
    budget: int,
    ring: int | None,
    score_range: tuple[float, float] | None,
) -> None:
    if points:
        scores = np.array([s for s, _ in points], dtype=float)
        steps = np.arange(1, len(points) + 1)
        ax.scatter(steps, scores, c=[_COLOURS.get(st, "k") for _, st in points], s=25, zorder=3)
        ax.step(steps, np.maximum.accumulate(scores), where="post", color="#2ca02c", label="best")
        if ring is not None and 0 <= ring < len(points):
            ax.scatter([ring + 1], [scores[ring]], s=110, facecolors="none", edgecolors="k",
                       linewidths=1.2, zorder=4, label="shown")  # fmt: skip
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0.5, max(budget, 1) + 0.5)
    if score_range is not None:  # fixed axes: a video shows the scores move, not the axes
        low, high = score_range
        margin = 0.05 * (high - low)
        ax.set_ylim(low - margin, high + margin)
    ax.set_xlabel("experiment")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)


def lab_frame(
    title: str,
    points: list[tuple[float, str]],
    budget: int,
    panel: Panel | None = None,
    size: tuple[int, int] = FRAME_SIZE,
    score_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """The campaign's scores (and ``panel`` beside them) as an ``(H, W, 3)`` uint8 image;
    ``score_range`` (the lab's, where it documents one) fixes the score axis."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = size
    fig = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    canvas = FigureCanvasAgg(fig)
    if panel is None:
        _draw_campaign(fig.add_subplot(), title, points, budget, None, score_range)
    else:
        grid = fig.add_gridspec(1, 2)
        _draw_campaign(fig.add_subplot(grid[0]), title, points, budget, panel.point, score_range)
        panel.draw(fig, grid[1])
    fig.tight_layout()
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3]
    if image.shape[:2] != (height, width):  # a backend rounding the figure size
        raise RuntimeError(f"frame of {image.shape[:2]} pixels, expected {(height, width)}")
    return np.ascontiguousarray(image)


def campaign_frame(
    title: str, points: list[tuple[float, str]], budget: int, size: tuple[int, int] = FRAME_SIZE
) -> np.ndarray:
    """Scores of a campaign's experiments and the best so far (no panel)."""
    return lab_frame(title, points, budget, None, size)
