// memstore's page: search, timeline, topic tree and history over the /view/* endpoints of `ct serve`.
// Plain JavaScript, no framework, nothing fetched from anywhere but this server. Text from the store is
// only ever put into the page as text (textContent), never as HTML.
"use strict";

const state = { overview: null, days: null, dayIndex: new Map(), markersByDay: new Map(), day: null,
                tree: null, history: null, route: null };

// ----- small helpers -------------------------------------------------------------------------------

function el(tag, attrs, ...kids) {
  const node = tag === "svg" || attrs && attrs.svg ? document.createElementNS("http://www.w3.org/2000/svg", tag)
                                                    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false || k === "svg") continue;
    if (k === "class") node.setAttribute("class", v);
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined && kid !== false)
    node.append(kid instanceof Node ? kid : String(kid));
  return node;
}
// replaceChildren() would print a null as "null"; leave those out
function fill(node, ...kids) { node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false)); }
const svg = (tag, attrs, ...kids) => el(tag, { ...attrs, svg: true }, ...kids);
const $ = (id) => document.getElementById(id);

async function api(path, params) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (Array.isArray(v)) v.forEach((x) => qs.append(k, x));
    else if (v !== undefined && v !== null && v !== "") qs.append(k, v);
  }
  const res = await fetch(path + (qs.toString() ? "?" + qs : ""), { headers: { Accept: "application/json" } });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

function showError(err) {
  const box = $("error");
  box.textContent = err ? String(err.message || err) : "";
  box.hidden = !err;
}

function plural(n, word) { return `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`; }

let timeFmt = null;
function clock(ts) {
  // The store's timezone, so the times match the day the record is filed under.
  if (!timeFmt) {
    const tz = state.overview && state.overview.timezone;
    try { timeFmt = new Intl.DateTimeFormat("en-GB", { timeZone: tz || undefined, hour: "2-digit", minute: "2-digit", second: "2-digit" }); }
    catch (e) { timeFmt = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", second: "2-digit" }); }
  }
  const d = new Date(ts);
  return isNaN(d) ? ts : timeFmt.format(d);
}

function weekday(day) {
  const d = new Date(day + "T12:00:00Z");
  return isNaN(d) ? "" : d.toLocaleDateString("en-GB", { weekday: "long", timeZone: "UTC" });
}

function roleBadge(role) { return el("span", { class: `role role-${role || "none"}`, text: role || "?" }); }

function dayLink(day, id, label) {
  return el("a", { href: `#/timeline/${day}` + (id ? `?rec=${encodeURIComponent(id)}` : ""), text: label });
}

// ----- routing ---------------------------------------------------------------------------------------

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { view: parts[0] || "timeline", arg: parts[1] || null, params: new URLSearchParams(query || "") };
}

async function route() {
  const r = parseHash();
  const views = ["search", "timeline", "tree", "history"];
  if (!views.includes(r.view)) r.view = "timeline";
  const changedView = !state.route || state.route.view !== r.view;
  state.route = r;
  for (const v of views) $(`view-${v}`).hidden = v !== r.view;
  document.querySelectorAll(".top nav a").forEach((a) =>
    a.dataset.view === r.view ? a.setAttribute("aria-current", "page") : a.removeAttribute("aria-current"));
  document.title = `${{ search: "Search", timeline: "Timeline", tree: "Topics", history: "History" }[r.view]} · memstore`;
  showError(null);
  try {
    if (r.view === "search") await showSearch(r);
    else if (r.view === "timeline") await showTimeline(r);
    else if (r.view === "tree") await showTree(r);
    else await showHistory(r);
  } catch (err) { showError(err); }
  // Focus follows a keyboard or menu move: the field asked for ("/" asks for the query), else the heading.
  const focus = state.focus || (changedView && state.navigated ? `h-${r.view}` : null);
  state.focus = null;
  if (focus) $(focus).focus();
  document.body.dataset.ready = r.view;  // tests and screenshots wait for this
}

function go(hash) {
  if (location.hash === hash) route(); else location.hash = hash;
}

