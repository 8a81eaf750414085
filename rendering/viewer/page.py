"""The viewer's one HTML page: served (assets by URL) or self-contained (assets inlined).

Both pages run the same script (``assets/viewer/app.js``). The served page
loads its assets from the server that serves it; the self-contained page (the
report, a notebook cell) carries them and its data inline, with a
Content-Security-Policy that lets nothing load from anywhere. Data from a run
is put in a ``<script type="application/json">`` block with ``<``, ``>`` and
``&`` escaped, so no text in a run can close the block; the script builds the
page with ``textContent`` only, so no text in a run becomes markup.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parents[1] / "assets"
#: in load order
SCRIPTS = ("uplot/uPlot.iife.min.js", "3dmol/3Dmol-min.js", "viewer/app.js")
STYLES = ("uplot/uPlot.min.css", "viewer/app.css")

#: the served page's policy: its own assets and API, nothing else
SERVED_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; worker-src blob:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def asset_files() -> dict[str, Path]:
    """Every packaged asset by its path under ``assets/`` (the only files the server serves
    besides the run's own)."""
    return {
        p.relative_to(ASSETS).as_posix(): p
        for p in sorted(ASSETS.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@cache
def _asset_text(rel: str) -> str:
    return (ASSETS / rel).read_text(encoding="utf-8")


def _skeleton(title: str, head: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<link rel="icon" href="data:,">\n'  # no favicon request
        f"<title>{html.escape(title)}</title>\n{head}</head>\n"
        f'<body>\n<div id="app"></div>\n{body}</body>\n</html>\n'
    )


def served_page(title: str = "labtwin viewer") -> str:
    """The page the server sends: assets by relative URL, data from its API."""
    head = "".join(f'<link rel="stylesheet" href="assets/{s}">\n' for s in STYLES)
    body = "".join(f'<script src="assets/{s}"></script>\n' for s in SCRIPTS)
    return _skeleton(title, head, body)


def json_for_html(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` block (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def inline_page(data: dict[str, Any], title: str) -> str:
    """One self-contained HTML page showing ``data`` (see :func:`labtwin.rendering.report`)."""
    scripts = [_asset_text(s) for s in SCRIPTS]
    for text in scripts:  # "</script" would end the block early, "<!--" can hide its end
        if "</script" in text.lower() or "<!--" in text:
            raise ValueError("an asset contains '</script' or '<!--'; it cannot be inlined")
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(t.encode()).digest()).decode()}'"
        for t in scripts
    )
    csp = (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data: blob:; worker-src blob:; base-uri 'none'; form-action 'none'"
    )
    head = f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">\n'
    head += "".join(f"<style>\n{_asset_text(s)}\n</style>\n" for s in STYLES)
    body = f'<script type="application/json" id="labtwin-data">{json_for_html(data)}</script>\n'
    body += "".join(f"<script>{t}</script>\n" for t in scripts)
    return _skeleton(title, head, body)
