"""The viewer's web app (Starlette) and its server (uvicorn, bound to 127.0.0.1).

Routes (``<run>`` is a run's folder name, as ``/api/runs`` lists it):

=====================================  ===================================================
``/``                                  the page (``assets/viewer/app.js`` builds it)
``/assets/<path>``                     a packaged asset (vendored 3Dmol.js, uPlot; the app)
``/api/runs``                          the runs: the folder itself if it is a run, else its
                                       subfolders that are; after each, its evaluation
                                       campaigns (``<run>:eval:<agent>``)
``/api/runs/<run>/events``             server-sent events: ``config``, then ``lines``
                                       (``{"stream", "lines"}``) for every batch of new
                                       JSONL lines, from the start and then live;
                                       ``synced`` once the lines written before are sent;
                                       ``evaluation`` (``eval/summary.json`` and the
                                       evaluation campaigns' run names, or null) when
                                       the run has one and whenever it changes
``/api/runs/<run>/structure?numbers=``  a record's structure (its artifact paths) as JSON
``/api/runs/<run>/files/<path>``       a file inside the run folder (downloads)
=====================================  ===================================================

It serves nothing but the packaged assets and files inside a run folder (paths
are resolved, symlinks followed, and refused when they leave it), loads arrays
without pickles, and never runs anything a run contains. Every response carries
``X-Content-Type-Options: nosniff`` and a Content-Security-Policy that lets the
page load only from the server itself; requests whose ``Host`` is not the
address it is bound to are refused (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import os
import socket
import threading
import webbrowser
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from labtwin.rendering.viewer.page import SERVED_CSP, asset_files, served_page
from labtwin.rendering.viewer.reader import (
    STREAMS,
    EvaluationWatch,
    RunReader,
    find_runs,
    load_structure,
    read_config,
    run_summary,
)

#: seconds between looks at a live run's files
POLL_S = 0.25
#: seconds between keep-alive comments on a quiet event stream
KEEPALIVE_S = 15.0
#: file types shown in the browser; anything else in a run downloads as bytes
_INLINE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
_TEXT_TYPES = {".json", ".jsonl", ".txt", ".csv", ".md", ".log"}


class _Headers:
    """ASGI middleware: security headers on every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"content-security-policy", SERVED_CSP.encode()),
                    (b"referrer-policy", b"no-referrer"),
                    (b"cross-origin-resource-policy", b"same-origin"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(root: str | os.PathLike, hosts: list[str] | None = None, stop: Any = None) -> Any:
    """The viewer app for a run folder, or a folder of runs.

    ``hosts``: the ``Host`` names requests may carry (default: the loopback names);
    ``stop``: a :class:`threading.Event` that ends open event streams when set.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    assets = asset_files()
    stop = stop or threading.Event()
    page = served_page()

    def run_path(request: Request) -> Path:
        name = request.path_params["run"]
        runs = find_runs(root)
        if name not in runs:
            raise LookupError(name)
        return runs[name]

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"cache-control": "no-store"})

    async def asset(request: Request) -> Response:
        path = assets.get(request.path_params["path"])  # only names the package holds
        if path is None:
            return PlainTextResponse("not found", status_code=404)
        media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if path.suffix == ".js":
            media = "text/javascript"
        return FileResponse(path, media_type=media)

    async def runs_list(request: Request) -> Response:
        runs = find_runs(root)
        return JSONResponse([run_summary(name, path) for name, path in runs.items()])

    async def structure(request: Request) -> Response:
        try:
            run = run_path(request)
        except LookupError:
            return PlainTextResponse("no such run", status_code=404)
        keys = {"numbers", "positions", "cell", "bonds"}
        paths = {f"structure_{k}": v for k, v in request.query_params.items() if k in keys}
        try:
            data = await run_in_threadpool(load_structure, run, paths)
        except (KeyError, ValueError, OSError) as err:
            return PlainTextResponse(f"cannot read this structure: {err}", status_code=404)
        return JSONResponse(data)

    async def run_file(request: Request) -> Response:
        try:
            run = run_path(request)
        except LookupError:
            return PlainTextResponse("no such run", status_code=404)
        rel = request.path_params["path"]
        target = (run / rel).resolve()
        if "\x00" in rel or os.path.isabs(rel) or not target.is_relative_to(run.resolve()):
            return PlainTextResponse("not a file of this run", status_code=404)
        if not target.is_file():
            return PlainTextResponse("not found", status_code=404)
        suffix = target.suffix.lower()
        if suffix in _INLINE_TYPES:
            return FileResponse(target, media_type=_INLINE_TYPES[suffix])
        if suffix in _TEXT_TYPES:
            return FileResponse(target, media_type="text/plain; charset=utf-8")
        return FileResponse(target, media_type="application/octet-stream", filename=target.name)

    async def events(request: Request) -> Response:
        try:
            run = run_path(request)
        except LookupError:
            return PlainTextResponse("no such run", status_code=404)
        offsets = _parse_offsets(request.headers.get("last-event-id", ""))
        return StreamingResponse(
            _event_stream(request, run, offsets, stop, request.path_params["run"]),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    routes = [
        Route("/", index),
        Route("/assets/{path:path}", asset),
        Route("/api/runs", runs_list),
        Route("/api/runs/{run}/events", events),
        Route("/api/runs/{run}/structure", structure),
        Route("/api/runs/{run}/files/{path:path}", run_file),
    ]
    allowed = hosts or ["127.0.0.1", "localhost", "::1", "[::1]"]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=allowed)]
    return _Headers(Starlette(routes=routes, middleware=middleware))


def _parse_offsets(text: str) -> dict[str, int]:
    """``Last-Event-ID`` (``campaigns.records.metrics.transcripts`` byte offsets)."""
    parts = text.split(".")
    if len(parts) != len(STREAMS) or not all(p.isdigit() for p in parts):
        return {}
    return dict(zip(STREAMS, map(int, parts)))


def _sse(event: str, data: Any, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def _event_stream(request: Request, run: Path, offsets: dict[str, int], stop: Any, name: str):
    """``config``, then every batch of new lines; the event id holds the offsets sent so far,
    so a reconnecting browser (``Last-Event-ID``) resumes where it was. The run's evaluation
    is sent whole on connecting (where it has one) and again whenever it changes."""
    reader = RunReader(run, offsets)
    evaluation = EvaluationWatch(run, name)
    yield "retry: 1000\n\n"
    yield _sse("config", await run_in_threadpool(read_config, run))
    quiet, synced = 0.0, False
    while not stop.is_set():
        if await run_in_threadpool(evaluation.poll):
            yield _sse("evaluation", evaluation.evaluation)
        sent = reader.offsets
        batch = await run_in_threadpool(reader.poll)
        if any(t.restarted for t in reader.tails.values()):  # a file was replaced: start over
            reader = RunReader(run)
            yield _sse("reset", {})
            continue
        for stream in STREAMS:
            if stream in batch:
                sent[stream] = reader.tails[stream].offset
                event_id = ".".join(str(sent[s]) for s in STREAMS)
                yield _sse("lines", {"stream": stream, "lines": batch[stream]}, event_id)
        if batch:
            quiet = 0.0
            continue  # more may be waiting (a long run streams in chunks)
        if not synced:  # everything written before the page connected has been sent
            synced = True
            yield _sse("synced", {})
        if await request.is_disconnected():
            return
        quiet += POLL_S
        if quiet >= KEEPALIVE_S:
            quiet = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(POLL_S)


class ViewerServer:
    """The viewer served by uvicorn on ``host:port`` (port 0: a free one), in a thread or
    in the foreground.

    >>> server = ViewerServer("runs/my-run").start()  # doctest: +SKIP
    >>> server.url, server.stop()  # doctest: +SKIP
    """

    def __init__(self, root: str | os.PathLike, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self.stop_event = threading.Event()
        hosts = ["127.0.0.1", "localhost", "::1", "[::1]", host]
        self.app = create_app(root, hosts=hosts, stop=self.stop_event)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(128)  # connections wait in the backlog until uvicorn accepts them
        self.host, self.port = host, self.socket.getsockname()[1]
        config = uvicorn.Config(
            self.app, log_level="warning", timeout_graceful_shutdown=1, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        exit_handler = self.server.handle_exit

        def handle_exit(sig: int, frame: Any) -> None:  # Ctrl-C also ends open event streams
            self.stop_event.set()
            exit_handler(sig, frame)

        self.server.handle_exit = handle_exit  # type: ignore[method-assign]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> ViewerServer:
        """Serve in a background thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.serve, daemon=True, name="labtwin-viewer")
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the viewer server did not start")
            self._thread.join(0.02)
        return self

    def serve(self) -> None:
        """Serve in the foreground until stopped (Ctrl-C)."""
        try:
            self.server.run(sockets=[self.socket])
        finally:
            self.stop_event.set()

    def stop(self) -> None:
        self.stop_event.set()
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)
        self.socket.close()


def serve(
    root: str | os.PathLike, host: str = "127.0.0.1", port: int = 0, open_browser: bool = False
) -> None:
    """``labtwin view``: print the URL, optionally open it, serve until Ctrl-C."""
    server = ViewerServer(root, host, port)
    print(f"labtwin viewer: {server.url}  (Ctrl-C to stop)", flush=True)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(server.url,)).start()
    server.serve()