// ----- search ----------------------------------------------------------------------------------------

function searchParamsFromForm() {
  const f = $("search-form");
  const p = new URLSearchParams();
  p.set("q", f.q.value.trim());
  if (f.mode.value !== "hybrid") p.set("mode", f.mode.value);
  for (const k of ["since", "until", "session"]) if (f[k].value.trim()) p.set(k, f[k].value.trim());
  f.querySelectorAll("input[name=role]:checked").forEach((c) => p.append("role", c.value));
  if (f.k.value && f.k.value !== "20") p.set("k", f.k.value);
  return p;
}

function fillForm(params) {
  const f = $("search-form");
  f.q.value = params.get("q") || "";
  f.mode.value = params.get("mode") || "hybrid";
  for (const k of ["since", "until", "session"]) f[k].value = params.get(k) || "";
  const roles = params.getAll("role");
  f.querySelectorAll("input[name=role]").forEach((c) => { c.checked = roles.includes(c.value); });
  f.k.value = params.get("k") || "20";
}

// An answer ranked before the question it answers (memstore/retrieve/answers.py), and that question.
const EXCHANGE = { answers: "answers the question below", answered_by: "answered above" };

function partsText(parts) {
  return Object.entries(parts || {}).map(([name, p]) => {
    if (EXCHANGE[name]) return EXCHANGE[name];
    if (name === "answer" && p && typeof p === "object") return `answered (${p.role}): ${p.text}`;
    if (p === null || typeof p !== "object") return `${name} ${p}`;
    const inner = Object.entries(p).map(([k, v]) => (k === "rank" ? `#${v}` : `${k} ${v}`)).join(" ");
    return `${name} ${inner}`;
  }).join(" · ");
}

async function showSearch(r) {
  fillForm(r.params);
  const q = r.params.get("q");
  const list = $("results");
  if (!q) {
    fill(list);
    $("search-summary").textContent = "Words, meaning, or both (hybrid). Since/until take dates or phrases such as “last week”.";
    return;
  }
  $("search-summary").textContent = "Searching…";
  const sessions = (r.params.get("session") || "").split(",").map((s) => s.trim()).filter(Boolean);
  const out = await api("/view/search", { query: q, mode: r.params.get("mode") || "hybrid", k: r.params.get("k") || 20,
    since: r.params.get("since"), until: r.params.get("until"), role: r.params.getAll("role"), session: sessions });
  $("search-summary").textContent = `${plural(out.hits.length, "hit")} for “${out.query}” (${out.mode}).`;
  fill(list, ...out.hits.map((h, i) => el("li", { class: "hit", "data-id": h.id },
    el("div", { class: "meta" },
      el("span", { class: "when", text: `${h.day} ${clock(h.ts)}` }),
      roleBadge(h.role),
      h.session ? el("span", { text: `session ${h.session}` }) : null,
      h.source && h.source.path ? el("span", { text: `${h.source.path}${h.source.chunk !== undefined ? " #" + h.source.chunk : ""}` }) : null,
      el("span", { class: "score", title: "fused score", text: `#${i + 1} · score ${h.score}` }),
      el("span", { class: "parts", title: "score parts (--explain)", text: partsText(h.parts) })),
    el("p", { class: "text", text: h.text }),
    dayLink(h.day, h.id, `Open in ${h.day} →`))));
}

// ----- timeline --------------------------------------------------------------------------------------

async function loadDays() {
  if (state.days) return;
  const out = state.overview || await api("/view/overview");
  state.days = out.days;
  state.dayIndex = new Map(out.days.map((d, i) => [d.day, i]));
  state.markersByDay = new Map();
  for (const m of out.markers) {
    if (!state.markersByDay.has(m.day)) state.markersByDay.set(m.day, []);
    state.markersByDay.get(m.day).push(m);
  }
}

function dayNumber(day) { return Math.round(Date.parse(day + "T00:00:00Z") / 86400000); }
function dayFromNumber(n) { return new Date(n * 86400000).toISOString().slice(0, 10); }

