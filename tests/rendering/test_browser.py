"""The viewer and the report in a real browser (headless Debian chromium via Playwright).

Each test checks that the page logged no error and requested nothing outside the
server (or, for the report, outside its own file); screenshots are kept
(conftest.py says where).
"""

from __future__ import annotations

import base64
import io
import json
import time

import numpy as np
import pytest
import viewer_runs
from PIL import Image

import labtwin
from labtwin.rendering.notebook import measurement_html
from labtwin.rendering.report import write_report

LOCAL = ("http://127.0.0.1:", "data:", "blob:")


def drawn_fraction(png: bytes) -> float:
    """Share of pixels of an image that are not the white background."""
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    return float(1.0 - np.all(pixels > 245, axis=-1).mean())


def canvas_png(frame) -> bytes:
    """The 3D view's WebGL canvas as it is drawn (3Dmol keeps its drawing buffer)."""
    uri = frame.evaluate("() => window.labtwin.viewer.pngURI()")
    assert uri.startswith("data:image/png;base64,")
    return base64.b64decode(uri.split(",", 1)[1])


def open_run(watch, run: str) -> None:
    """Show ``run`` in the session's page, as choosing it in the run picker does."""
    watch.page.evaluate(
        "(n) => { history.replaceState(null, '', '#run=' + encodeURIComponent(n)); window.labtwin.open(n); }",
        run,
    )
    watch.wait("window.labtwin.ready && window.labtwin.state.runName === " + json.dumps(run))


def assert_clean(watch, allowed=LOCAL) -> None:
    assert not watch.errors, watch.errors
    outside = watch.outside(allowed)
    assert not outside, f"requests outside the page's origin: {outside}"


def structure_drawn(watch, key: str) -> float:
    """Wait for the 3D view to show record ``key``; the share of its canvas that is drawn."""
    watch.wait(f"window.labtwin.view.key === {json.dumps(key)} && window.labtwin.view.frames > 0")
    return drawn_fraction(canvas_png(watch.page))


# where a record's point is on the score chart, in the page's viewport (scrolled into it)
POINT_OF_RECORD = """(key) => {
    const u = window.labtwin.charts.scores;
    const i = u._spec.keys.indexOf(key);
    const v = u.data.slice(1).map((s) => s[i]).find((v) => v !== null);
    u.over.scrollIntoView({ block: "center" });
    const r = u.over.getBoundingClientRect();
    return [r.left + u.valToPos(u.data[0][i], "x"), r.top + u.valToPos(v, "y")];
}"""


def record_key(line: dict) -> str:
    return f"{line['campaign']}:{line['step']}:{line.get('uid') or ''}"


def test_page_loads_offline_and_draws_the_selected_structure(watched, server, viewer_root) -> None:
    # the session's page loaded without an error, and everything it asked for was local
    assert not watched.load_errors, watched.load_errors
    assert watched.load_requests
    assert all(u.startswith(server.url) or u.startswith("data:") for u in watched.load_requests)
    html = watched.page.content()  # and it names no other host
    assert "http://" not in html and "https://" not in html
    open_run(watched, "lj-campaigns")
    run = labtwin.runs.load(viewer_root / "lj-campaigns")
    first = record_key(run.record_lines[0])
    assert watched.page.evaluate("() => window.labtwin.state.selected") == first
    assert structure_drawn(watched, first) > 0.02  # an LJ13 cluster fills a few % of the view
    assert_clean(watched)


def test_charts_show_the_recorded_values(watched, server, viewer_root) -> None:
    open_run(watched, "lj-campaigns")
    run = labtwin.runs.load(viewer_root / "lj-campaigns")
    scores = watched.page.evaluate(
        "() => window.labtwin.charts.scores.data.slice(1).map(s => s.filter(v => v !== null))"
    )
    by_agent = {
        a: [r["score"] for r in run.record_lines if r["agent"] == a] for a in ("random", "grid")
    }
    assert scores == [by_agent["random"], by_agent["grid"]]
    energy = watched.page.evaluate(
        "() => { const u = window.labtwin.charts.observable; return [u.data.slice(1), u._spec.errors]; }"
    )
    values = [v for s in energy[0] for v in s if v is not None]
    errors = [e for s in energy[1] for e in s if e]
    lines = [r["measurement"]["observables"]["energy"] for r in run.record_lines]
    assert sorted(values) == sorted(o["value"] for o in lines)
    assert sorted(errors) == sorted(o["uncertainty"] for o in lines if o["uncertainty"])
    rows = watched.page.locator("#record-table tbody tr").count()
    assert rows == len(run.record_lines)
    assert watched.page.locator("#groups-table tbody tr").count() == 2  # the agents side by side
    assert_clean(watched)


