/**
 * The status page served at `/`: one self-contained HTML document (inline CSS and script, no
 * external requests). It reads `/topology` once and `/status` every second, draws the operators
 * as nodes and the topics as edges in an SVG, and shows per-operator rates, per-topic rates and
 * lag, the tasks, the group, and the `overload` section (shedding, recommended workers) when the
 * worker has one.
 */
export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sluice status</title>
<style>
  :root { --bg:#0f1419; --panel:#171d24; --fg:#d8dee6; --dim:#8a96a3; --acc:#4fb3ff; --ok:#4cc38a; --warn:#f0b429; --bad:#ef5350; --edge:#52606d; }
  * { box-sizing: border-box; }
  body { margin:0; font:14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background:var(--bg); color:var(--fg); }
  header { display:flex; flex-wrap:wrap; gap:24px; align-items:baseline; padding:12px 20px; border-bottom:1px solid #26303a; }
  header h1 { font-size:18px; margin:0; }
  .kv { color:var(--dim); } .kv b { color:var(--fg); font-weight:600; }
  main { padding:12px 20px; display:grid; gap:16px; grid-template-columns: 1fr; }
  section { background:var(--panel); border-radius:8px; padding:12px 14px; overflow:auto; }
  section h2 { font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--dim); margin:0 0 8px; }
  table { border-collapse:collapse; width:100%; font-variant-numeric: tabular-nums; }
  th, td { text-align:left; padding:3px 10px 3px 0; border-bottom:1px solid #222b34; white-space:nowrap; }
  th { color:var(--dim); font-weight:500; }
  .state-running, .state-Stable { color:var(--ok); } .state-restoring, .state-created { color:var(--warn); } .state-failed, .state-closed { color:var(--bad); }
  svg text { fill:var(--fg); font-size:12px; }
  .node rect { fill:#1f2933; stroke:var(--acc); stroke-width:1.5; rx:6; }
  .node.kind-process rect { stroke:#b388ff; } .node.kind-sink rect { stroke:var(--ok); } .node.kind-source rect { stroke:var(--warn); }
  .node .name { font-weight:600; } .node .kind, .node .total { fill:var(--dim); font-size:11px; }
  .node .rate { fill:var(--acc); font-weight:600; }
  .topic rect { fill:#11161c; stroke:var(--edge); stroke-dasharray:4 3; }
  .edge { stroke:var(--edge); stroke-width:1.5; fill:none; marker-end:url(#arrow); }
  .edge.repartition { stroke:var(--warn); stroke-dasharray:6 4; }
  .elabel { fill:var(--dim); font-size:11px; }
  .elabel.lag { fill:var(--warn); }
  #error { color:var(--bad); }
</style>
</head>
<body>
<header>
  <h1>Sluice · <span id="app">…</span></h1>
  <span class="kv">worker <b id="wstate">…</b></span>
  <span class="kv">ready <b id="ready">…</b></span>
  <span class="kv">group <b id="gstate">…</b> (<b id="gmembers">0</b> members)</span>
  <span class="kv">in <b id="rate-in">0</b>/s</span>
  <span class="kv">lag <b id="lag-total">0</b></span>
  <span class="kv">shedding <b id="shed">off</b></span>
  <span class="kv">recommended workers <b id="recommend">–</b></span>
  <span class="kv">updated <b id="updated">never</b></span>
  <span id="error"></span>
</header>
<main>
  <section><h2>Topology (operators = nodes, topics = edges; rates over the last second)</h2>
    <svg id="graph" xmlns="http://www.w3.org/2000/svg" width="100%">
      <defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#52606d"/></marker></defs>
      <g id="edges"></g><g id="nodes"></g>
    </svg>
  </section>
  <section><h2>Tasks on this worker</h2><table id="tasks"><thead><tr><th>task</th><th>state</th><th>partition</th><th>position</th><th>lag</th><th>restore</th><th>watermark</th><th>async in flight</th><th>stores</th></tr></thead><tbody></tbody></table></section>
  <section><h2>Group</h2><table id="members"><thead><tr><th>member</th><th>host</th><th>http</th><th>tasks</th></tr></thead><tbody></tbody></table></section>
  <section id="overload-section" hidden><h2>Overload</h2><pre id="overload"></pre></section>
</main>
<script>
"use strict";
const NS = "http://www.w3.org/2000/svg";
const W = 190, H = 58, GX = 90, GY = 26, PAD = 20;
let topo = null, prev = null, polls = 0;
const el = (id) => document.getElementById(id);
const fmt = (n) => n == null ? "–" : n >= 1e6 ? (n / 1e6).toFixed(2) + "M" : n >= 1e4 ? (n / 1e3).toFixed(1) + "k" : String(Math.round(n * 10) / 10);
function svg(tag, attrs, parent) { const e = document.createElementNS(NS, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); if (parent) parent.appendChild(e); return e; }
function text(parent, x, y, cls, s) { const t = svg("text", { x, y, class: cls }, parent); t.textContent = s; return t; }

function layout(t) {
  // One band per sub-topology (they meet only through repartition topics); inside a band, a
  // column per depth, external input topics on the left and output topics on the right.
  const parents = new Map(t.nodes.map((n) => [n.id, []]));
  const edges = [];
  for (const n of t.nodes) for (const c of n.children) { parents.get(c).push(n.id); edges.push({ from: "n" + n.id, to: "n" + c, kind: "chain" }); }
  for (const s of t.nodes) if (s.kind === "sink" && s.internal)
    for (const r of t.nodes) if (r.kind === "source" && r.topics.includes(s.topics[0])) edges.push({ from: "n" + s.id, to: "n" + r.id, kind: "repartition", topic: s.topics[0] });
  const depth = new Map();
  const d = (id) => { if (depth.has(id)) return depth.get(id); depth.set(id, 0); const v = Math.max(0, ...parents.get(id).map((p) => d(p) + 1)); depth.set(id, v); return v; };
  for (const n of t.nodes) d(n.id);
  const boxes = new Map();
  let top = PAD, maxCol = 0;
  for (const sub of t.subtopologies) {
    const nodes = t.nodes.filter((n) => n.subtopology === sub.id);
    const cols = [];
    const put = (key, col, box) => { (cols[col] ||= []).push(key); boxes.set(key, box); maxCol = Math.max(maxCol, col); };
    for (const n of nodes) if (n.kind === "source" && !n.internal) for (const tp of n.topics) { put("t" + tp, 0, { topic: tp }); edges.push({ from: "t" + tp, to: "n" + n.id, kind: "in", topic: tp }); }
    for (const n of nodes) put("n" + n.id, depth.get(n.id) + 1, { node: n });
    const last = cols.length;
    for (const n of nodes) if (n.kind === "sink" && !n.internal && !boxes.has("t" + n.topics[0])) { put("t" + n.topics[0], last, { topic: n.topics[0] }); }
    for (const n of nodes) if (n.kind === "sink" && !n.internal) edges.push({ from: "n" + n.id, to: "t" + n.topics[0], kind: "out", topic: n.topics[0] });
    let rows = 1;
    cols.forEach((keys, c) => (keys || []).forEach((k, i) => { const b = boxes.get(k); b.x = PAD + c * (W + GX); b.y = top + i * (H + GY); rows = Math.max(rows, i + 1); }));
    top += rows * (H + GY) + 2 * GY;
  }
  return { boxes, edges, width: PAD * 2 + (maxCol + 1) * (W + GX) - GX, height: top - GY };
}

function draw(t) {
  const L = layout(t);
  const g = el("graph");
  g.setAttribute("viewBox", "0 0 " + L.width + " " + L.height); g.removeAttribute("height"); g.style.maxWidth = L.width + "px";
  const ge = el("edges"), gn = el("nodes");
  for (const e of L.edges) {
    const a = L.boxes.get(e.from), b = L.boxes.get(e.to);
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x - 2, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    const back = x2 <= x1;
    // A repartition edge runs from the end of one band back to the start of the next: down the right, across, down the left.
    const ym = (a.y + H + b.y) / 2;
    const dpath = back ? "M" + x1 + "," + y1 + " C" + (x1 + 50) + "," + y1 + " " + (x1 + 50) + "," + ym + " " + (x1 - 20) + "," + ym + " L" + (x2 + 20) + "," + ym + " C" + (x2 - 50) + "," + ym + " " + (x2 - 50) + "," + y2 + " " + x2 + "," + y2 : "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2;
    svg("path", { d: dpath, class: "edge " + e.kind }, ge);
    if (e.topic) {
      const lx = back ? (x1 + x2) / 2 : mx, ly = back ? ym + 4 : (y1 + y2) / 2;
      if (e.kind === "repartition") text(ge, lx - 40, ly - 20, "elabel", "repartition " + e.topic);
      const r = text(ge, lx - 40, ly - 6, "elabel erate", "");
      r.dataset.topic = e.topic; r.dataset.dir = e.kind === "out" ? "out" : "in";
      const lg = text(ge, lx - 40, ly + 16, "elabel lag", "");
      lg.dataset.lagTopic = e.topic;
    }
  }
  for (const [key, b] of L.boxes) {
    const grp = svg("g", { class: b.node ? "node kind-" + b.node.kind : "topic", transform: "translate(" + b.x + "," + b.y + ")" }, gn);
    svg("rect", { width: W, height: H, rx: 6 }, grp);
    if (b.node) {
      grp.dataset.name = b.node.name; grp.dataset.id = b.node.id;
      text(grp, 10, 18, "name", b.node.name);
      text(grp, 10, 34, "kind", b.node.kind + " · sub " + b.node.subtopology + (b.node.stores.length ? " · " + b.node.stores.join(", ") : ""));
      const r = text(grp, 10, 50, "rate", "– rec/s"); r.id = "rate-" + b.node.id;
      const tt = text(grp, W - 10, 50, "total", ""); tt.id = "total-" + b.node.id; tt.setAttribute("text-anchor", "end");
    } else {
      grp.dataset.topic = b.topic;
      text(grp, 10, 24, "name", b.topic.length > 26 ? b.topic.slice(0, 25) + "…" : b.topic);
      text(grp, 10, 42, "kind", "topic");
    }
  }
}

function update(s) {
  polls++;
  el("app").textContent = s.app; el("wstate").textContent = s.state; el("wstate").className = "state-" + s.state;
  el("ready").textContent = s.readiness && s.readiness.ready ? "yes" : "no" + (s.readiness && s.readiness.reason ? " (" + s.readiness.reason + ")" : "");
  el("gstate").textContent = s.group.state; el("gstate").className = "state-" + s.group.state; el("gmembers").textContent = s.group.members.length;
  const dt = prev ? Math.max(0.001, (s.time - prev.time) / 1000) : null;
  const prevCount = new Map(prev ? prev.operators.map((o) => [o.id, o.records]) : []);
  const rate = new Map();
  let inRate = 0;
  for (const o of s.operators) {
    const r = dt == null ? null : Math.max(0, (o.records - (prevCount.get(o.id) ?? o.records)) / dt);
    rate.set(o.id, r);
    const re = el("rate-" + o.id); if (re) re.textContent = fmt(r) + " rec/s";
    const te = el("total-" + o.id); if (te) te.textContent = fmt(o.records) + " total";
    const node = topo && topo.nodes.find((n) => n.id === o.id);
    if (o.kind === "source" && node && !node.internal && r != null) inRate += r;
  }
  el("rate-in").textContent = fmt(dt == null ? null : inRate);
  const lagByTopic = new Map();
  let lagTotal = 0;
  for (const t of s.tasks) for (const [tp, v] of Object.entries(t.lag)) if (v != null) { lagByTopic.set(tp, (lagByTopic.get(tp) || 0) + v); lagTotal += v; }
  el("lag-total").textContent = fmt(lagTotal);
  if (topo) for (const e of document.querySelectorAll(".erate")) {
    const tp = e.dataset.topic;
    const n = topo.nodes.find((x) => (e.dataset.dir === "out" ? x.kind === "sink" : x.kind === "source") && x.topics.includes(tp));
    const r = n ? rate.get(n.id) : null;
    e.textContent = fmt(r) + " rec/s";
  }
  for (const e of document.querySelectorAll("[data-lag-topic]")) { const v = lagByTopic.get(e.dataset.lagTopic); e.textContent = v == null ? "" : "lag " + fmt(v); }
  const tb = el("tasks").tBodies[0]; tb.textContent = "";
  for (const t of s.tasks) {
    const tr = tb.insertRow();
    const restore = t.restore ? (t.restore.total ? Math.round(100 * (1 - t.restore.remaining / t.restore.total)) + "% (" + t.restore.remaining + " left)" : "done") : "–";
    const cells = [t.id, t.state, t.partition, Object.values(t.positions).join(", "), Object.values(t.lag).map(fmt).join(", "), restore, (t.watermark == null ? "–" : new Date(t.watermark).toISOString()) + (t.idleInputs && t.idleInputs.length ? " (idle: " + t.idleInputs.join(", ") + ")" : ""), t.asyncInFlight ? String(t.asyncInFlight) : "–", t.stores.join(", ")];
    cells.forEach((c, i) => { const td = tr.insertCell(); td.textContent = c; if (i === 1) td.className = "state-" + c; });
  }
  const mb = el("members").tBodies[0]; mb.textContent = "";
  for (const m of s.group.members) { const tr = mb.insertRow(); [m.memberId + (m.self ? " (this worker)" : ""), m.host, m.http || "–", m.tasks.join(", ")].forEach((c) => { tr.insertCell().textContent = c; }); }
  const ov = s.overload;
  if (ov) {
    el("overload-section").hidden = false; el("overload").textContent = JSON.stringify(ov, null, 2);
    const p = ov.shedFraction ?? ov.p;
    el("shed").textContent = typeof p === "number" ? (100 * p).toFixed(1) + "%" + (ov.mode ? " (" + ov.mode + ")" : "") : ov.mode || "on";
    const rec = ov.recommendedWorkers ?? (ov.recommendation && ov.recommendation.workers);
    el("recommend").textContent = rec == null ? "–" : rec;
  }
  el("updated").textContent = new Date(s.time).toLocaleTimeString() + " (#" + polls + ")";
  prev = s;
}

async function poll() {
  try {
    if (!topo) { topo = await (await fetch("topology", { cache: "no-store" })).json(); draw(topo); }
    update(await (await fetch("status", { cache: "no-store" })).json());
    el("error").textContent = "";
  } catch (e) { el("error").textContent = "cannot reach the worker: " + e.message; }
  setTimeout(poll, 1000);
}
poll();
</script>
</body>
</html>
`;