function drawChart(selected) {
  const box = $("chart");
  const days = state.days;
  if (!days.length) { fill(box, el("p", { class: "hint", text: "No records yet." })); return; }
  const markerDays = [...state.markersByDay.keys()].map(dayNumber);
  const first = Math.min(dayNumber(days[0].day), ...markerDays);
  const last = Math.max(dayNumber(days[days.length - 1].day), ...markerDays);
  const span = last - first + 1;
  const W = Math.max(box.clientWidth - 16, 300), H = 190, top = 18, bottom = 22, left = 34;
  const max = Math.max(...days.map((d) => d.records));
  const bw = (W - left) / span;
  const y = (n) => H - bottom - (n / max) * (H - bottom - top);
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `Records per day from ${days[0].day} to ${days[days.length - 1].day}` });
  for (const frac of [0, 0.5, 1]) {
    const v = Math.round(max * frac), yy = y(v);
    chart.append(svg("line", { class: "grid", x1: left, x2: W, y1: yy, y2: yy }),
                 svg("text", { class: "axis", x: left - 4, y: yy + 4, "text-anchor": "end" }, String(v)));
  }
  for (const d of days) {
    const x = left + (dayNumber(d.day) - first) * bw;
    const bar = svg("rect", { class: "bar" + (d.day === selected ? " selected" : ""), x: x + Math.min(1, bw * 0.1),
      y: y(d.records), width: Math.max(bw - Math.min(2, bw * 0.2), 1), height: Math.max(H - bottom - y(d.records), 1),
      "data-day": d.day, "data-count": d.records, onclick: () => go(`#/timeline/${d.day}`) },
      svg("title", {}, `${d.day}: ${plural(d.records, "record")}`));
    chart.append(bar);
  }
  for (const [day, ms] of state.markersByDay) {
    const x = left + (dayNumber(day) - first + 0.5) * bw;
    chart.append(svg("path", { class: "marker", d: `M${x} 4 l5 6 l-5 6 l-5 -6 z`, "data-day": day,
      onclick: () => go(`#/timeline/${day}`) }, svg("title", {}, ms.map((m) => `◆ ${m.text} (${m.status})`).join("\n"))));
  }
  chart.append(svg("text", { class: "axis", x: left, y: H - 6 }, dayFromNumber(first)),
               svg("text", { class: "axis", x: W, y: H - 6, "text-anchor": "end" }, dayFromNumber(last)));
  fill(box, chart);
}

function neighbour(day, step) {
  const days = state.days;
  if (!days.length) return null;
  if (state.dayIndex.has(day)) {
    const i = state.dayIndex.get(day) + step;
    return i >= 0 && i < days.length ? days[i].day : null;
  }
  // a day with no records: the nearest one in that direction
  const list = step > 0 ? days : [...days].reverse();
  const hit = list.find((d) => (step > 0 ? d.day > day : d.day < day));
  return hit ? hit.day : null;
}

async function showTimeline(r) {
  await loadDays();
  const days = state.days;
  const day = r.arg || (days.length ? days[days.length - 1].day : null);
  drawChart(day);
  const input = $("day-input");
  if (days.length) { input.min = days[0].day; input.max = days[days.length - 1].day; }
  input.value = day || "";
  $("prev-day").disabled = !day || !neighbour(day, -1);
  $("next-day").disabled = !day || !neighbour(day, +1);
  const box = $("day");
  if (!day) { fill(box); return; }
  const out = await api("/view/day", { day });
  state.day = day;
  const target = r.params.get("rec");
  const log = el("ol", { class: "log" }, out.records.map((rec) => el("li", {
      id: `rec-${rec.id}`, class: rec.id === target ? "target" : null, "data-id": rec.id, tabindex: rec.id === target ? "-1" : null },
    el("span", { class: "time", text: clock(rec.ts) }),
    el("span", { class: "who" }, roleBadge(rec.role), rec.actor && rec.actor !== rec.role ? ` ${rec.actor}` : "",
       rec.session ? el("span", { class: "session", text: rec.session }) : null),
    el("p", { class: "text", text: rec.text }))));
  const marks = out.markers.length ? el("ul", { class: "markers", "aria-label": "Markers" }, out.markers.map((m) =>
    el("li", { class: m.status },
      el("strong", { text: m.status === "done" ? "✓ done " : "◆ open " }),
      m.text,
      el("span", { class: "count", text: ` — set ${m.day} ${clock(m.ts)}` + (m.closed_at ? `, closed ${m.closed_day} ${clock(m.closed_at)}` : "") })))) : null;
  fill(box,
    el("header", {}, el("h3", { id: "day-title", text: `${weekday(day)} ${day}` }),
       el("p", { class: "summary", id: "day-count", "data-count": out.records.length,
                 text: `${plural(out.records.length, "record")}, verbatim, in time order` })),
    marks, out.records.length ? log : el("p", { class: "hint", text: "No records on this day." }));
  if (target) {
    const li = document.getElementById(`rec-${target}`);
    if (li) { li.scrollIntoView({ block: "center" }); li.focus({ preventScroll: true }); }
  }
}