def test_training_metrics_are_charted_named_ones_first(watched, server) -> None:
    open_run(watched, "train-chat")
    charts = watched.page.evaluate(
        "() => [...document.querySelectorAll('#metric-grid .chart')].map(c => c.dataset.chart)"
    )
    names = [c for c in charts if c.startswith("metric:")]
    evals = watched.page.evaluate("() => window.labtwin.charts['eval:eval_reward_mean'].data")
    assert evals == [[0, 3], [0.1, 0.4]]  # the evaluations before and after, as a curve
    assert names[:5] == [
        "metric:reward_mean",
        "metric:kl",
        "metric:clip_fraction",
        "metric:entropy",
        "metric:valid_fraction",
    ]
    assert "metric:time_split" in names
    expected = [viewer_runs.train_metrics(s) for s in (1, 2, 3)]
    for key in ("reward_mean", "kl", "clip_fraction", "entropy", "valid_fraction", "tokens_per_s"):
        data = watched.page.evaluate(f"() => window.labtwin.charts['metric:{key}'].data")
        assert data[0] == [1, 2, 3] and data[1] == pytest.approx([m[key] for m in expected])
    split = watched.page.evaluate("() => window.labtwin.charts['metric:time_split'].data.slice(1)")
    assert split[0] == pytest.approx([m["generation_s"] for m in expected])
    assert watched.page.locator("#evals tbody tr").count() == 2  # before and after training
    assert_clean(watched)


def test_clicking_a_chart_point_selects_its_structure_and_back(
    watched, server, viewer_root
) -> None:
    open_run(watched, "lj-campaigns")
    run = labtwin.runs.load(viewer_root / "lj-campaigns")
    target = run.record_lines[4]
    key = record_key(target)
    # the pixel of that record's point on the score chart, clicked with the mouse
    x, y = watched.page.evaluate(
        POINT_OF_RECORD,
        key,
    )
    watched.page.mouse.click(x, y)
    assert structure_drawn(watched, key) > 0.02
    assert (
        watched.page.locator("#selected-record")
        .inner_text()
        .startswith(f"campaign {target['campaign']} · step {target['step']}")
    )
    assert watched.page.locator("#record-table tr.selected").get_attribute("data-key") == key
    # and from the 3D view back: "next" moves the selection the charts draw
    watched.page.click("#next-structure")
    following = record_key(run.record_lines[5])
    assert structure_drawn(watched, following) > 0.02
    assert watched.page.evaluate("() => window.labtwin.state.selected") == following
    assert_clean(watched)


@pytest.mark.parametrize("step, kind", [(0, "molecule"), (1, "periodic cell")])
def test_molecules_and_crystals_draw(watched, server, viewer_root, step, kind) -> None:
    open_run(watched, "structures")
    run = labtwin.runs.load(viewer_root / "structures")
    key = record_key(run.record_lines[step])
    watched.page.evaluate("(k) => window.labtwin.select(k)", key)
    assert structure_drawn(watched, key) > 0.02
    assert kind in watched.page.locator("#structure-info").inner_text()
    if kind == "periodic cell":  # a trajectory: playback steps through its frames
        assert watched.page.evaluate("() => window.labtwin.view.frames") == 5
        watched.page.click("#play")
        watched.wait("window.labtwin.view.frame !== 4")
        watched.page.click("#play")
    assert_clean(watched)


def test_llm_text_renders_as_text_never_as_markup(watched, server, viewer_root) -> None:
    open_run(watched, "train-chat")
    run = labtwin.runs.load(viewer_root / "train-chat")
    watched.page.evaluate("(k) => window.labtwin.select(k)", record_key(run.record_lines[0]))
    watched.wait("document.querySelector('#transcript-messages .msg.current')")
    text = watched.page.locator("#transcript").inner_text()
    assert viewer_runs.SCRIPT_REPLY.split(" I try")[0] in text  # the tag, shown as text
    assert "<img src=x onerror=alert(1)>" in text
    assert "system brief" in text and "propose_experiment" in text and "reward" in text
    assert watched.page.locator("#transcript script, #transcript img").count() == 0
    assert watched.page.evaluate("() => window.__pwned") is None
    assert_clean(watched)


