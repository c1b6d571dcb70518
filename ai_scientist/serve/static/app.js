// ai-scientist serve: the page. Run content is untrusted (model output, file names, node ids):
// it is only ever put in the page as text (textContent, attribute values), never as markup.
"use strict";

const params = new URLSearchParams(location.search);
const TOKEN = params.get("token") || "";
let RUN = params.get("run");
const rows = new Map(); // node id -> {li, sig}
let tree = null;
let shownNode = null; // node id on the detail pane, null: overview
let shownSig = null;
let refreshing = false;
let again = false;
let noteBox = null;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "onclick") e.addEventListener("click", v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// replaceChildren with el()'s rules: nested arrays flattened, null/undefined left out, text as text
function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
}

async function api(path, opts) {
  const o = Object.assign({}, opts || {});
  o.headers = Object.assign({"X-Token": TOKEN}, o.headers || {});
  const r = await fetch(path, o);
  const ct = r.headers.get("content-type") || "";
  const body = ct.includes("json") ? await r.json() : await r.text();
  if (!r.ok) throw new Error((body && body.error) || body || r.statusText);
  return body;
}

const runApi = (p) => `/api/run/${encodeURIComponent(RUN)}/${p}`;

function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(4);
  return typeof v === "string" ? v : JSON.stringify(v);
}

// ---------------------------------------------------------------- tree --

function depthOf(id, byId) {
  let d = 0;
  let cur = byId.get(id);
  while (cur && cur.parent && byId.has(cur.parent) && d < 200) {
    cur = byId.get(cur.parent);
    d += 1;
  }
  return d;
}

function stageSection(stage) {
  const nav = document.getElementById("tree");
  let sec = nav.querySelector(`section[data-stage="${CSS.escape(String(stage))}"]`);
  if (!sec) {
    const title = (tree.stage_titles || {})[stage] || "";
    sec = el("section", {"data-stage": stage}, el("h3", {}, `Stage ${stage} ${title}`), el("ol"));
    const after = [...nav.querySelectorAll("section")].find((s) => Number(s.dataset.stage) > Number(stage));
    nav.insertBefore(sec, after || null);
  }
  return sec.querySelector("ol");
}

function renderTree(t) {
  tree = t;
  const byId = new Map(t.nodes.map((n) => [n.id, n]));
  const best = new Set(Object.values(t.best || {}));
  const path = new Set(t.best_path || []);
  const blocked = new Set((t.steering || {}).blocked || []);
  for (const n of t.nodes) {
    const sig = [n.status, n.metric, best.has(n.id), path.has(n.id), blocked.has(n.id)].join("|");
    let row = rows.get(n.id);
    if (!row) {
      const li = el("li", {"data-node-id": n.id});
      li.style.paddingLeft = `${Math.min(depthOf(n.id, byId), 12) * 0.9}em`;
      li.addEventListener("click", () => { location.hash = `node=${encodeURIComponent(n.id)}`; });
      stageSection(n.stage).append(li);
      row = {li, sig: null};
      rows.set(n.id, row);
    }
    if (row.sig === sig) continue;
    row.sig = sig;
    const li = row.li;
    li.dataset.status = n.status || "";
    li.classList.toggle("best", best.has(n.id));
    li.classList.toggle("best-path", path.has(n.id));
    li.classList.toggle("blocked", blocked.has(n.id));
    const metric = n.metric === null || n.metric === undefined ? "" : `${n.metric_name || "metric"}=${fmt(n.metric)}`;
    fill(li, 
      el("span", {class: "nid"}, n.id),
      el("span", {class: "op"}, n.op || ""),
      el("span", {class: "status"}, n.status || ""),
      el("span", {class: "metric"}, metric),
      best.has(n.id) ? el("span", {class: "star", title: "stage best"}, "\u2605") : null,
    );
  }
  const nav = document.getElementById("tree");
  nav.dataset.rendered = String(rows.size);
  const status = [t.status || "", t.current_stage ? `stage ${t.current_stage}` : "",
    (t.steering || {}).paused ? "paused" : "", t.awaiting_gate ? `awaiting approval: ${t.awaiting_gate}` : ""];
  document.getElementById("run-status").textContent = status.filter(Boolean).join(" \u00b7 ");
  document.getElementById("run-name").textContent = t.run;
}