function chartKeys(ev) {
  const day = state.day;
  let next = null;
  if (ev.key === "ArrowLeft") next = neighbour(day, -1);
  else if (ev.key === "ArrowRight") next = neighbour(day, +1);
  else if (ev.key === "Home" && state.days.length) next = state.days[0].day;
  else if (ev.key === "End" && state.days.length) next = state.days[state.days.length - 1].day;
  else return;
  ev.preventDefault();
  if (next) go(`#/timeline/${next}`);
}

// ----- topic tree ------------------------------------------------------------------------------------

function nest(topics) {
  const kids = new Map();
  for (const t of topics) {
    if (!kids.has(t.parent)) kids.set(t.parent, []);
    kids.get(t.parent).push(t);
  }
  return kids;
}

// One <li> per topic; `mark(t)` gives [css class, badge text] pairs; `extra(t)` gives ghost children.
function treeList(topics, opts) {
  const kids = nest(topics);
  const known = new Set(topics.map((t) => t.id));
  const roots = topics.filter((t) => t.parent === null || !known.has(t.parent));
  const build = (t) => {
    const children = (kids.get(t.id) || []).slice();
    const ghosts = opts.ghosts ? opts.ghosts(t) : [];
    const hasKids = children.length + ghosts.length > 0;
    const li = el("li", { "data-topic": t.id, class: opts.collapsedDepth !== undefined && t.depth >= opts.collapsedDepth && hasKids ? "collapsed" : null });
    const toggle = el("button", { type: "button", class: "toggle", disabled: !hasKids,
      "aria-label": `Show or hide the topics under ${t.name}`, "aria-expanded": hasKids ? String(!li.classList.contains("collapsed")) : null,
      onclick: () => { const c = li.classList.toggle("collapsed"); toggle.textContent = c ? "▸" : "▾"; toggle.setAttribute("aria-expanded", String(!c)); } },
      li.classList.contains("collapsed") ? "▸" : "▾");
    const name = opts.onOpen ? el("button", { type: "button", class: "name", "data-topic": t.id, onclick: () => opts.onOpen(t) }, t.name)
                             : el("span", { class: "label", text: t.name });
    const badges = (opts.mark ? opts.mark(t) : []).map(([cls, txt]) => el("span", { class: `badge ${cls}`, text: txt }));
    li.append(el("span", { class: "node" }, toggle, name,
      el("span", { class: "count", text: t.under !== undefined ? plural(t.under, "record") : t.records !== undefined ? plural(t.records, "record") : "" }),
      t.current ? el("span", { class: "badge current", text: "current" }) : null, badges));
    if (hasKids) li.append(el("ul", { role: "group" }, children.map(build), ghosts));
    return li;
  };
  const root = el("ul", { class: "tree" }, roots.map(build));
  if (opts.collapseUnmarked) {
    // In a before/after drawing, branches where nothing changed fold away so the changes stand out.
    root.querySelectorAll("li").forEach((li) => {
      const ul = li.querySelector(":scope > ul");
      if (ul && !ul.querySelector(".badge:not(.current)")) {
        li.classList.add("collapsed");
        const b = li.querySelector(":scope > .node > .toggle");
        b.textContent = "▸";
        b.setAttribute("aria-expanded", "false");
      }
    });
  }
  return root;
}

