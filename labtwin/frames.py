"""Frames for ``render_mode="rgb_array"``: a campaign drawn as an image.

The core draws with matplotlib's Agg canvas (no display needed); richer plots
and the run viewer live in :mod:`labtwin.rendering`.
"""

from __future__ import annotations

import numpy as np

_COLOURS = {"ok": "#1f77b4", "invalid": "#d62728", "failed": "#ff7f0e"}


def campaign_frame(
    title: str, points: list[tuple[float, str]], budget: int, size: tuple[int, int] = (480, 320)
) -> np.ndarray:
    """Scores of a campaign's experiments and the best so far, as an ``(H, W, 3)`` uint8 image."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = size
    fig = Figure(figsize=(width / 80, height / 80), dpi=80)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if points:
        scores = np.array([s for s, _ in points], dtype=float)
        steps = np.arange(1, len(points) + 1)
        ax.scatter(steps, scores, c=[_COLOURS.get(st, "k") for _, st in points], s=25, zorder=3)
        ax.step(steps, np.maximum.accumulate(scores), where="post", color="#2ca02c", label="best")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlim(0.5, max(budget, 1) + 0.5)
    ax.set_xlabel("experiment")
    ax.set_ylabel("score")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3]
    return np.ascontiguousarray(image)
