"""Fixtures of the viewer tests: runs written by the real run store, one server, one browser.

The browser is Debian's ``chromium`` (``apt-get install -y chromium``) driven headless by
Playwright. Without it the browser tests fail with a message saying so; set
``LABTWIN_SKIP_BROWSER=1`` to skip them on purpose. Screenshots go to
``tests/rendering/artifacts/`` (``LABTWIN_TEST_ARTIFACTS`` overrides it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import viewer_runs

from labtwin.rendering.viewer import ViewerServer

CHROMIUM = os.environ.get("LABTWIN_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("LABTWIN_TEST_ARTIFACTS", Path(__file__).parent / "artifacts"))
#: headless chromium with WebGL on the CPU (SwiftShader) and no network of its own
CHROMIUM_ARGS = [
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",
    "--ignore-gpu-blocklist",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
    # any host name resolves to nothing: the page must not need the network
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


@pytest.fixture(scope="session")
def viewer_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of runs: campaigns of a real lab, a training run with transcripts, structures."""
    root = tmp_path_factory.mktemp("viewer-runs")
    viewer_runs.campaign_run(root / "lj-campaigns")
    viewer_runs.chat_run(root / "train-chat")
    viewer_runs.structures_run(root / "structures")
    return root


@pytest.fixture(scope="session")
def server(viewer_root: Path) -> Iterator[ViewerServer]:
    srv = ViewerServer(viewer_root).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / ".gitignore").write_text("*\n")
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if os.environ.get("LABTWIN_SKIP_BROWSER") == "1":
        pytest.skip("LABTWIN_SKIP_BROWSER=1: browser tests skipped on purpose")
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"the browser tests need Debian's chromium at {CHROMIUM} "
            "(apt-get install -y chromium); set LABTWIN_SKIP_BROWSER=1 to skip them",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the browser tests need playwright (pip install -e '.[test]')", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageWatch:
    """A page with everything it logged and requested, for the tests' assertions."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.console: list[str] = []
        self.errors: list[str] = []
        self.requests: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.errors.append(f"page error: {err}"))
        page.on("request", lambda req: self.requests.append(req.url))
        page.on("requestfailed", self._failed)

    def _failed(self, request: Any) -> None:
        if request.failure == "net::ERR_ABORTED" and request.url.endswith("/events"):
            return  # the event stream of the run the page showed before (closed on purpose)
        self.errors.append(f"failed request {request.url}: {request.failure}")

    def _console(self, message: Any) -> None:
        self.console.append(f"{message.type}: {message.text}")
        if message.type in ("error", "assert"):
            self.errors.append(f"console {message.type}: {message.text}")

    def wait(self, expression: str, timeout_s: float = 20.0) -> Any:
        """Poll a JavaScript expression until it is truthy (page.evaluate is not subject to
        the page's Content-Security-Policy, as wait_for_function's eval would be)."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            value = self.page.evaluate(f"() => {expression}")
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {expression}; errors: {self.errors}")
            self.page.wait_for_timeout(50)

    def outside(self, allowed: tuple[str, ...]) -> list[str]:
        return [u for u in self.requests if not u.startswith(allowed)]


def _screenshot(watch: PageWatch, request: pytest.FixtureRequest, folder: Path) -> None:
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    path = folder / f"{name}.png"
    watch.page.screenshot(path=str(path))
    print(f"screenshot: {path}")


@pytest.fixture(scope="session")
def viewer_page(browser: Any, server: ViewerServer) -> Iterator[PageWatch]:
    """One page of the served viewer for the whole session (the tests switch runs in it)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    watch = PageWatch(page)
    page.goto(server.url)
    watch.wait("window.labtwin && window.labtwin.ready")
    watch.load_errors, watch.load_requests = list(watch.errors), list(watch.requests)
    yield watch
    context.close()


@pytest.fixture
def watched(
    viewer_page: PageWatch, request: pytest.FixtureRequest, artifacts_dir: Path
) -> Iterator[PageWatch]:
    """The served viewer's page, with what it logs and requests counted from this test on;
    a screenshot of it is kept after the test."""
    viewer_page.errors.clear()
    viewer_page.requests.clear()
    yield viewer_page
    _screenshot(viewer_page, request, artifacts_dir)


@pytest.fixture
def fresh_page(browser: Any, request: pytest.FixtureRequest, artifacts_dir: Path) -> Iterator[Any]:
    """A page of its own (a report from disk, a notebook cell); a screenshot is kept."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    watch = PageWatch(context.new_page())
    yield watch
    try:
        _screenshot(watch, request, artifacts_dir)
    finally:
        context.close()


@pytest.fixture
def live_run(viewer_root: Path) -> Iterator[Path]:
    """A copy of the campaign run under the server's folder, for tests that append to it."""
    path = viewer_root / "live-copy"
    shutil.copytree(viewer_root / "lj-campaigns", path)
    yield path
    shutil.rmtree(path)