// ------------------------------------------------------------ steering --

async function steer(body, where) {
  const out = where || document.getElementById("steer-result");
  try {
    const r = await api(runApi("steer"), {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body)});
    if (out) out.textContent = `${r.action} requested (${r.id}): the run applies it at its next decision`;
    return r;
  } catch (e) {
    if (out) out.textContent = `refused: ${e.message}`;
    return null;
  }
}

function steeringPanel(s, gate) {
  // one text box for the page's life: a refresh moves it, keeping what is being typed
  noteBox = noteBox || el("textarea", {id: "note-text", rows: 3, placeholder: "a note to the model: it joins the plan and code prompts of the next nodes"});
  const note = noteBox;
  const result = el("p", {id: "steer-result", class: "muted"});
  const notes = el("ul", {id: "notes"}, (s.notes || []).map((n) =>
    el("li", {"data-note-id": n.id}, el("span", {}, n.text), " ",
      el("button", {type: "button", onclick: () => steer({action: "withdraw", note: n.id})}, "withdraw"))));
  const pending = (s.pending || []).map((r) => el("li", {}, `${r.action} ${r.text || r.node || r.gate || r.note || ""}`));
  return el("section", {id: "steering"},
    el("h2", {}, "Steering"),
    el("p", {}, s.paused ? "The run is paused (after its nodes in flight). " : "",
      el("button", {type: "button", id: "pause", onclick: () => steer({action: "pause"})}, "Pause"), " ",
      el("button", {type: "button", id: "resume", onclick: () => steer({action: "resume"})}, "Resume"),
      gate ? el("span", {}, ` The run stopped at gate ${gate}: `,
        el("button", {type: "button", id: "approve", onclick: () => steer({action: "approve", gate})}, `Approve ${gate}`),
        " then run `ai-scientist resume` on it.") : null),
    note, el("br"),
    el("button", {type: "button", id: "note-send", onclick: () => {
      const text = note.value;
      steer({action: "note", text}).then((r) => { if (r) note.value = ""; });
    }}, "Send note"),
    result,
    el("h3", {}, "Active notes"), notes,
    pending.length ? el("div", {}, el("h3", {}, "Requests not applied yet"), el("ul", {}, pending)) : null,
    el("p", {class: "muted"}, `Not to expand: ${(s.blocked || []).join(", ") || "none"}; expand next: ${(s.expand_next || []).join(", ") || "none"}`),
  );
}

// ------------------------------------------------------------- overview --

function table(headers, body) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, body.map((r) => el("tr", {}, r.map((c) => el("td", {}, fmt(c)))))));
}

function costTable(title, by) {
  const keys = Object.keys(by || {});
  if (!keys.length) return null;
  return el("div", {}, el("h3", {}, title), table(["", "calls", "prompt tokens", "completion tokens", "USD"],
    keys.map((k) => [k, by[k].calls, by[k].prompt_tokens, by[k].completion_tokens, by[k].usd])));
}

async function showOverview() {
  const o = await api(runApi("overview"));
  const d = document.getElementById("detail");
  const cost = o.cost || {};
  fill(d, 
    steeringPanel(o.steering || {}, (o.state || {}).awaiting_gate),
    el("section", {id: "summaries"}, el("h2", {}, "Stages"),
      o.stage_summaries.length ? o.stage_summaries.map((s) => el("div", {class: "stage-summary", "data-stage": s.stage},
        el("h3", {}, `Stage ${s.stage} ${s.title || ""}: best ${s.best_node || "none"} ${s.best_metric ? `${s.best_metric.name}=${fmt(s.best_metric.value)}` : ""}`),
        el("p", {}, `${fmt(s.nodes)} nodes, ${fmt(s.good)} good, ${fmt(s.buggy)} buggy`),
        el("pre", {}, fmt(s.summary)))) : el("p", {class: "muted"}, "no stage has ended yet")),
    el("section", {id: "cost"}, el("h2", {}, "Cost so far"),
      cost.total ? el("p", {}, `${fmt(cost.total.calls)} calls, ${fmt(cost.total.prompt_tokens)} prompt + ${fmt(cost.total.completion_tokens)} completion tokens, USD ${fmt(cost.total.usd)}`) : null,
      costTable("By role", cost.by_role), costTable("By model", cost.by_model)),
    el("section", {id: "events"}, el("h2", {}, `Events (${o.event_count}; latest first)`),
      el("ol", {class: "events"}, o.events.slice().reverse().slice(0, 200).map((e) => {
        const rest = Object.assign({}, e); delete rest.ts; delete rest.type;
        return el("li", {"data-type": e.type}, el("b", {}, e.type), " ", JSON.stringify(rest).slice(0, 600));
      }))),
    el("section", {id: "idea"}, el("h2", {}, "Idea"), el("pre", {}, o.idea || "")),
  );
  d.dataset.view = "overview";
}