def test_a_record_appended_to_a_live_run_appears_without_reload(watched, server, live_run) -> None:
    open_run(watched, "live-copy")
    before = watched.page.evaluate("() => window.labtwin.currentRecords().length")
    watched.page.evaluate("() => { window.__same_page = true; }")
    # a line the writer is still writing is not shown (nor does it break anything) until
    # its end arrives
    records = live_run / "records.jsonl"
    row = json.loads(records.read_text().splitlines()[0])
    row.update(step=7, score=0.777, proposal={"written": "in two parts"})
    text = (json.dumps(row) + "\n").encode()
    with open(records, "ab") as f:
        f.write(text[:40])
        f.flush()
        watched.page.wait_for_timeout(700)
        assert watched.page.evaluate("() => window.labtwin.currentRecords().length") == before
        f.write(text[40:])
    watched.wait(f"document.querySelectorAll('#record-table tbody tr').length === {before + 1}")
    assert "in two parts" in watched.page.locator("#record-table tbody tr").last.inner_text()
    # and a campaign a resumed run store appends, with its structure
    line = viewer_runs.append_campaign(
        live_run, {"start_temperature": 0.25, "end_temperature": 0.01, "n_stages": 3}
    )
    watched.wait(f"document.querySelectorAll('#record-table tbody tr').length === {before + 2}")
    assert watched.page.evaluate("() => window.__same_page") is True
    last = watched.page.locator("#record-table tbody tr").last
    assert last.get_attribute("data-key") == record_key(line)
    assert '"n_stages":3' in last.inner_text().replace(" ", "")
    scores = watched.page.evaluate("() => window.labtwin.charts.scores.data.slice(1).flat()")
    assert line["score"] in scores
    assert watched.page.locator("#campaign-table tbody tr").count() == 5  # the new campaign too
    watched.page.evaluate("(k) => window.labtwin.select(k)", record_key(line))
    assert structure_drawn(watched, record_key(line)) > 0.02
    assert_clean(watched)


def test_the_report_opens_from_disk_with_the_same_views(
    fresh_page, viewer_root, artifacts_dir
) -> None:
    watched = fresh_page
    out = write_report(viewer_root / "train-chat", artifacts_dir / "report-train-chat.html")
    run = labtwin.runs.load(viewer_root / "train-chat")
    watched.page.goto(out.resolve().as_uri())
    watched.wait("window.labtwin && window.labtwin.ready")
    first = record_key(run.record_lines[0])
    assert structure_drawn(watched, first) > 0.02
    data = watched.page.evaluate("() => window.labtwin.charts['metric:reward_mean'].data[1]")
    assert data == pytest.approx([viewer_runs.train_metrics(s)["reward_mean"] for s in (1, 2, 3)])
    target = next(
        r
        for r in run.record_lines
        if r["campaign"] == 1 and "structure_positions" in r["measurement"]["artifacts"]
    )
    x, y = watched.page.evaluate(
        POINT_OF_RECORD,
        record_key(target),
    )
    watched.page.mouse.click(x, y)
    assert structure_drawn(watched, record_key(target)) > 0.02
    assert watched.page.locator("#transcript script, #transcript img").count() == 0
    assert watched.page.evaluate("() => window.__pwned") is None
    assert_clean(watched, allowed=("file://", "data:", "blob:"))
    assert [u for u in watched.requests if not u.startswith("data:")] == [out.resolve().as_uri()]


def test_a_measurement_shows_its_structure_in_a_notebook_cell(fresh_page) -> None:
    watched = fresh_page
    m = labtwin.Measurement(
        "ok", {"energy": labtwin.Value(-1.0, "eV", 0.1)}, artifacts=viewer_runs.molecule_structure()
    )
    watched.page.set_content(f"<html><body>{measurement_html(m)}</body></html>")
    watched.page.locator("iframe").wait_for()
    frame = watched.page.frames[1]
    deadline = time.monotonic() + 20
    while not frame.evaluate("() => !!(window.labtwin && window.labtwin.view.frames > 0)"):
        assert time.monotonic() < deadline, watched.errors
        watched.page.wait_for_timeout(50)
    assert drawn_fraction(canvas_png(frame)) > 0.02
    assert "energy" in frame.locator("#observables").inner_text()
    assert_clean(watched, allowed=("about:", "data:", "blob:"))
