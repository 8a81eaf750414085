"""The run viewer: a local web page of a run, live while it is written.

- :mod:`~labtwin.rendering.viewer.reader` — tails a run's JSONL files by byte offset
  (a torn last line waits until it is complete), finds runs (and their evaluation
  campaigns), follows an evaluation's eval/summary.json, reads structures safely;
- :mod:`~labtwin.rendering.viewer.page` — the one HTML page, served or self-contained;
- :mod:`~labtwin.rendering.viewer.app` — the Starlette app (JSON API, server-sent
  events) and :class:`ViewerServer` (uvicorn on 127.0.0.1).

``labtwin view runs/<run>`` serves it; docs/viewer.md shows it.
"""

from labtwin.rendering.viewer.app import ViewerServer, create_app, serve

__all__ = ["ViewerServer", "create_app", "serve"]