function ghostItem(name, id, badges) {
  return el("li", { class: "ghost", "data-topic": id },
    el("span", { class: "node" }, el("button", { type: "button", class: "toggle", disabled: true, "aria-hidden": "true", tabindex: "-1" }),
      el("span", { class: "label", text: name || id }),
      badges.map(([cls, txt]) => el("span", { class: `badge ${cls}`, text: txt }))));
}

async function showTree(r) {
  if (!state.tree) state.tree = await api("/view/tree");
  if (!state.treeDrawn) { drawTree(state.tree); state.treeDrawn = true; }  // kept as it is (folds, focus) while topics are opened
  if (r.arg) await showTopic(r.arg, Number(r.params.get("offset") || 0));
  else fill($("topic"), el("p", { class: "hint", text: "Choose a topic to see its records." }));
  document.querySelectorAll("#tree .name").forEach((b) => b.classList.toggle("active", b.dataset.topic === r.arg));
}

function drawTree(t) {
  const box = $("tree");
  $("tree-summary").textContent = `${plural(t.topics.length, "topic")}` +
    (t.gone.length ? `, ${t.gone.length} merged or archived` : "") +
    (t.archived_records ? `, ${plural(t.archived_records, "trivial turn")} archived` : "");
  if (!t.topics.length && !t.gone.length) {
    fill(box, el("p", { class: "hint", text: "No topics yet: topics are made as conversation turns are written." }));
    return;
  }
  const mergedInto = new Map();
  for (const g of t.gone) if (g.why !== "archived" && g.now_in) {
    if (!mergedInto.has(g.now_in)) mergedInto.set(g.now_in, []);
    mergedInto.get(g.now_in).push(g);
  }
  const tree = treeList(t.topics, {
    collapsedDepth: t.topics.length > 60 ? 1 : undefined,
    onOpen: (topic) => go(`#/tree/${topic.id}`),
    ghosts: (topic) => (mergedInto.get(topic.id) || []).map((g) =>
      ghostItem(g.name, g.id, [[g.why === "regrouped" ? "moved" : "merged", g.why === "regrouped" ? "regrouped here" : `merged here ${(g.at || "").slice(0, 10)}`]])),
  });
  const archived = t.gone.filter((g) => g.why === "archived" || !g.now_in);
  const gone = archived.length ? el("div", { class: "gone" }, el("h3", { text: "Archived topics" }),
    el("ul", { class: "tree" }, archived.map((g) => ghostItem(g.name, g.id,
      [["archived", g.why === "archived" ? `archived ${(g.at || "").slice(0, 10)}` : g.why]])))) : null;
  fill(box, tree, gone);
}

async function showTopic(id, offset) {
  const out = await api("/view/topic", { id, offset, limit: 100, under: true });  // a group shows what it holds
  const box = $("topic");
  if (out.gone) {
    fill(box, el("h3", { text: id }), el("p", { text: out.now_in ? `This topic was ${out.gone}; its records are now in “${out.into_name}”.` : `This topic was ${out.gone}.` }),
      out.now_in ? el("a", { href: `#/tree/${out.now_in}`, text: `Open “${out.into_name}”` }) : null);
    return;
  }
  const more = out.offset + out.records.length < out.total;
  fill(box,
    el("h3", { id: "topic-title", text: out.name }),
    out.summary ? el("p", { class: "summarytext", text: out.summary }) : null,
    el("p", { class: "summary", text: `${plural(out.total, "record")}` + (out.total > out.records.length ? `, showing ${out.offset + 1}–${out.offset + out.records.length}` : "") }),
    el("ol", { class: "log" }, out.records.map((rec) => el("li", { "data-id": rec.id },
      el("span", { class: "time" }, dayLink(rec.day, rec.id, rec.day), el("br"), clock(rec.ts)),
      el("span", { class: "who" }, roleBadge(rec.role), rec.session ? el("span", { class: "session", text: rec.session }) : null),
      el("p", { class: "text", text: rec.text })))),
    more ? el("p", {}, el("a", { href: `#/tree/${id}?offset=${out.offset + out.records.length}`, text: "Next records →" })) : null);
}

