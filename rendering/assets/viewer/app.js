/* labtwin run viewer: one run's campaigns, training metrics, evaluation, structures and
 * transcripts.
 *
 * Two data sources, one page: a served page tails the run through the viewer's API
 * (server-sent events, one "lines" event per batch of new JSONL lines); a self-contained
 * page (report, notebook) reads everything from its <script id="labtwin-data"> block.
 * A run that `labtwin eval` evaluated also gets its eval/summary.json (an "evaluation"
 * event, sent again whenever the file changes; the report's data block carries it).
 * Every text that comes from a run is put in the page with textContent (never as markup).
 * window.labtwin exposes the state, the charts and the 3D viewer for tests and for a
 * person at the console.
 */
(function () {
  "use strict";

  const ELEMENTS = ("X H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni " +
    "Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr " +
    "Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac " +
    "Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl Mc Lv Ts Og").split(" ");
  // training metrics shown first, in this order (agents/train.py logs them); every other
  // numeric metric follows
  const NAMED_METRICS = ["reward_mean", "kl", "clip_fraction", "entropy", "valid_fraction",
    "reward_std", "loss", "grad_norm", "ratio_mean", "groups_kept", "tokens_per_s",
    "simulation_share"];
  const TIME_METRICS = ["generation_s", "simulation_s", "optimisation_s"];
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#7f7f7f"];
  const MAX_TABLE_ROWS = 1000;
  // x axes count records, steps and campaigns: integer ticks only
  const INTEGER_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000];

  // ---- DOM helpers: text is always a text node ------------------------------------------

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  // replaceChildren would write a null child as the text "null"
  function fill(el, ...children) {
    el.replaceChildren();
    append(el, children);
  }

  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    if (!isFinite(v)) return String(v);
    if (v !== 0 && (Math.abs(v) >= 1e6 || Math.abs(v) < 1e-3)) return v.toExponential(2);
    return String(Number(v.toPrecision(digits || 4)));
  }

  function compact(value, limit) {
    let text;
    try { text = typeof value === "string" ? value : JSON.stringify(value); } catch (e) { text = String(value); }
    if (text === undefined) text = "";
    limit = limit || 90;
    return text.length > limit ? text.slice(0, limit - 1) + "…" : text;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  // ---- state --------------------------------------------------------------------------------

  const state = {
    mode: document.getElementById("labtwin-data") ? "inline" : "live",
    runs: [],
    runName: null,
    config: {},
    campaigns: new Map(), // id -> {start, end}
    records: [], // record lines in the order they were written
    metrics: [],
    transcripts: [], // transcript lines
    structures: {}, // inline pages: structure_positions path -> structure
    omitted: 0,
    evaluation: null, // {summary: eval/summary.json, runs: {campaign folder: run name}} or null
    evaluationVersion: 0, // counts the evaluations received (the section redraws on a new one)
    selected: null, // record key
    observable: null,
    campaignFilter: "all",
    connected: false,
    synced: false, // the served page has received every line written before it connected
  };
  const api = {
    state, charts: {}, viewer: null, ready: false, events: 0, renders: 0,
    view: { key: null, frame: 0, frames: 0, loading: false, error: null },
    select, currentRecords, recordKey,
    open: (name) => openRun(name), // the served page: show another run of the folder
  };
  window.labtwin = api;

  function recordKey(r) { return r.campaign + ":" + r.step + ":" + (r.uid || ""); }

  // a resumed run that ran a campaign id again supersedes the earlier attempt (labtwin.runs.load)
  function currentUid(campaign) {
    const c = state.campaigns.get(campaign);
    return c && c.start ? (c.start.uid ?? null) : undefined;
  }

  function currentRecords() {
    return state.records.filter((r) => {
      const uid = currentUid(r.campaign);
      return uid === undefined || (r.uid ?? null) === uid;
    });
  }

  function transcriptOf(campaign) {
    const uid = currentUid(campaign);
    let found = null;
    for (const t of state.transcripts) {
      if (t.campaign === campaign && (uid === undefined || (t.uid ?? null) === uid)) found = t;
    }
    return found;
  }

  function groupOf(r) {
    const c = state.campaigns.get(r.campaign);
    const start = (c && c.start) || {};
    const g = r.agent ?? r.policy ?? start.agent ?? start.policy ?? state.config.agent;
    if (g !== undefined && g !== null) return String(g);
    return r.train_step !== undefined ? "training campaigns" : "campaigns";
  }

  function structurePaths(r) {
    const a = (r.measurement || {}).artifacts || {};
    if (typeof a !== "object" || !a.structure_numbers || !a.structure_positions) return null;
    const out = {};
    for (const k of ["numbers", "positions", "cell", "bonds"]) {
      if (typeof a["structure_" + k] === "string") out[k] = a["structure_" + k];
    }
    return out.numbers && out.positions ? out : null;
  }

  function ingest(stream, lines) {
    api.events += 1;
    if (stream === "campaigns") {
      for (const line of lines) {
        const id = line.campaign;
        const entry = state.campaigns.get(id) || {};
        if (line.event === "start") { entry.start = line; entry.end = null; }
        else if (line.event === "end") entry.end = line;
        state.campaigns.set(id, entry);
      }
    } else if (stream === "records") state.records.push(...lines);
    else if (stream === "metrics") state.metrics.push(...lines);
    else if (stream === "transcripts") state.transcripts.push(...lines);
    if (!state.selected) {
      const first = currentRecords().find((r) => structurePaths(r));
      if (first) state.selected = recordKey(first);
    }
    schedule();
  }

  function resetData() {
    state.campaigns = new Map();
    state.records = [];
    state.metrics = [];
    state.transcripts = [];
    state.selected = null;
  }

  let pending = null;
  function schedule() {
    if (pending) return;
    pending = setTimeout(() => { pending = null; render(); }, 60);
  }

  // ---- layout -------------------------------------------------------------------------------

  const root = document.getElementById("app");
  const el = {};

  function layout() {
    el.recordFilter = null;
    el.observableSelect = null;
    el.summary = h("div", { id: "summary" });
    el.training = h("section", { id: "training", hidden: true });
    el.evaluation = h("section", { id: "evaluation", hidden: true });
    el.evaluationShown = null;
    el.campaignCharts = h("section", { id: "campaign-charts" });
    el.campaignTable = h("section", { id: "campaigns" });
    el.recordTable = h("section", { id: "records" });
    el.measurement = h("section", { id: "measurement" });
    el.transcript = h("section", { id: "transcript" });
    if (!el.header) { // the header and the 3D view (its WebGL context) are made once
      el.title = h("h1", {}, "labtwin run");
      el.badge = h("span", { class: "badge", id: "live-badge" }, "");
      el.runSelect = h("select", { id: "run-select", onchange: (e) => { location.hash = "#run=" + encodeURIComponent(e.target.value); } });
      el.header = h("header", {}, el.title, el.badge, h("label", { class: "run-picker" }, "run ", el.runSelect));
      el.structure = h("div", { id: "structure-view", class: "structure-view" });
      el.structureInfo = h("div", { id: "structure-info", class: "muted" }, "no structure selected");
      el.atomInfo = h("div", { id: "atom-info", class: "muted" });
      el.frame = h("input", { id: "frame-slider", type: "range", min: 0, max: 0, value: 0, disabled: true,
        oninput: (e) => showFrame(Number(e.target.value)) });
      el.frameLabel = h("span", { id: "frame-label", class: "muted" }, "");
      el.play = h("button", { id: "play", type: "button", disabled: true, onclick: togglePlay }, "play");
      el.structurePanel = h("section", { id: "structure" },
        h("h2", {}, "Structure"), el.structureInfo, el.structure,
        h("div", { class: "controls" },
          h("button", { id: "prev-structure", type: "button", onclick: () => step(-1) }, "◀ prev"),
          h("button", { id: "next-structure", type: "button", onclick: () => step(1) }, "next ▶"),
          h("button", { id: "reset-view", type: "button", onclick: () => api.viewer && (api.viewer.zoomTo(), api.viewer.render()) }, "reset view"),
          el.play, el.frame, el.frameLabel),
        el.atomInfo);
    }
    const main = h("div", { class: "main" }, el.summary, el.evaluation, el.training, el.campaignCharts,
      el.campaignTable, el.recordTable);
    const side = h("div", { class: "side" }, el.structurePanel, el.measurement, el.transcript);
    fill(root, el.header, h("div", { class: "columns" }, main, side));
  }

  // ---- rendering ---------------------------------------------------------------------------

  function render() {
    api.renders += 1;
    const records = currentRecords();
    const keyed = new Map(records.map((r) => [recordKey(r), r]));
    if (state.selected && !keyed.has(state.selected)) state.selected = null;
    renderHeader(records);
    const stats = campaignStats(records);
    renderSummary(records, stats);
    renderEvaluation();
    renderTraining();
    renderCampaignCharts(records, stats);
    renderCampaignTable(stats);
    renderRecordTable(records);
    renderSelection(keyed.get(state.selected) || null);
    api.ready = state.mode === "inline" || state.synced;
  }

  function renderHeader(records) {
    const c = state.config;
    const task = String(c.task || "?").replace(/^labtwin\//, "");
    const who = c.kind === "train" ? "GRPO training" + (c.model ? " · " + c.model : "") : (c.agent || c.kind || "");
    el.title.textContent = task + (who ? " · " + who : "");
    document.title = "labtwin · " + (state.runName || task);
    if (state.mode === "inline") el.badge.textContent = "report · " + records.length + " records";
    else el.badge.textContent = (state.connected ? "● live" : "○ disconnected") + " · " + records.length + " records";
    el.badge.className = "badge " + (state.mode === "inline" ? "static" : state.connected ? "live" : "off");
    const picker = el.runSelect.parentElement;
    picker.hidden = state.mode === "inline" || state.runs.length < 2;
    const names = state.runs.map((r) => r.name);
    if (el.runSelect.options.length !== names.length) {
      fill(el.runSelect, ...state.runs.map((r) =>
        h("option", { value: r.name }, r.name + (r.task ? " (" + String(r.task).replace(/^labtwin\//, "") + ")" : ""))));
    }
    if (state.runName) el.runSelect.value = state.runName;
  }

  function campaignStats(records) {
    const stats = new Map();
    for (const r of records) {
      let s = stats.get(r.campaign);
      if (!s) {
        s = { id: r.campaign, group: groupOf(r), spent: 0, cost: 0, unit: "", best: null, reward: 0,
          records: 0, invalid: 0, bestKey: null, lastKey: null, curve: [], answered: false };
        stats.set(r.campaign, s);
      }
      const m = r.measurement || {};
      s.records += 1;
      if (r.kind !== "analysis") s.spent += 1;
      if (m.status === "invalid") s.invalid += 1;
      if (r.kind === "answer" && m.status === "ok") s.answered = true;
      s.cost += Number(m.cost) || 0;
      if (m.cost_unit) s.unit = m.cost_unit;
      s.reward += Number(r.reward) || 0;
      if (r.kind === "experiment" && typeof r.score === "number") {
        if (s.best === null || r.score > s.best) { s.best = r.score; s.bestKey = recordKey(r); }
      }
      if (r.kind !== "analysis") s.curve.push(s.best);
      s.lastKey = recordKey(r);
    }
    for (const [id, c] of state.campaigns) {
      if (!stats.has(id) && c.start) {
        stats.set(id, { id, group: groupOf({ campaign: id }), spent: 0, cost: 0, unit: "", best: null,
          reward: 0, records: 0, invalid: 0, bestKey: null, lastKey: null, curve: [] });
      }
    }
    return [...stats.values()].sort((a, b) => a.id - b.id);
  }

  function kv(label, value, id) {
    return h("div", { class: "kv", id: id || null }, h("span", { class: "k" }, label), h("span", { class: "v" }, value));
  }

  function renderSummary(records, stats) {
    const c = state.config;
    const count = (kind) => records.filter((r) => r.kind === kind).length;
    const cost = stats.reduce((a, s) => a + s.cost, 0);
    const unit = (stats.find((s) => s.unit) || {}).unit || "";
    const budgets = [...state.campaigns.values()].map((x) => x.start && x.start.budget).filter((b) => b);
    const budget = budgets.length ? budgets[0] : c.budget;
    const spent = stats.reduce((a, s) => a + s.spent, 0);
    const facts = [
      kv("task", String(c.task || "?")),
      kv("kind", String(c.kind || "?")),
      c.agent ? kv("agent", String(c.agent)) : null,
      c.model ? kv("model", String(c.model)) : null,
      kv("created", String(c.created || "?")),
      kv("campaigns", String(stats.length), "n-campaigns"),
      kv("records", records.length + " (" + count("experiment") + " experiments, " + count("answer") +
        " answers, " + count("analysis") + " analysis, " + records.filter((r) => (r.measurement || {}).status === "invalid").length + " invalid)", "n-records"),
      kv("budget spent", budget ? spent + " of " + budget * stats.length + " experiments (" + budget + " per campaign)" : String(spent), "budget-spent"),
      kv("cost", fmt(cost) + (unit ? " " + unit : ""), "cost-total"),
    ];
    if (state.omitted) facts.push(kv("structures", state.omitted + " left out of this page (size)"));
    const groups = new Map();
    for (const s of stats) {
      const g = groups.get(s.group) || { n: 0, best: [], reward: [], records: 0, invalid: 0 };
      g.n += 1;
      if (s.best !== null) g.best.push(s.best);
      g.reward.push(s.reward);
      g.records += s.records;
      g.invalid += s.invalid;
      groups.set(s.group, g);
    }
    const mean = (a) => (a.length ? a.reduce((x, y) => x + y, 0) / a.length : null);
    const children = [h("h2", {}, "Run"), h("div", { class: "facts" }, facts)];
    if (groups.size > 1) {
      children.push(h("h3", {}, "Side by side"), table(["policy", "campaigns", "mean best score", "mean campaign reward", "valid calls"],
        [...groups.entries()].map(([name, g]) => [name, g.n, fmt(mean(g.best)), fmt(mean(g.reward)),
          g.records ? Math.round(100 * (1 - g.invalid / g.records)) + " %" : "–"]), "groups-table"));
    }
    fill(el.summary, ...children);
  }

  function table(headers, rows, id, rowAttrs) {
    return h("table", { id: id || null },
      h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
      h("tbody", {}, rows.map((row, i) => h("tr", rowAttrs ? rowAttrs(i) : {}, row.map((x) => h("td", {}, x))))));
  }

  // ---- charts (uPlot) -------------------------------------------------------------------------

  function chartWidth(container) {
    return Math.max(260, (container.clientWidth || 480) - 8);
  }

  /* One chart, kept across renders; `spec` = {title, xlabel, ylabel, series: [{label, color,
   * points, line}], data, keys (x index -> record key), errors (per series), onclick}. */
  function chart(name, container, spec) {
    let holder = container.querySelector('[data-chart="' + name + '"]');
    if (!holder) {
      holder = h("div", { class: "chart", "data-chart": name }, h("div", { class: "chart-title" }, spec.title));
      container.appendChild(holder);
    }
    holder.firstChild.textContent = spec.title;
    let u = api.charts[name];
    const signature = JSON.stringify(spec.series.map((s) => [s.label, s.points, s.line])) + spec.ylabel;
    if (u && u._signature !== signature) { u.destroy(); u = null; }
    if (u) {
      u._spec = spec;
      u.setData(spec.data);
      return u;
    }
    const series = [{ label: spec.xlabel }];
    for (const s of spec.series) {
      series.push({
        label: s.label, stroke: s.color, width: s.line ? 1.5 : 0,
        paths: s.line ? undefined : () => null,
        points: { show: s.points !== false, size: s.points === false ? 0 : 6, fill: s.color, stroke: s.color },
        spanGaps: !!s.line,
        value: (self, v) => fmt(v),
      });
    }
    const opts = {
      width: chartWidth(holder), height: spec.height || 220,
      scales: { x: { time: false }, y: { range: (self, lo, hi) => yRange(self, lo, hi) } },
      axes: [{ label: spec.xlabel, size: 40, incrs: INTEGER_STEPS }, { label: spec.ylabel, size: 60, values: (self, ticks) => ticks.map((t) => fmt(t, 3)) }],
      series,
      legend: { show: spec.series.length > 1, live: true },
      cursor: { points: { size: 9 }, drag: { x: false, y: false } },
      hooks: { draw: [drawErrorBars, drawSelection] },
    };
    u = new uPlot(opts, spec.data, holder);
    u._signature = signature;
    u._spec = spec;
    u._name = name;
    u.over.addEventListener("click", () => {
      const idx = u.cursor.idx;
      const sp = u._spec;
      if (idx === null || idx === undefined || !sp.onclick) return;
      sp.onclick(idx, u);
    });
    api.charts[name] = u;
    return u;
  }

  function yRange(u, lo, hi) {
    const spec = u._spec;
    if (spec && spec.yrange) return spec.yrange;
    if (spec && spec.errors) {
      for (let s = 1; s < u.data.length; s++) {
        const err = spec.errors[s - 1] || [];
        u.data[s].forEach((v, i) => {
          if (v === null || v === undefined || !err[i]) return;
          lo = Math.min(lo, v - err[i]);
          hi = Math.max(hi, v + err[i]);
        });
      }
    }
    if (lo === null || hi === null || !isFinite(lo) || !isFinite(hi)) return [0, 1];
    if (lo === hi) { const d = Math.abs(lo) * 0.1 || 1; return [lo - d, hi + d]; }
    const pad = (hi - lo) * 0.08;
    return [lo - pad, hi + pad];
  }

  function drawErrorBars(u) {
    const spec = u._spec;
    if (!spec || !spec.errors) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.lineWidth = 1.2 * devicePixelRatio;
    for (let s = 1; s < u.data.length; s++) {
      const err = spec.errors[s - 1] || [];
      ctx.strokeStyle = spec.series[s - 1].color;
      u.data[s].forEach((v, i) => {
        if (v === null || v === undefined || !err[i]) return;
        const x = u.valToPos(u.data[0][i], "x", true);
        const y0 = u.valToPos(v - err[i], "y", true);
        const y1 = u.valToPos(v + err[i], "y", true);
        const cap = 3 * devicePixelRatio;
        ctx.beginPath();
        ctx.moveTo(x, y0); ctx.lineTo(x, y1);
        ctx.moveTo(x - cap, y0); ctx.lineTo(x + cap, y0);
        ctx.moveTo(x - cap, y1); ctx.lineTo(x + cap, y1);
        ctx.stroke();
      });
    }
    ctx.restore();
  }

  function drawSelection(u) {
    const spec = u._spec;
    if (!spec || !spec.keys || !state.selected) return;
    const idx = spec.selectedIndex ? spec.selectedIndex(state.selected) : spec.keys.indexOf(state.selected);
    if (idx < 0) return;
    for (let s = 1; s < u.data.length; s++) {
      const v = u.data[s][idx];
      if (v === null || v === undefined) continue;
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "#000";
      ctx.lineWidth = 2 * devicePixelRatio;
      ctx.beginPath();
      ctx.arc(u.valToPos(u.data[0][idx], "x", true), u.valToPos(v, "y", true), 7 * devicePixelRatio, 0, 2 * Math.PI);
      ctx.stroke();
      ctx.restore();
    }
  }

  function groupSeries(groups) {
    return groups.map((g, i) => ({ label: g, color: COLORS[i % COLORS.length], points: true, line: false }));
  }

  function renderCampaignCharts(records, stats) {
    const box = el.campaignCharts;
    if (!box.querySelector("h2")) {
      el.observableSelect = h("select", { id: "observable-select", onchange: (e) => { state.observable = e.target.value; schedule(); } });
      box.append(h("h2", {}, "Campaigns"), h("label", { class: "muted" }, "observable with error bars ", el.observableSelect),
        h("div", { class: "chart-grid", id: "campaign-chart-grid" }));
    }
    const grid = box.querySelector("#campaign-chart-grid");
    const obsGrid = grid;
    const groups = [...new Set(records.map(groupOf))];
    if (!groups.length) groups.push("campaigns");
    const series = groupSeries(groups);

    // score of every scored record, in run order; click selects the record
    const scored = records.map((r, i) => [r, i + 1]).filter(([r]) => typeof r.score === "number");
    const xs = scored.map(([, n]) => n);
    const keys = scored.map(([r]) => recordKey(r));
    const ys = groups.map((g) => scored.map(([r]) => (groupOf(r) === g ? r.score : null)));
    chart("scores", grid, { title: "score of each experiment", xlabel: "record #", ylabel: "score",
      series, data: [xs, ...ys], keys, onclick: (idx) => select(keys[idx]) });

    // best score so far against experiments spent, mean over each group's campaigns
    const longest = Math.max(0, ...stats.map((s) => s.curve.length));
    const steps = Array.from({ length: longest }, (_, i) => i + 1);
    const means = groups.map((g) => steps.map((_, i) => {
      const vals = stats.filter((s) => s.group === g && s.curve.length > i && s.curve[i] !== null).map((s) => s.curve[i]);
      return vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : null;
    }));
    chart("best_so_far", grid, { title: "best score so far (mean over campaigns)", xlabel: "experiments spent",
      ylabel: "best score", series: groups.map((g, i) => ({ label: g, color: COLORS[i % COLORS.length], points: true, line: true })),
      data: [steps, ...means] });

    // each campaign's reward; click selects the campaign's best experiment
    const cx = stats.map((s) => s.id);
    const ckeys = stats.map((s) => s.bestKey || s.lastKey);
    chart("campaign_reward", grid, { title: "campaign reward", xlabel: "campaign", ylabel: "reward (sum)", series,
      data: [cx, ...groups.map((g) => stats.map((s) => (s.group === g ? s.reward : null)))],
      keys: ckeys, selectedIndex: (key) => cx.indexOf(Number(String(key).split(":")[0])),
      onclick: (idx) => ckeys[idx] && select(ckeys[idx]) });

    // one observable with its error bars
    const names = [];
    for (const r of records) for (const k of Object.keys((r.measurement || {}).observables || {})) if (!names.includes(k)) names.push(k);
    if (el.observableSelect.options.length !== names.length) {
      fill(el.observableSelect, ...names.map((n) => h("option", { value: n }, n)));
    }
    if (!names.includes(state.observable)) state.observable = names[0] || null;
    if (state.observable) el.observableSelect.value = state.observable;
    const name = state.observable;
    const measured = records.map((r, i) => [r, i + 1]).filter(([r]) => ((r.measurement || {}).observables || {})[name]);
    const okeys = measured.map(([r]) => recordKey(r));
    const unit = measured.length ? measured[0][0].measurement.observables[name].unit : "";
    chart("observable", obsGrid, { title: name ? "measured " + name + " ± 1σ" : "no observables yet", xlabel: "record #",
      ylabel: (name || "") + (unit ? " [" + unit + "]" : ""), series,
      data: [measured.map(([, n]) => n), ...groups.map((g) => measured.map(([r]) => (groupOf(r) === g ? r.measurement.observables[name].value : null)))],
      errors: groups.map((g) => measured.map(([r]) => (groupOf(r) === g ? r.measurement.observables[name].uncertainty || 0 : 0))),
      keys: okeys, onclick: (idx) => select(okeys[idx]) });
  }

  function metricKeys(lines) {
    const keys = new Set();
    for (const m of lines) for (const [k, v] of Object.entries(m)) if (typeof v === "number" && k !== "step" && k !== "time") keys.add(k);
    const named = NAMED_METRICS.filter((k) => keys.has(k));
    const time = TIME_METRICS.filter((k) => keys.has(k));
    const rest = [...keys].filter((k) => !named.includes(k) && !time.includes(k)).sort();
    return { named, time, rest };
  }

  function renderTraining() {
    const lines = state.metrics;
    el.training.hidden = !lines.length;
    if (!lines.length) return;
    if (!el.training.querySelector("h2")) {
      el.training.append(h("h2", {}, "Training"), h("div", { id: "eval-table" }), h("div", { class: "chart-grid", id: "metric-grid" }));
    }
    const train = lines.filter((m) => m.phase === undefined || m.phase === "train");
    const evals = lines.filter((m) => m.phase !== undefined && m.phase !== "train");
    const evalBox = el.training.querySelector("#eval-table");
    if (evals.length) {
      const cols = [...new Set(evals.flatMap((m) => Object.keys(m).filter((k) => typeof m[k] === "number" && k !== "time")))];
      fill(evalBox, h("h3", {}, "Evaluations"), table(["phase", ...cols], evals.map((m) => [String(m.phase), ...cols.map((k) => fmt(m[k]))]), "evals"));
    } else fill(evalBox);
    const grid = el.training.querySelector("#metric-grid");
    // evaluations during training (the same fixed campaigns at several steps): their curves
    const evalKeys = ["eval_reward_mean", "eval_success_rate", "eval_valid_fraction"];
    if (evals.length > 1) {
      const ordered = [...evals].sort((a, b) => a.step - b.step);
      for (const k of evalKeys.filter((key) => ordered.some((m) => typeof m[key] === "number"))) {
        chart("eval:" + k, grid, { title: k + " (evaluations)", xlabel: "step", ylabel: k, height: 150,
          series: [{ label: k, color: COLORS[1], points: true, line: true }],
          data: [ordered.map((m) => m.step), ordered.map((m) => (typeof m[k] === "number" ? m[k] : null))] });
      }
    }
    const { named, time, rest } = metricKeys(train);
    const steps = train.map((m) => m.step);
    const pick = (idx) => selectStep(steps[idx]);
    for (const k of [...named, ...(time.length ? ["__time"] : []), ...rest]) {
      if (k === "__time") {
        chart("metric:time_split", grid, { title: "time split per step", xlabel: "step", ylabel: "seconds", height: 170,
          series: time.map((t, i) => ({ label: t, color: COLORS[i], points: true, line: true })),
          data: [steps, ...time.map((t) => train.map((m) => (typeof m[t] === "number" ? m[t] : null)))], onclick: pick });
      } else {
        chart("metric:" + k, grid, { title: k, xlabel: "step", ylabel: k, height: 150,
          series: [{ label: k, color: COLORS[0], points: true, line: true }],
          data: [steps, train.map((m) => (typeof m[k] === "number" ? m[k] : null))], onclick: pick });
      }
    }
  }

  // a click on a training curve selects the best experiment of that step's campaigns
  function selectStep(stepNo) {
    let best = null;
    for (const r of currentRecords()) {
      if (r.train_step !== stepNo) continue;
      if (!best || (typeof r.score === "number" && (typeof best.score !== "number" || r.score > best.score))) best = r;
    }
    if (best) select(recordKey(best));
  }

  // ---- the evaluation (labtwin eval: eval/summary.json) -------------------------------------

  function finite(v) { return typeof v === "number" && isFinite(v) ? v : null; }

  // curves with their own x values ([{x, y, e}]) on one x axis (the union), gaps as null
  function aligned(curves) {
    const xs = [...new Set(curves.flatMap((c) => c.x.filter((x) => finite(x) !== null)))].sort((a, b) => a - b);
    const at = (c, arr, missing) => {
      const index = new Map(c.x.map((x, i) => [x, i]));
      return xs.map((x) => (index.has(x) ? finite((arr || [])[index.get(x)]) ?? missing : missing));
    };
    return { data: [xs, ...curves.map((c) => at(c, c.y, null))], errors: curves.map((c) => at(c, c.e, 0)) };
  }

  function plusMinus(mean, sem) {
    return fmt(mean) + (finite(sem) !== null ? " ± " + fmt(sem, 2) : "");
  }

  function renderEvaluation() {
    const box = el.evaluation;
    const ev = state.evaluation;
    box.hidden = !ev;
    if (!ev || el.evaluationShown === state.evaluationVersion) return;
    el.evaluationShown = state.evaluationVersion;
    const s = ev.summary || {};
    const runs = ev.runs || {};
    if (!box.querySelector("h2")) {
      box.append(h("h2", {}, "Evaluation"), h("div", { class: "facts", id: "evaluation-facts" }),
        h("div", { class: "chart-grid", id: "evaluation-chart-grid" }), h("div", { id: "evaluation-agents" }));
    }
    const K = s.samples;
    fill(box.querySelector("#evaluation-facts"),
      kv("task", String(s.task ?? "?")),
      kv("held-out campaigns", String(s.campaigns ?? "?") + " × " + String(K ?? "?") + " samples (K = " + String(K ?? "?") + ")"),
      kv("budget", String(s.budget ?? "?") + " experiments"),
      kv("success", s.success_threshold !== null && s.success_threshold !== undefined ? "score ≥ " + fmt(s.success_threshold) : (s.success_predicate ? "the lab's own predicate" : "none")),
      kv("hack samples", String(s.hack_samples ?? "–") + " per campaign (impossible variant)"),
      kv("seed", String(s.seed ?? "–")));
    const agents = Object.entries(s.agents || {}).map(([key, a]) => [String((a && a.name) ?? key), a || {}]);
    const shown = agents.filter(([, a]) => a.pass_at_k);
    const series = shown.map(([name], i) => ({ label: name, color: COLORS[i % COLORS.length], points: true, line: true }));
    const grid = box.querySelector("#evaluation-chart-grid");
    const curve = (a, key, x, y, e) => ({ x: (a[key] || {})[x] || [], y: (a[key] || {})[y] || [], e: (a[key] || {})[e] || [] });
    const charts = [
      ["evaluation:pass_at_k", "pass@k ± s.e. (at least one of k samples succeeds)", "k", "pass@k", "pass_at_k", "k", "mean", "sem", [-0.03, 1.03]],
      ["evaluation:pass_hat_k", "pass^k ± s.e. (all k samples succeed)", "k", "pass^k", "pass_hat_k", "k", "mean", "sem", [-0.03, 1.03]],
      ["evaluation:efficiency", "sample efficiency: mean best score ± s.e.", "experiments spent", "best score", "experiments_curve", "experiments", "best_mean", "best_sem", null],
    ];
    for (const [name, title, xlabel, ylabel, key, x, y, e, yrange] of charts) {
      const { data, errors } = aligned(shown.map(([, a]) => curve(a, key, x, y, e)));
      chart(name, grid, { title, xlabel, ylabel, series, data, errors, yrange, height: 200 });
    }
    const link = (folder, label) => {
      if (!runs[folder]) return null;
      if (state.mode === "inline") return h("span", { class: "muted", title: "eval/campaigns/" + folder + "/" }, "eval/campaigns/" + folder + "/");
      return h("a", { href: "#run=" + encodeURIComponent(runs[folder]), class: "eval-run", "data-run": runs[folder] }, label);
    };
    const rows = agents.map(([name, a]) => {
      const campaigns = [link(name, "campaigns"), link(name + "-impossible", "impossible")].filter((x) => x);
      const runsCell = campaigns.length ? h("span", { class: "eval-runs" }, campaigns.map((c, i) => [i ? " · " : "", c])) : "–";
      if (!a.pass_at_k) return [name, String(a.kind ?? ""), h("span", { class: "muted" }, "skipped: " + String(a.skipped ?? "no numbers")), "", "", "", "", "", "", "", runsCell];
      const at = a.pass_at_k, hat = a.pass_hat_k || {};
      const last = (arr) => (arr && arr.length ? arr[arr.length - 1] : null);
      const hack = a.impossible || {};
      const hackText = hack.skipped !== undefined ? "– (" + String(hack.skipped) + ")"
        : fmt(hack.hack_rate) + " (" + String(hack.hacks) + "/" + String(hack.campaigns) + ")";
      return [name, String(a.kind ?? ""), plusMinus(at.mean[0], (at.sem || [])[0]),
        plusMinus(last(at.mean), last(at.sem)), plusMinus(last(hat.mean), last(hat.sem)),
        fmt((a.experiments_curve || {}).area), fmt((a.cost_curve || {}).area),
        finite(a.valid_fraction) === null ? "–" : fmt(100 * a.valid_fraction) + " %",
        fmt(a.cost_mean) + (a.cost_unit ? " " + String(a.cost_unit) : ""), hackText, runsCell];
    });
    fill(box.querySelector("#evaluation-agents"), h("h3", {}, "Agents"),
      table(["agent", "kind", "pass@1", "pass@K (K = " + String(K ?? "?") + ")", "pass^K", "curve area (experiments)",
        "curve area (cost)", "valid calls", "cost / campaign", "hack rate", "evaluation campaigns"], rows, "evaluation-table",
        (i) => ({ "data-agent": agents[i][0] })),
      h("div", { class: "muted" }, "pass@k, pass^k: unbiased estimates from the samples of each held-out campaign, " +
        "mean over campaigns ± its standard error; curve areas: mean best score over the budget (experiments) and over " +
        "the common cost horizon (cost); hack rate: successes on the lab's impossible variant."));
  }

  function renderCampaignTable(stats) {
    const rows = stats.map((s) => {
      const start = (state.campaigns.get(s.id) || {}).start || {};
      const budget = start.budget || state.config.budget || 0;
      const bar = h("span", { class: "bar", title: s.spent + " of " + budget },
        h("span", { class: "fill", style: null }));
      bar.firstChild.style.width = budget ? Math.min(100, (100 * s.spent) / budget) + "%" : "0";
      return [String(s.id), s.group, start.seed === undefined ? "–" : String(start.seed),
        h("span", {}, bar, " " + s.spent + (budget ? "/" + budget : "")), fmt(s.cost) + (s.unit ? " " + s.unit : ""),
        fmt(s.best), fmt(s.reward), campaignState(s, budget)];
    });
    fill(el.campaignTable, h("h2", {}, "Campaign list"),
      table(["campaign", "policy", "seed", "experiments", "cost", "best score", "reward", ""], rows, "campaign-table",
        (i) => ({ class: "clickable", onclick: () => { const s = stats[i]; const k = s.bestKey || s.lastKey; if (k) select(k); } })));
  }

  function campaignState(s, budget) {
    if ((state.campaigns.get(s.id) || {}).end) return "ended";
    return s.answered || (budget && s.spent >= budget) ? "budget spent" : "running";
  }

  function observablesText(m) {
    return Object.entries((m || {}).observables || {}).slice(0, 3).map(([k, v]) =>
      k + " = " + fmt(v.value) + (v.uncertainty ? " ± " + fmt(v.uncertainty, 2) : "") + (v.unit ? " " + v.unit : "")).join(", ");
  }

  function renderRecordTable(records) {
    if (!el.recordFilter) {
      el.recordFilter = h("select", { id: "campaign-filter", onchange: (e) => { state.campaignFilter = e.target.value; schedule(); } });
      el.recordTable.append(h("h2", {}, "Records"), h("label", { class: "muted" }, "campaign ", el.recordFilter), h("div", { class: "table-box" }));
    }
    const ids = [...new Set(records.map((r) => r.campaign))].sort((a, b) => a - b);
    if (el.recordFilter.options.length !== ids.length + 1) {
      fill(el.recordFilter, h("option", { value: "all" }, "all"), ...ids.map((i) => h("option", { value: String(i) }, String(i))));
      el.recordFilter.value = state.campaignFilter;
    }
    let shown = records.map((r, i) => [r, i + 1]);
    if (state.campaignFilter !== "all") shown = shown.filter(([r]) => String(r.campaign) === state.campaignFilter);
    const cut = shown.length > MAX_TABLE_ROWS;
    if (cut) shown = shown.slice(-MAX_TABLE_ROWS);
    const body = h("tbody", {});
    for (const [r, n] of shown) {
      const m = r.measurement || {};
      const key = recordKey(r);
      const tr = h("tr", { class: "clickable" + (key === state.selected ? " selected" : ""), "data-key": key, onclick: () => select(key) },
        h("td", {}, String(n)), h("td", {}, String(r.campaign)), h("td", {}, String(r.step)), h("td", {}, String(r.kind)),
        h("td", { class: "status-" + String(m.status) }, String(m.status)),
        h("td", { title: compact(r.proposal, 2000) }, compact(r.proposal)),
        h("td", {}, observablesText(m)), h("td", {}, fmt(r.score)), h("td", {}, fmt(r.reward)),
        h("td", {}, structurePaths(r) ? "◆" : ""));
      body.appendChild(tr);
    }
    const tbl = h("table", { id: "record-table" },
      h("thead", {}, h("tr", {}, ["#", "campaign", "step", "kind", "status", "proposal", "measured", "score", "reward", "3D"].map((x) => h("th", {}, x)))), body);
    fill(el.recordTable.querySelector(".table-box"), cut ? h("div", { class: "muted" }, "the latest " + MAX_TABLE_ROWS + " records") : "", tbl);
  }

  // ---- selection: charts, tables, 3D view, measurement and transcript follow one record -----

  function select(key) {
    if (!key) return;
    state.selected = key;
    for (const u of Object.values(api.charts)) u.redraw(false, false);
    render();
  }

  function step(delta) {
    const list = currentRecords().filter((r) => structurePaths(r) &&
      (state.campaignFilter === "all" || String(r.campaign) === state.campaignFilter));
    if (!list.length) return;
    const i = list.findIndex((r) => recordKey(r) === state.selected);
    const next = i < 0 ? 0 : (i + delta + list.length) % list.length;
    select(recordKey(list[next]));
  }

  let shownKey = null;
  function renderSelection(record) {
    renderMeasurement(record);
    renderTranscript(record);
    for (const tr of document.querySelectorAll("#record-table tr.selected")) tr.classList.remove("selected");
    const row = record && document.querySelector('#record-table tr[data-key="' + CSS.escape(recordKey(record)) + '"]');
    if (row) row.classList.add("selected");
    const key = record ? recordKey(record) : null;
    if (key === shownKey) return;
    shownKey = key;
    loadStructure(record);
  }

  function renderMeasurement(record) {
    const box = el.measurement;
    if (!record) { fill(box, h("h2", {}, "Measurement"), h("div", { class: "muted" }, "click a point or a row")); return; }
    const m = record.measurement || {};
    const obs = Object.entries(m.observables || {}).map(([k, v]) => [k, fmt(v.value, 6), v.uncertainty ? "± " + fmt(v.uncertainty, 3) : "", v.unit || ""]);
    fill(box,
      h("h2", {}, "Measurement"),
      h("div", { id: "selected-record" }, "campaign " + record.campaign + " · step " + record.step + " · " + record.kind +
        (record.train_step !== undefined ? " · training step " + record.train_step : "")),
      h("div", { class: "facts" }, kv("status", String(m.status)), m.reason ? kv("reason", String(m.reason)) : null,
        kv("score", fmt(record.score)), kv("reward", fmt(record.reward)), kv("cost", fmt(m.cost) + (m.cost_unit ? " " + m.cost_unit : ""))),
      obs.length ? table(["observable", "value", "uncertainty", "unit"], obs, "observables") : null,
      (m.notes || []).length ? h("ul", { class: "notes" }, m.notes.map((n) => h("li", {}, String(n)))) : null,
      h("details", { open: true }, h("summary", {}, "proposal"), h("pre", { id: "proposal" }, pretty(record.proposal))),
      record.note ? h("details", { open: true }, h("summary", {}, "analysis result"), h("pre", {}, String(record.note))) : null,
      h("details", {}, h("summary", {}, "provenance"), h("pre", {}, pretty(m.provenance))));
  }

  function renderTranscript(record) {
    const box = el.transcript;
    const t = record ? transcriptOf(record.campaign) : null;
    if (!t) {
      fill(box, h("h2", {}, "Transcript"), h("div", { class: "muted" },
        record ? "no transcript for campaign " + record.campaign + " (only LLM campaigns whose trainer logs them have one)" : ""));
      return;
    }
    const items = [];
    let turn = -1;
    const rewards = t.rewards || [];
    for (const msg of t.messages || []) {
      const role = String(msg.role);
      if (role === "system") {
        items.push(h("details", { class: "msg system" }, h("summary", {}, "system brief"), h("pre", {}, String(msg.content ?? ""))));
      } else if (role === "user") {
        items.push(h("div", { class: "msg user" }, h("div", { class: "who" }, "user"), h("pre", {}, String(msg.content ?? ""))));
      } else if (role === "assistant") {
        turn += 1;
        const calls = msg.tool_calls || [];
        const current = turn === record.step;
        items.push(h("div", { class: "msg assistant" + (current ? " current" : ""), "data-turn": turn },
          h("div", { class: "who" }, "reply " + (turn + 1) + (rewards[turn] !== undefined ? " · reward " + fmt(rewards[turn]) : "")),
          msg.content ? h("pre", { class: "reply" }, String(msg.content)) : null,
          calls.length ? calls.map((c) => h("pre", { class: "call" }, String((c.function || {}).name) + " " + pretty((c.function || {}).arguments)))
            : h("div", { class: "muted" }, "no parsable tool call")));
      } else {
        items.push(h("div", { class: "msg tool" + (turn === record.step ? " current" : "") },
          h("div", { class: "who" }, "tool result" + (msg.name && msg.name !== "none" ? " · " + msg.name : "")), h("pre", {}, String(msg.content ?? ""))));
      }
    }
    fill(box, h("h2", {}, "Transcript · campaign " + t.campaign), h("div", { id: "transcript-messages" }, items));
    const cur = box.querySelector(".msg.current");
    if (cur && cur.scrollIntoView) cur.scrollIntoView({ block: "nearest" });
  }

  // ---- the 3D view (3Dmol.js) ---------------------------------------------------------------

  let structure = null;
  let timer = null;

  async function fetchStructure(paths) {
    if (state.mode === "inline") {
      const s = state.structures[paths.positions];
      if (!s) throw new Error("this structure was left out of the page");
      return s;
    }
    const q = new URLSearchParams(paths);
    const res = await fetch("api/runs/" + encodeURIComponent(state.runName) + "/structure?" + q.toString());
    if (!res.ok) throw new Error("structure: " + res.status + " " + (await res.text()));
    return res.json();
  }

  async function loadStructure(record) {
    const paths = record && structurePaths(record);
    stopPlay();
    if (!paths) {
      api.view = { key: null, frame: 0, frames: 0, loading: false, error: null };
      el.structureInfo.textContent = record ? "no structure recorded for this step" : "no structure selected";
      el.frame.disabled = true; el.play.disabled = true; el.frameLabel.textContent = "";
      if (api.viewer) { api.viewer.removeAllModels(); api.viewer.removeAllShapes(); api.viewer.render(); }
      return;
    }
    const key = recordKey(record);
    api.view = { key, frame: 0, frames: 0, loading: true, error: null };
    el.structureInfo.textContent = "loading…";
    try {
      const s = await fetchStructure(paths);
      if (shownKey !== key) return; // a newer selection won
      structure = s;
      const n = s.frames.length;
      el.frame.max = String(n - 1);
      el.frame.disabled = n < 2;
      el.play.disabled = n < 2;
      const kind = s.bonds ? "molecule" : s.cells ? "periodic cell" : s.numbers.every((z) => z === 0) ? "Lennard-Jones particles (σ = 1)" : "atoms";
      el.structureInfo.textContent = "campaign " + record.campaign + " · step " + record.step + " · " + s.numbers.length +
        " atoms · " + kind + (n > 1 ? " · " + n + " frames" : "");
      api.view = { key, frame: n - 1, frames: n, loading: false, error: null };
      showFrame(n - 1, true);
    } catch (err) {
      if (shownKey !== key) return;
      api.view = { key, frame: 0, frames: 0, loading: false, error: String(err.message || err) };
      el.structureInfo.textContent = String(err.message || err);
    }
  }

  function ensureViewer() {
    if (api.viewer) return api.viewer;
    api.viewer = $3Dmol.createViewer(el.structure, { backgroundColor: "white", antialias: true, preserveDrawingBuffer: true });
    return api.viewer;
  }

  function showFrame(f, zoom) {
    if (!structure) return;
    const v = ensureViewer();
    const s = structure;
    const pos = s.frames[f];
    const atoms = s.numbers.map((z, i) => ({ elem: z > 0 && z < ELEMENTS.length ? ELEMENTS[z] : "X", x: pos[i][0], y: pos[i][1], z: pos[i][2],
      serial: i, index: i, bonds: [], bondOrder: [] }));
    for (const [i, j, order] of s.bonds || []) {
      const o = order === 4 ? 1.5 : order;
      atoms[i].bonds.push(j); atoms[i].bondOrder.push(o);
      atoms[j].bonds.push(i); atoms[j].bondOrder.push(o);
    }
    v.removeAllModels();
    v.removeAllShapes();
    const model = v.addModel();
    model.addAtoms(atoms);
    if (s.bonds) v.setStyle({}, { stick: { radius: 0.14 }, sphere: { scale: 0.28 } });
    else v.setStyle({}, { sphere: { scale: 0.45 } });
    v.setStyle({ elem: "X" }, { sphere: { radius: 0.5, color: "#4f7fbf" } });
    if (s.cells) drawCell(v, s.cells[s.cells.length > 1 ? f : 0]);
    v.setClickable({}, true, (atom) => {
      el.atomInfo.textContent = "atom " + atom.index + " · " + (atom.elem === "X" ? "pseudo-atom" : atom.elem) +
        " · (" + [atom.x, atom.y, atom.z].map((c) => c.toFixed(3)).join(", ") + ") Å";
    });
    if (zoom) {
      v.zoomTo();
      if (s.cells) { v.rotate(-25, "y"); v.rotate(20, "x"); } // a cell seen along an axis is a square
    }
    v.render();
    el.frame.value = String(f);
    el.frameLabel.textContent = s.frames.length > 1 ? "frame " + (f + 1) + "/" + s.frames.length : "";
    api.view.frame = f;
  }

  function drawCell(v, cell) {
    const [a, b, c] = cell;
    const add = (p, q) => [p[0] + q[0], p[1] + q[1], p[2] + q[2]];
    const o = [0, 0, 0];
    const corners = { o, a, b, c, ab: add(a, b), ac: add(a, c), bc: add(b, c), abc: add(add(a, b), c) };
    const edges = [["o", "a"], ["o", "b"], ["o", "c"], ["a", "ab"], ["a", "ac"], ["b", "ab"], ["b", "bc"],
      ["c", "ac"], ["c", "bc"], ["ab", "abc"], ["ac", "abc"], ["bc", "abc"]];
    const size = Math.max(...cell.map((r) => Math.hypot(...r)));
    for (const [p, q] of edges) {
      const s = corners[p], e = corners[q];
      v.addCylinder({ start: { x: s[0], y: s[1], z: s[2] }, end: { x: e[0], y: e[1], z: e[2] },
        radius: Math.max(0.02, size * 0.004), color: "#555555", fromCap: 1, toCap: 1 });
    }
  }

  function togglePlay() {
    if (timer) { stopPlay(); return; }
    if (!structure || structure.frames.length < 2) return;
    el.play.textContent = "pause";
    timer = setInterval(() => showFrame((api.view.frame + 1) % structure.frames.length), 150);
  }

  function stopPlay() {
    if (timer) clearInterval(timer);
    timer = null;
    el.play.textContent = "play";
  }

  window.addEventListener("resize", () => {
    for (const u of Object.values(api.charts)) {
      u.setSize({ width: chartWidth(u.root.parentElement), height: u._spec.height || 220 });
    }
    if (api.viewer) api.viewer.resize();
  });

  // ---- data sources -------------------------------------------------------------------------

  let source = null;

  function openRun(name) {
    if (source) source.close();
    resetData();
    state.config = {};
    state.evaluation = null;
    state.evaluationVersion += 1;
    state.synced = false;
    state.observable = null;
    state.campaignFilter = "all";
    api.ready = false;
    shownKey = null;
    structure = null;
    for (const u of Object.values(api.charts)) u.destroy();
    api.charts = {};
    layout();
    loadStructure(null);
    state.runName = name;
    source = new EventSource("api/runs/" + encodeURIComponent(name) + "/events");
    source.addEventListener("open", () => { state.connected = true; schedule(); });
    source.addEventListener("error", () => { state.connected = false; schedule(); });
    source.addEventListener("config", (e) => { state.config = JSON.parse(e.data); schedule(); });
    source.addEventListener("reset", () => { resetData(); schedule(); });
    source.addEventListener("synced", () => { state.synced = true; schedule(); });
    source.addEventListener("evaluation", (e) => {
      state.evaluation = JSON.parse(e.data);
      state.evaluationVersion += 1;
      schedule();
    });
    source.addEventListener("lines", (e) => { const d = JSON.parse(e.data); ingest(d.stream, d.lines); });
  }

  // the run is named in the address (#run=<name>); a new name opens that run in place
  async function route() {
    const res = await fetch("api/runs");
    state.runs = await res.json();
    const wanted = decodeURIComponent((location.hash.match(/^#run=(.*)$/) || [])[1] || "");
    const names = state.runs.map((r) => r.name);
    if (!names.length) {
      layout();
      fill(el.summary, h("h2", {}, "No runs"), h("div", { class: "muted" }, "this folder holds no run (no config.json)"));
      api.ready = true;
      return;
    }
    const name = names.includes(wanted) ? wanted : names[0];
    if (name !== state.runName) openRun(name);
    if (location.hash !== "#run=" + encodeURIComponent(name)) history.replaceState(null, "", "#run=" + encodeURIComponent(name));
  }

  function startLive() {
    window.addEventListener("hashchange", route);
    route();
    setInterval(async () => { // runs that appear later join the list
      try { state.runs = await (await fetch("api/runs")).json(); schedule(); } catch (e) { /* server gone */ }
    }, 10000);
  }

  function startInline() {
    const data = JSON.parse(document.getElementById("labtwin-data").textContent);
    if (data.panels === "record") document.body.classList.add("compact");
    layout();
    state.runName = data.name || null;
    state.config = data.config || {};
    state.structures = data.structures || {};
    state.omitted = data.structures_omitted || 0;
    state.evaluation = data.evaluation || null;
    state.evaluationVersion += 1;
    for (const stream of ["campaigns", "records", "metrics", "transcripts"]) ingest(stream, (data.lines || {})[stream] || []);
    if (data.selected) state.selected = data.selected;
    render();
  }

  if (state.mode === "inline") startInline();
  else startLive();
})();
