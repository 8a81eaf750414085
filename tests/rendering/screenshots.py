"""Make the screenshots of docs/viewer.md: ``python tests/rendering/screenshots.py docs/images``.

Writes the test runs of :mod:`viewer_runs` to a temporary folder, serves them, and
photographs the viewer and the report in headless chromium (as the tests do).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import viewer_runs  # noqa: E402
from conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

from labtwin.rendering.report import write_report  # noqa: E402
from labtwin.rendering.viewer import ViewerServer  # noqa: E402


def wait(page, expression: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(f"() => {expression}"):
        if time.monotonic() > deadline:
            raise TimeoutError(expression)
        page.wait_for_timeout(50)


def show(page, run: str, index: int) -> None:
    """Show ``run`` with its ``index``-th record that has a structure selected."""
    page.evaluate("(n) => { location.hash = '#run=' + encodeURIComponent(n); }", run)
    wait(page, f"window.labtwin.ready && window.labtwin.state.runName === '{run}'")
    page.evaluate(
        """(i) => { const lt = window.labtwin;
        const rs = lt.currentRecords().filter((r) => (r.measurement.artifacts || {}).structure_positions);
        lt.select(lt.recordKey(rs[i])); }""",
        index,
    )
    wait(page, "window.labtwin.view.frames > 0 && !window.labtwin.view.loading")
    page.wait_for_timeout(400)


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="labtwin-screenshots-"))
    viewer_runs.campaign_run(root / "lj-campaigns")
    viewer_runs.chat_run(root / "train-chat")
    viewer_runs.structures_run(root / "structures")
    server = ViewerServer(root).start()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 1100})
        page.goto(server.url)
        wait(page, "window.labtwin && window.labtwin.ready")
        # a campaign run: two agents side by side, a record picked on the score chart
        show(page, "lj-campaigns", 4)
        page.screenshot(path=str(out / "viewer-campaigns.png"))
        # a training run: metrics, and the transcript of the selected campaign
        show(page, "train-chat", 1)
        page.screenshot(path=str(out / "viewer-training.png"))
        page.locator("#transcript").screenshot(path=str(out / "viewer-transcript.png"))
        # a crystal with its cell, and a molecule
        show(page, "structures", 1)
        page.locator("#structure").screenshot(path=str(out / "viewer-crystal.png"))
        show(page, "structures", 0)
        page.locator("#structure").screenshot(path=str(out / "viewer-molecule.png"))
        # the report, from disk
        report = write_report(root / "lj-campaigns", root / "report.html")
        page.goto(report.resolve().as_uri())
        wait(page, "window.labtwin && window.labtwin.ready && window.labtwin.view.frames > 0")
        page.wait_for_timeout(400)
        page.screenshot(path=str(out / "report.png"))
        browser.close()
    server.stop()
    print(f"screenshots written to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images"))