// Arrow keys in the tree: ↑ ↓ move between visible topics, ← folds (or goes to the parent), → unfolds.
function treeKeys(ev) {
  const btn = ev.target.closest && ev.target.closest("#tree .name");
  if (!btn) return;
  const li = btn.closest("li");
  const visible = [...document.querySelectorAll("#tree .name")].filter((b) => b.offsetParent !== null);
  const i = visible.indexOf(btn);
  const toggle = li.querySelector(":scope > .node > .toggle");
  const open = !li.classList.contains("collapsed") && li.querySelector(":scope > ul");
  let next = null;
  if (ev.key === "ArrowDown") next = visible[i + 1];
  else if (ev.key === "ArrowUp") next = visible[i - 1];
  else if (ev.key === "ArrowRight" && !toggle.disabled) { if (open) next = visible[i + 1]; else toggle.click(); }
  else if (ev.key === "ArrowLeft") {
    if (open && !toggle.disabled) toggle.click();
    else next = li.parentElement.closest("li") && li.parentElement.closest("li").querySelector(":scope > .node > .name");
  } else return;
  ev.preventDefault();
  if (next) next.focus();
}

// ----- history ---------------------------------------------------------------------------------------

async function showHistory(r) {
  if (!state.history) state.history = await api("/view/history", { n: 200 });
  const list = $("commits");
  const sel = r.arg;
  fill(list, ...state.history.commits.map((c) => {
    const bits = [];
    if (c.counts.records) bits.push(`+${plural(c.counts.records, "record")}`);
    if (c.counts.markers) bits.push(`${plural(c.counts.markers, "marker")}`);
    if (c.counts.tree) bits.push("topics changed");
    return el("li", {}, el("a", { href: `#/history/${c.sha}`, "data-sha": c.sha, "aria-current": c.sha === sel ? "true" : null },
      el("span", { class: "subject", text: c.subject }),
      el("span", { class: "info", text: `${c.date.replace("T", " ").slice(0, 16)} · ${c.sha.slice(0, 8)}` + (bits.length ? " · " + bits.join(", ") : "") }),
      c.reorganize ? el("span", { class: "badge absorbed", text: "reorganization" }) : null));
  }));
  const box = $("commit");
  if (!sel) {
    const reorg = state.history.commits.find((c) => c.reorganize);
    fill(box, el("p", { class: "hint", text: "Choose a commit to see how it changed the topic tree." }),
      reorg ? el("p", {}, el("a", { href: `#/history/${reorg.sha}`, text: `Latest reorganization: ${reorg.subject}` })) : null);
    return;
  }
  const out = await api("/view/commit", { rev: sel });
  const d = out.diff;
  const beforeMarks = new Map(), afterMarks = new Map();
  const add = (map, id, cls, txt) => { if (!map.has(id)) map.set(id, []); map.get(id).push([cls, txt]); };
  const absorbed = new Map();
  for (const m of d.merged) { add(beforeMarks, m.id, "merged", `merged into “${m.into_name}”`); absorbed.set(m.into, (absorbed.get(m.into) || 0) + 1); }
  for (const [id, n] of absorbed) add(afterMarks, id, "absorbed", `absorbed ${n}`);
  for (const a of d.archived_topics) add(beforeMarks, a.id, "archived", "archived");
  for (const x of d.removed) add(beforeMarks, x.id, "removed", x.why || "removed");
  for (const m of d.moved) { add(beforeMarks, m.id, "moved", `moved to “${m.to_name}”`); add(afterMarks, m.id, "moved", `moved from “${m.from_name}”`); }
  for (const x of d.renamed) { add(beforeMarks, x.id, "renamed", `renamed to “${x.to}”`); add(afterMarks, x.id, "renamed", `was “${x.from}”`); }
  for (const a of d.added) add(afterMarks, a.id, "added", "new");
  for (const g of d.grew) add(afterMarks, g.id, "grew", `+${g.added}`);
  const counts = [["merged", d.merged.length], ["archived", d.archived_topics.length], ["moved", d.moved.length],
                  ["renamed", d.renamed.length], ["added", d.added.length], ["grew", d.grew.length], ["removed", d.removed.length]];
  const side = (title, topics, marks) => el("div", {}, el("h3", { text: title }),
    topics.length ? treeList(topics, { mark: (t) => marks.get(t.id) || [], collapseUnmarked: true }) : el("p", { class: "hint", text: "(no topics)" }));
  const c = out.commit;
  fill(box,
    el("h3", { id: "commit-title", text: c ? c.subject : out.rev }),
    c ? el("p", { class: "summary", text: `${c.date.replace("T", " ")} · ${c.author} · ${c.sha}` }) : null,
    c && c.body ? el("pre", { class: "lines", text: c.body }) : null,
    el("div", { class: "legend", "aria-label": "Changes" }, counts.filter(([, n]) => n).map(([cls, n]) => el("span", { class: `badge ${cls}`, text: `${n} ${cls}` })),
       d.archived_records ? el("span", { class: "badge archived", text: `${plural(d.archived_records, "trivial turn")} archived` }) : null),
    el("pre", { class: "lines", id: "diff-lines", text: out.lines.join("\n") }),
    out.empty ? null : el("div", { class: "beforeafter" }, side("Before", out.before, beforeMarks), side("After", out.after, afterMarks)));
}