// ----------------------------------------------------------------- node --

function call(c, nid) {
  const raw = el("pre", {class: "raw-text"});
  const rawBox = el("details", {class: "raw", "data-raw-file": c.file}, el("summary", {}, "exact record (the file)"), raw);
  rawBox.addEventListener("toggle", async () => {
    if (!rawBox.open || raw.dataset.loaded) return;
    raw.textContent = await api(runApi(`node/${encodeURIComponent(nid)}/prompt/${encodeURIComponent(c.file)}`));
    raw.dataset.loaded = "1";
  });
  const u = c.usage || {};
  return el("details", {class: "call", "data-call-file": c.file},
    el("summary", {}, `${c.file} \u2014 ${c.phase || ""}/${c.label || ""} \u2014 ${c.role || ""} ${c.model || ""} \u2014 ${fmt(u.prompt_tokens)}+${fmt(u.completion_tokens)} tokens`),
    c.error ? el("p", {class: "error"}, fmt(c.error)) : null,
    (c.messages || []).map((m) => el("div", {class: "message"}, el("h5", {}, m.role), el("pre", {}, m.content))),
    el("h5", {}, "Layer ledger"),
    table(["layer", "action", "chars", "tokens", "reason"], (c.ledger || []).map((l) =>
      [l.layer, l.action, `${fmt(l.chars_before)} \u2192 ${fmt(l.chars_after)}`, `${fmt(l.tokens_before)} \u2192 ${fmt(l.tokens_after)}`, l.reason])),
    el("h5", {}, "Answer"), el("pre", {class: "answer"}, c.response || ""),
    rawBox);
}

async function showNode(nid) {
  const n = await api(runApi(`node/${encodeURIComponent(nid)}`));
  const d = document.getElementById("detail");
  const grade = n.grade || {};
  const metrics = (n.metrics || []).map((m) => [m.name, m.value, m.direction, m.dataset]);
  const blocked = ((tree && tree.steering) || {}).blocked || [];
  fill(d, 
    el("h2", {}, `${n.id} \u2014 ${n.operation || ""} \u2014 ${n.status || ""}`),
    el("p", {},
      n.parent_id ? el("a", {href: `#node=${encodeURIComponent(n.parent_id)}`}, `parent ${n.parent_id}`) : "no parent",
      ` \u00b7 stage ${fmt(n.stage)} \u00b7 depth ${fmt(n.depth)}`,
      (n.children || []).length ? ` \u00b7 children ${n.children.join(", ")}` : ""),
    el("p", {class: "steer-node"},
      blocked.includes(n.id)
        ? el("button", {type: "button", id: "unblock", onclick: (e) => steer({action: "unblock", node: n.id}, e.target.nextElementSibling)}, "Allow expanding")
        : el("button", {type: "button", id: "block", onclick: (e) => steer({action: "block", node: n.id}, e.target.nextElementSibling)}, "Don't expand"),
      el("span", {class: "muted"}), " ",
      el("button", {type: "button", id: "expand", onclick: (e) => steer({action: "expand", node: n.id}, e.target.nextElementSibling)}, "Expand next"),
      el("span", {class: "muted"})),
    n.idea ? el("p", {}, `idea: ${n.idea}`) : null,
    n.error ? el("pre", {class: "error"}, n.error) : null,
    n.incomparable ? el("p", {class: "error"}, n.incomparable) : null,
    el("h3", {}, "Plan"), el("pre", {}, n.plan || ""),
    el("h3", {}, "Metrics"),
    metrics.length ? table(["name", "value", "direction", "dataset"], metrics) : el("p", {class: "muted"}, "none"),
    n.grade ? el("div", {class: "grade"}, el("h4", {}, "Graded vs self-reported"),
      el("pre", {}, JSON.stringify({graded: grade.graded, self_reported: grade.self_reported, mismatches: grade.mismatches, error: grade.error}, null, 1))) : null,
    el("h3", {}, "Code"),
    (n.code || []).map((f) => el("details", {class: "code"}, el("summary", {}, f.name), el("pre", {}, f.text))),
    n.diff !== null ? el("details", {class: "diff", open: true}, el("summary", {}, `Diff to the parent ${n.parent_id}`),
      el("pre", {}, n.diff || "(no change)")) : null,
    el("h3", {}, "Commands and output"),
    (n.outputs || []).map((o) => el("details", {class: "exec"},
      el("summary", {}, `${JSON.stringify(o.command)} \u2192 exit ${fmt(o.exit_code)} (${fmt(o.duration_s)} s)`),
      o.stdout ? el("pre", {}, o.stdout) : null, o.stderr ? el("pre", {class: "stderr"}, o.stderr) : null)),
    el("h3", {}, "Figures"),
    (n.plots || []).map((p) => el("figure", {}, p.url ? el("img", {src: p.url, alt: p.name}) : el("p", {}, p.omitted || ""),
      el("figcaption", {}, `${p.name}: ${p.caption || ""}`))),
    n.vlm ? el("div", {class: "critique"}, el("h4", {}, "Critique of the figures"), el("pre", {}, fmt(n.vlm.critique || n.vlm.skipped || n.vlm.error))) : null,
    el("h3", {}, `Prompts (${(n.calls || []).length} calls)`),
    (n.calls || []).map((c) => call(c, n.id)),
  );
  d.dataset.view = "node";
  d.dataset.nodeId = n.id;
  shownSig = rows.has(nid) ? rows.get(nid).sig : null;
}

