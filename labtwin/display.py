"""Inline HTML for notebooks, found through a plugin: the core never imports a renderer.

:func:`repr_html` is the ``_repr_html_`` of runs, campaigns, measurements and labs
(:func:`install` puts it on their classes). It asks the functions registered in the
``labtwin.html`` entry-point group, in name order, for HTML of the object;
labtwin's own is ``labtwin.rendering.notebook:html``. Where none is installed or
none answers, it returns None and Jupyter shows the plain ``repr``.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Any

GROUP = "labtwin.html"


@cache
def _renderers() -> tuple[Any, ...]:
    return tuple(sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name))


def repr_html(obj: Any) -> str | None:
    """HTML of ``obj`` from the first renderer that has one (None: no renderer does)."""
    for entry in _renderers():
        out = entry.load()(obj)
        if out is not None:
            return out
    return None


def _repr_html_(self: Any) -> str | None:
    return repr_html(self)


def install(*classes: type) -> None:
    """Give ``classes`` a ``_repr_html_`` (labtwin's ``__init__`` installs it on its own)."""
    for cls in classes:
        cls._repr_html_ = _repr_html_