// ----- keyboard and start-up -------------------------------------------------------------------------

function typing(ev) {
  const t = ev.target;
  return t && (t.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName));
}

document.addEventListener("keydown", (ev) => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey || typing(ev)) return;
  const views = { "1": "#/search", "2": "#/timeline", "3": "#/tree", "4": "#/history" };
  if (ev.key === "/") {
    ev.preventDefault();
    if (state.route.view !== "search") { state.focus = "q"; go("#/search"); } else $("q").focus();
  }
  else if (views[ev.key]) { ev.preventDefault(); state.navigated = true; go(views[ev.key]); }
});

document.addEventListener("DOMContentLoaded", async () => {
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); state.navigated = false; go("#/search?" + searchParamsFromForm()); });
  $("chart").addEventListener("keydown", chartKeys);
  $("tree").addEventListener("keydown", treeKeys);
  $("prev-day").addEventListener("click", () => { const d = neighbour(state.day, -1); if (d) go(`#/timeline/${d}`); });
  $("next-day").addEventListener("click", () => { const d = neighbour(state.day, +1); if (d) go(`#/timeline/${d}`); });
  $("day-input").addEventListener("change", (ev) => { if (ev.target.value) go(`#/timeline/${ev.target.value}`); });
  $("expand-all").addEventListener("click", () => document.querySelectorAll("#tree li.collapsed").forEach((li) => li.querySelector(".toggle").click()));
  $("collapse-all").addEventListener("click", () => document.querySelectorAll("#tree li:not(.collapsed):not(.ghost)").forEach((li) => { const b = li.querySelector(":scope > .node > .toggle"); if (b && !b.disabled) b.click(); }));
  document.querySelectorAll(".top nav a").forEach((a) => a.addEventListener("click", () => { state.navigated = true; }));
  window.addEventListener("hashchange", route);
  let resized = null;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => { if (state.days && state.route.view === "timeline") drawChart(state.day); }, 150); });
  try {
    state.overview = await api("/view/overview");
    const o = state.overview;
    $("store-name").textContent = o.store;
    $("counts").textContent = `${plural(o.records, "record")} · ${plural(o.day_count, "day")}` +
      (o.first_day ? ` (${o.first_day} – ${o.last_day})` : "") + ` · ${plural(o.markers.length, "marker")}`;
  } catch (err) { showError(err); }
  await route();
});