// ------------------------------------------------------------- routing --

function route() {
  const m = /^#node=(.+)$/.exec(location.hash);
  shownNode = m ? decodeURIComponent(m[1]) : null;
  return (shownNode ? showNode(shownNode) : showOverview()).catch((e) => {
    fill(document.getElementById("detail"), el("p", {class: "error"}, String(e.message || e)));
  });
}

// A busy run changes its files many times a second: the page refreshes at most every
// MIN_REFRESH_MS (the first change after a quiet spell at once), so watching stays cheap.
const MIN_REFRESH_MS = 500;
let lastRefresh = 0;
let timer = null;

function scheduleRefresh() {
  const wait = lastRefresh + MIN_REFRESH_MS - Date.now();
  if (wait <= 0) { refresh(); return; }
  if (!timer) timer = setTimeout(() => { timer = null; refresh(); }, wait);
}

async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  lastRefresh = Date.now();
  try {
    renderTree(await api(runApi("tree")));
    if (!shownNode) await showOverview();
    else if (rows.has(shownNode) && rows.get(shownNode).sig !== shownSig) await showNode(shownNode);
  } catch (e) {
    document.getElementById("live").dataset.state = "error";
  } finally {
    refreshing = false;
    if (again) { again = false; scheduleRefresh(); }
  }
}

function listen() {
  const es = new EventSource(`${runApi("events")}?token=${encodeURIComponent(TOKEN)}`);
  const live = document.getElementById("live");
  es.addEventListener("open", () => { live.dataset.state = "on"; });
  es.addEventListener("error", () => { live.dataset.state = "off"; });
  es.addEventListener("change", () => scheduleRefresh());
}

async function start() {
  if (!RUN) {
    const r = await api("/api/runs");
    if (r.single || r.runs.length === 1) RUN = r.runs[0];
    else {
      fill(document.getElementById("detail"), el("h2", {}, "Runs"), el("ul", {id: "runs"}, r.runs.map((name) =>
        el("li", {}, el("a", {href: `?token=${encodeURIComponent(TOKEN)}&run=${encodeURIComponent(name)}`}, name)))));
      document.body.dataset.ready = "1";
      return;
    }
  }
  document.getElementById("overview-link").addEventListener("click", (e) => { e.preventDefault(); location.hash = ""; });
  renderTree(await api(runApi("tree")));
  await route();
  window.addEventListener("hashchange", route);
  listen();
  document.body.dataset.readyMs = String(Math.round(performance.now())); // page load, for bench/serve.py
  document.body.dataset.ready = "1";
}

start();
