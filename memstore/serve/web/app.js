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
  const res = await fetch(path + (qs.toString() ? "?" + qs : ""), { headers: { Accept: "application/json", ...authorization() } });
  const body = await res.json();
  if (res.status === 401) askToken(body.error);
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

// A write (POST with a JSON body): the page's one is /share.
async function post(path, body) {
  const res = await fetch(path, { method: "POST", body: JSON.stringify(body),
    headers: { Accept: "application/json", "Content-Type": "application/json", ...authorization() } });
  const out = await res.json();
  if (res.status === 401) askToken(out.error);
  if (!res.ok) throw new Error(out.error || res.statusText);
  return out;
}

// A server started with --tokens answers 401 without one: the page asks for it, keeps it in this
// tab's sessionStorage only, and sends it as the Authorization header with every request.
const TOKEN_KEY = "memstore-token";
function authorization() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { Authorization: "Bearer " + token } : {};
}
function askToken(why) {
  const form = $("token-form");
  if (!form.hidden) return;  // asked already (the page's next requests answer 401 too)
  const had = sessionStorage.getItem(TOKEN_KEY) !== null;
  $("token-why").textContent = had ? `The token was refused: ${why}` : "This server asks for a token.";
  sessionStorage.removeItem(TOKEN_KEY);
  form.hidden = false;
  $("token").focus();
}

function showError(err) {
  const box = $("error");
  box.textContent = err ? String(err.message || err) : "";
  box.hidden = !err;
}

function plural(n, word) { return `${n.toLocaleString("en")} ${word}${n === 1 ? "" : "s"}`; }

// Every time on the page is on the store's clock (its timezone, named in the header), the clock the
// store files records under days by; the browser's own timezone plays no part.
let timeFmt = null;
function timeParts(ts) {
  if (!timeFmt) {
    const opts = { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" };
    const tz = state.overview && state.overview.timezone;
    try { timeFmt = new Intl.DateTimeFormat("en-GB", { ...opts, timeZone: tz || undefined }); }
    catch (e) { timeFmt = new Intl.DateTimeFormat("en-GB", opts); }
  }
  const d = new Date(ts);
  if (isNaN(d)) return null;
  const p = {};
  for (const { type, value } of timeFmt.formatToParts(d)) p[type] = value;
  if (p.hour === "24") p.hour = "00";
  return p;
}
function clock(ts) { const p = timeParts(ts); return p ? `${p.hour}:${p.minute}:${p.second}` : ts; }
function stamp(ts) { const p = timeParts(ts); return p ? `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}` : ts; }
function dayOf(ts) { const p = timeParts(ts); return p ? `${p.year}-${p.month}-${p.day}` : ts || ""; }
function hourOf(ts) { const p = timeParts(ts); return p ? Number(p.hour) : 0; }

function weekday(day) {
  const d = new Date(day + "T12:00:00Z");
  return isNaN(d) ? "" : d.toLocaleDateString("en-GB", { weekday: "long", timeZone: "UTC" });
}

// Who put a record into memory, short ("Ana Lopez <ana@x.org>" -> "by Ana Lopez"); the whole in its title.
function authorTag(author) {
  if (!author) return null;
  const name = author.split("<")[0].trim() || author.replace(/^.*<|>.*$/g, "");
  return el("span", { class: "author", title: `put into memory by ${author}`, text: `by ${name}` });
}
// A commit's signature as git verified it: nothing when unsigned.
function signatureBadge(sig) {
  if (!sig) return null;
  return sig.verified
    ? el("span", { class: "badge verified", title: `signed by ${sig.signer || sig.key}`, text: "verified" })
    : el("span", { class: "badge unverified", title: sig.why, text: "signed, not verified" });
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
  const views = ["search", "timeline", "tree", "history", "private"];
  if (!views.includes(r.view)) r.view = "timeline";
  const changedView = !state.route || state.route.view !== r.view;
  state.route = r;
  for (const v of views) $(`view-${v}`).hidden = v !== r.view;
  document.querySelectorAll(".top nav a").forEach((a) =>
    a.dataset.view === r.view ? a.setAttribute("aria-current", "page") : a.removeAttribute("aria-current"));
  document.title = `${{ search: "Search", timeline: "Timeline", tree: "Topics", history: "History", private: "Private" }[r.view]} · memstore`;
  showError(null);
  try {
    if (r.view === "search") await showSearch(r);
    else if (r.view === "timeline") await showTimeline(r);
    else if (r.view === "tree") await showTree(r);
    else if (r.view === "private") await showPrivate(r);
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
    if (name === "question" && p && typeof p === "object") return `asked (${p.role}): ${p.text}`;
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
      authorTag(h.author),
      conversation(h),
      h.source && h.source.path ? el("span", { text: `${h.source.path}${h.source.chunk !== undefined ? " #" + h.source.chunk : ""}` }) : null,
      el("span", { class: "score", title: "fused score", text: `#${i + 1} · score ${h.score}` }),
      el("span", { class: "parts", title: "score parts (--explain)", text: partsText(h.parts) })),
    el("p", { class: "text", text: h.text }),
    dayLink(h.day, h.id, `Open in ${h.day} →`))));
}

// ----- timeline --------------------------------------------------------------------------------------
// The chart spans every day, one year, one month or one day (the zoom). Its bars are days, weeks,
// months or years: the finest unit that leaves each bar MIN_BAR pixels or more, so years of records
// stay readable and clickable. The chosen day is marked in every zoom, today too.

const ZOOMS = ["all", "year", "month", "day"];
const UNITS = ["day", "week", "month", "year"];
const MIN_BAR = 7;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

async function loadDays() {
  if (state.days) return;
  const out = state.overview || (state.overview = await api("/view/overview"));
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
function ymd(n) { const d = new Date(n * 86400000); return [d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()]; }
function monthStart(y, m) { return Math.round(Date.UTC(y, m, 1) / 86400000); }  // m may run past 11

function bucketStart(n, unit) {
  if (unit === "day") return n;
  if (unit === "week") return n - ((new Date(n * 86400000).getUTCDay() + 6) % 7);  // weeks start on Monday
  const [y, m] = ymd(n);
  return unit === "month" ? monthStart(y, m) : monthStart(y, 0);
}

function bucketNext(start, unit) {
  if (unit === "day") return start + 1;
  if (unit === "week") return start + 7;
  const [y, m] = ymd(start);
  return unit === "month" ? monthStart(y, m + 1) : monthStart(y + 1, 0);
}

function today() { return state.overview && state.overview.today; }

function dayHash(day, zoom) {
  const z = zoom || state.zoom;
  return `#/timeline/${day}` + (z && z !== "all" ? `?zoom=${z}` : "");
}

// The days the chart spans for a zoom around `day`, as [first, last] day numbers.
function spanOf(zoom, day) {
  const n = dayNumber(day);
  const [y, m] = ymd(n);
  if (zoom === "year") return [monthStart(y, 0), monthStart(y + 1, 0) - 1];
  if (zoom === "month") return [monthStart(y, m), monthStart(y, m + 1) - 1];
  const ends = [n, ...[...state.markersByDay.keys()].map(dayNumber)];
  if (today()) ends.push(dayNumber(today()));
  if (state.days.length) ends.push(dayNumber(state.days[0].day), dayNumber(state.days[state.days.length - 1].day));
  return [Math.min(...ends), Math.max(...ends)];
}

// Buckets of days over the span: the finest unit whose bars are MIN_BAR wide or more; the span is
// widened to whole buckets so that no bar at its edges is cut thinner.
function dayBuckets(zoom, day, width) {
  const [first, last] = spanOf(zoom, day);
  let unit = "year";
  for (const u of UNITS) {
    let n = 0;
    for (let s = bucketStart(first, u); s <= last && n * MIN_BAR <= width; s = bucketNext(s, u)) n++;
    if (n * MIN_BAR <= width) { unit = u; break; }
  }
  const from = bucketStart(first, unit), end = bucketNext(bucketStart(last, unit), unit);
  const counts = new Map(), firstDay = new Map();
  for (const d of state.days) {
    const n = dayNumber(d.day);
    if (n < from || n >= end) continue;
    const s = bucketStart(n, unit);
    counts.set(s, (counts.get(s) || 0) + d.records);
    if (!firstDay.has(s)) firstDay.set(s, d.day);
  }
  const list = [];
  for (let s = from; s < end; s = bucketNext(s, unit)) {
    list.push({ a: s, b: bucketNext(s, unit), count: counts.get(s) || 0, firstDay: firstDay.get(s) });
  }
  return { unit, from, end, list };
}

// One day's records per hour of the store's clock.
function hourBuckets() {
  const counts = new Array(24).fill(0);
  for (const rec of state.dayRecords || []) counts[hourOf(rec.ts)] += 1;
  return { unit: "hour", from: 0, end: 24, list: counts.map((count, h) => ({ a: h, b: h + 1, count })) };
}

function bucketLabel(b, unit) {
  if (unit === "hour") return `${String(b.a).padStart(2, "0")}:00–${String(b.b).padStart(2, "0")}:00`;
  if (unit === "day") return dayFromNumber(b.a);
  if (unit === "week") return `week of ${dayFromNumber(b.a)}`;
  const [y, m] = ymd(b.a);
  return unit === "month" ? `${MONTHS[m]} ${y}` : String(y);
}

// Where the x axis is labelled: hours, days, months or years, whichever fits the span.
function ticks(from, end, unit, pxPerSlot) {
  const out = [];
  if (unit === "hour") { for (let h = 0; h < 24; h += pxPerSlot >= 36 ? 1 : 3) out.push([h, `${String(h).padStart(2, "0")}:00`]); return out; }
  const days = end - from;
  for (let n = from; n < end; n++) {
    const [y, m, d] = ymd(n);
    if (days > 3 * 366) { if (m === 0 && d === 1) out.push([n, String(y)]); }
    else if (days > 62) { if (d === 1) out.push([n, m === 0 ? String(y) : MONTHS[m]]); }
    else if (d === 1) out.push([n, `1 ${MONTHS[m]}`]);
    else if (pxPerSlot >= 18 || (new Date(n * 86400000).getUTCDay() === 1)) out.push([n, String(d)]);
  }
  return out;
}

function drawChart(selected) {
  const box = $("chart");
  const zoom = state.zoom;
  if (!state.days.length && !state.markersByDay.size) {
    $("chart-caption").textContent = "";
    fill(box, el("p", { class: "hint", text: "No records yet." }));
    return;
  }
  const W = Math.max(box.clientWidth - 16, 300), H = 200, top = 30, bottom = 22, left = 34, right = 6;
  const plotW = W - left - right;
  const bk = zoom === "day" ? hourBuckets() : dayBuckets(zoom, selected, plotW);
  const px = plotW / (bk.end - bk.from);
  const x = (slot) => left + (slot - bk.from) * px;
  const max = Math.max(1, ...bk.list.map((b) => b.count));
  const y = (n) => H - bottom - (n / max) * (H - bottom - top);
  const per = { hour: "hour", day: "day", week: "week", month: "month", year: "year" }[bk.unit];
  const spanText = zoom === "day" ? `${weekday(selected)} ${selected}` : `${dayFromNumber(bk.from)} – ${dayFromNumber(bk.end - 1)}`;
  $("chart-caption").textContent = `Records per ${per}, ${spanText}`;
  const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "data-unit": bk.unit, "data-zoom": zoom,
    "aria-label": `Records per ${per}, ${spanText}` });
  for (const frac of [0, 0.5, 1]) {
    const v = Math.round(max * frac), yy = y(v);
    chart.append(svg("line", { class: "grid", x1: left, x2: W - right, y1: yy, y2: yy }),
                 svg("text", { class: "axis", x: left - 4, y: yy + 4, "text-anchor": "end" }, String(v)));
  }
  let lastLabel = -Infinity;
  for (const [slot, label] of ticks(bk.from, bk.end, bk.unit, px)) {
    const xx = x(slot);
    chart.append(svg("line", { class: "tick", x1: xx, x2: xx, y1: H - bottom, y2: H - bottom + 4 }));
    if (xx - lastLabel < 30 || xx + 2 + label.length * 6.5 > W) continue;  // no label cut at the edge
    chart.append(svg("text", { class: "axis", x: xx + 2, y: H - 6 }, label));
    lastLabel = xx;
  }
  // the chosen day: a band over its bar (the whole chart is that day when zoomed to a day)
  const sel = dayNumber(selected), todayN = today() ? dayNumber(today()) : null;
  if (bk.unit !== "hour") {
    const a = bucketStart(sel, bk.unit), b = bucketNext(a, bk.unit);
    const bx = x(a), bw = Math.max(x(b) - bx, 2);
    chart.append(svg("rect", { class: "chosen", x: bx, y: top - 6, width: bw, height: H - bottom - top + 6, "data-day": selected }));
    const label = selected + (selected === today() ? " · today" : "");
    const rightSide = bx + bw + 4 + label.length * 6.5 < W - right;
    chart.append(svg("text", { class: "chosen-label", x: rightSide ? bx + bw + 4 : bx - 4, y: top + 4,
      "text-anchor": rightSide ? "start" : "end", "data-day": selected }, label));
    if (todayN !== null && todayN >= bk.from && todayN < bk.end && bucketStart(todayN, bk.unit) !== a) {
      const tx = x(todayN + 0.5);
      chart.append(svg("line", { class: "today", x1: tx, x2: tx, y1: top - 6, y2: H - bottom, "data-day": today() }),
                   svg("text", { class: "today-label", x: tx - 3, y: top + 4, "text-anchor": "end" }, "today"));
    }
  } else {
    chart.append(svg("text", { class: "chosen-label", x: left + 4, y: top + 4, "data-day": selected },
      `${weekday(selected)} ${selected}` + (selected === today() ? " · today" : "")));
  }
  for (const b of bk.list) {
    if (!b.count) continue;
    const bx = x(b.a), bw = x(b.b) - bx, gap = Math.min(2, bw * 0.2);
    const from = bk.unit === "hour" ? null : dayFromNumber(b.a), to = bk.unit === "hour" ? null : dayFromNumber(b.b - 1);
    const chosen = bk.unit === "hour" ? false : sel >= b.a && sel < b.b;
    const target = bk.unit === "hour" ? null : b.firstDay;
    const open = bk.unit === "hour" ? () => showHour(b.a)
      : () => go(dayHash(bk.unit === "day" ? from : target, { day: null, week: "month", month: "month", year: "year" }[bk.unit] || undefined));
    chart.append(svg("rect", { class: "bar" + (chosen ? " selected" : ""), x: bx + gap / 2, y: y(b.count),
      width: bw - gap, height: Math.max(H - bottom - y(b.count), 1), "data-unit": bk.unit, "data-count": b.count,
      "data-day": bk.unit === "day" ? from : null, "data-from": from, "data-to": to, "data-hour": bk.unit === "hour" ? b.a : null,
      onclick: open }, svg("title", {}, `${bucketLabel(b, bk.unit)}: ${plural(b.count, "record")}`)));
  }
  // markers: one ◆ per bar that holds any (per hour when zoomed to a day)
  const marks = new Map();
  for (const [day, ms] of state.markersByDay) for (const m of ms) {
    const n = dayNumber(day);
    if (bk.unit === "hour" ? day !== selected : n < bk.from || n >= bk.end) continue;
    const slot = bk.unit === "hour" ? hourOf(m.ts) : bucketStart(n, bk.unit);
    if (!marks.has(slot)) marks.set(slot, []);
    marks.get(slot).push(m);
  }
  for (const [slot, ms] of marks) {
    const next = bk.unit === "hour" ? slot + 1 : bucketNext(slot, bk.unit);
    const mx = (x(slot) + x(next)) / 2;
    const open = ms.some((m) => m.status === "open");
    chart.append(svg("path", { class: "marker" + (open ? "" : " done"), d: `M${mx} 3 l5 6 l-5 6 l-5 -6 z`,
      "data-day": ms[0].day, "data-days": [...new Set(ms.map((m) => m.day))].join(" "),
      onclick: () => go(dayHash(ms[0].day)) }, svg("title", {}, ms.map((m) => `◆ ${m.day} ${m.text} (${m.status})`).join("\n"))));
  }
  fill(box, chart);
  document.querySelectorAll("#zoom button[data-zoom]").forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.zoom === zoom)));
}

function showHour(h) {
  const li = document.querySelector(`#day li[data-hour="${h}"]`);
  if (!li) return;
  document.querySelectorAll("#day li.target").forEach((x) => x.classList.remove("target"));
  li.classList.add("target");
  li.setAttribute("tabindex", "-1");
  li.scrollIntoView({ block: "center" });
  li.focus({ preventScroll: true });
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

// A conversation's name: the title its source kept (or its first user line), else a short session id.
// A title that is only the line shown right under it is left out.
function shortSession(s) { return s && s.length > 16 ? s.slice(0, 8) + "…" : s; }
function conversation(rec) {
  if (!rec.session) return null;
  const title = rec.session_title;
  const echo = title && (rec.text || "").split(/\s+/).join(" ").trim().startsWith(title.replace(/…$/, ""));
  return el("span", { class: "conv", title: `session ${rec.session}`, "data-session": rec.session },
    title && !echo ? [el("span", { class: "conv-title", text: title }), el("span", { class: "conv-id", text: ` · ${shortSession(rec.session)}` })]
                   : el("span", { class: "conv-id", text: `session ${shortSession(rec.session)}` }));
}

// Rows of a log: each names its conversation where a new one starts.
function logRows(records, timeCell, target) {
  let prev = null;
  return records.map((rec) => {
    const conv = rec.session !== prev ? conversation(rec) : null;
    prev = rec.session;
    return el("li", { id: `rec-${rec.id}`, class: rec.id === target ? "target" : null, "data-id": rec.id,
        "data-hour": hourOf(rec.ts), tabindex: rec.id === target ? "-1" : null },
      timeCell(rec),
      el("span", { class: "who" }, roleBadge(rec.role), rec.actor && rec.actor !== rec.role ? ` ${rec.actor}` : ""),
      el("div", { class: "body" }, conv, el("p", { class: "text", text: rec.text })));
  });
}

async function showTimeline(r) {
  await loadDays();
  const z = r.params.get("zoom");
  state.zoom = ZOOMS.includes(z) ? z : (state.zoom || "all");
  const days = state.days;
  // No day asked for: today, where the open markers are ("where are we now").
  const day = r.arg || today() || (days.length ? days[days.length - 1].day : null);
  const input = $("day-input");
  if (days.length) { input.min = days[0].day; input.max = [days[days.length - 1].day, today() || ""].sort().pop(); }
  input.value = day || "";
  $("prev-day").disabled = !day || !neighbour(day, -1);
  $("next-day").disabled = !day || !neighbour(day, +1);
  $("to-today").disabled = !today() || day === today();
  const box = $("day");
  if (!day) { drawChart(day); fill(box); return; }
  const out = await api("/view/day", { day });
  state.day = day;
  state.dayRecords = out.records;
  drawChart(day);
  const target = r.params.get("rec");
  const log = el("ol", { class: "log" }, logRows(out.records, (rec) => el("span", { class: "time", text: clock(rec.ts) }), target));
  // Today shows every marker still open, wherever it was set, with the ones set or closed today.
  let markers = out.markers, isToday = day === today();
  if (isToday) {
    const ids = new Set(markers.map((m) => m.id));
    markers = [...markers, ...state.overview.markers.filter((m) => m.status === "open" && !ids.has(m.id))]
      .sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0));
  }
  const marks = markers.length ? el("ul", { class: "markers", "aria-label": isToday ? "Open markers: where we are now" : "Markers" }, markers.map((m) =>
    el("li", { class: m.status, "data-id": m.id },
      el("strong", { text: m.status === "done" ? "✓ done " : "◆ open " }),
      m.text,
      el("span", { class: "count" }, " — set ", m.day === day ? m.day : dayLink(m.day, null, m.day), ` ${clock(m.ts)}` +
        (m.closed_at ? `, closed ${m.closed_day} ${clock(m.closed_at)}` : ""))))) : null;
  fill(box,
    el("header", {}, el("h3", { id: "day-title", text: `${weekday(day)} ${day}` + (isToday ? " · today" : "") }),
       el("p", { class: "summary", id: "day-count", "data-count": out.records.length,
                 text: (isToday ? `${plural(markers.filter((m) => m.status === "open").length, "open marker")} · ` : "") +
                   (out.records.length || !isToday ? `${plural(out.records.length, "record")}, verbatim, in time order` : "no records yet") })),
    marks, out.records.length ? log : (isToday ? null : el("p", { class: "hint", text: "No records on this day." })));
  if (target) {
    const li = document.getElementById(`rec-${target}`);
    if (li) { li.scrollIntoView({ block: "center" }); li.focus({ preventScroll: true }); }
  }
}

function zoomBy(step) {
  const i = ZOOMS.indexOf(state.zoom) + step;
  if (i >= 0 && i < ZOOMS.length && state.day) go(dayHash(state.day, ZOOMS[i]));
}

function chartKeys(ev) {
  const day = state.day;
  let next = null;
  if (ev.key === "ArrowLeft") next = neighbour(day, -1);
  else if (ev.key === "ArrowRight") next = neighbour(day, +1);
  else if (ev.key === "Home" && state.days.length) next = state.days[0].day;
  else if (ev.key === "End" && state.days.length) next = state.days[state.days.length - 1].day;
  else if (ev.key === "+" || ev.key === "=") { ev.preventDefault(); zoomBy(+1); return; }
  else if (ev.key === "-" || ev.key === "_") { ev.preventDefault(); zoomBy(-1); return; }
  else if (ev.key === "t" && today()) next = today();
  else return;
  ev.preventDefault();
  if (next) go(dayHash(next));
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
      ghostItem(g.name, g.id, [[g.why === "regrouped" ? "moved" : "merged", g.why === "regrouped" ? "regrouped here" : `merged here ${dayOf(g.at)}`]])),
  });
  const archived = t.gone.filter((g) => g.why === "archived" || !g.now_in);
  const gone = archived.length ? el("div", { class: "gone" }, el("h3", { text: "Archived topics" }),
    el("ul", { class: "tree" }, archived.map((g) => ghostItem(g.name, g.id,
      [["archived", g.why === "archived" ? `archived ${dayOf(g.at)}` : g.why]])))) : null;
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
    el("ol", { class: "log" }, logRows(out.records, (rec) => el("span", { class: "time" }, dayLink(rec.day, rec.id, rec.day), el("br"), clock(rec.ts)))),
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
      el("span", { class: "info", text: `${stamp(c.date)} · ${c.author} · ${c.sha.slice(0, 8)}` + (bits.length ? " · " + bits.join(", ") : "") }),
      signatureBadge(c.signature),
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
    c ? el("p", { class: "summary" }, `${stamp(c.date)} · ${c.author} · ${c.sha} `, signatureBadge(c.signature)) : null,
    c && c.body ? el("pre", { class: "lines", text: c.body }) : null,
    el("div", { class: "legend", "aria-label": "Changes" }, counts.filter(([, n]) => n).map(([cls, n]) => el("span", { class: `badge ${cls}`, text: `${n} ${cls}` })),
       d.archived_records ? el("span", { class: "badge archived", text: `${plural(d.archived_records, "trivial turn")} archived` }) : null),
    el("pre", { class: "lines", id: "diff-lines", text: out.lines.join("\n") }),
    out.empty ? null : el("div", { class: "beforeafter" }, side("Before", out.before, beforeMarks), side("After", out.after, afterMarks)));
}

// ----- private records: review and share --------------------------------------------------------------

async function showPrivate() {
  const out = await api("/view/private");
  $("private-summary").textContent = out.records.length
    ? `${plural(out.records.length, "private record")}, oldest first.` : "No private records.";
  fill($("private-list"), ...out.records.map((r) => el("li", { class: "hit", "data-id": r.id },
    el("div", { class: "meta" },
      el("span", { class: "when", text: `${r.day} ${clock(r.ts)}` }), roleBadge(r.role),
      r.secrets.length ? el("span", { class: "badge secret", text: `secrets flagged: ${r.secrets.join(", ")}` }) : null),
    el("p", { class: "text", text: r.text }),
    el("button", { type: "button", class: "share", onclick: () => shareOne(r) }, "Share"))));
}

async function shareOne(r) {
  const warn = r.secrets.length ? `\n\nThe scanner flags: ${r.secrets.join(", ")}.` : "";
  if (!confirm(`Share this record with everyone who reads the store?${warn}\n\n${r.text.slice(0, 500)}`)) return;
  try {
    const out = await post("/share", { ids: [r.id] });
    await showPrivate();
    $("private-summary").textContent = `Shared in commit ${String(out.commit).slice(0, 10)}. ` + $("private-summary").textContent;
  } catch (err) { showError(err); }
}

// ----- keyboard and start-up -------------------------------------------------------------------------

function typing(ev) {
  const t = ev.target;
  return t && (t.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(t.tagName));
}

document.addEventListener("keydown", (ev) => {
  if (ev.altKey || ev.ctrlKey || ev.metaKey || typing(ev)) return;
  const views = { "1": "#/search", "2": "#/timeline", "3": "#/tree", "4": "#/history", "5": "#/private" };
  if (ev.key === "/") {
    ev.preventDefault();
    if (state.route.view !== "search") { state.focus = "q"; go("#/search"); } else $("q").focus();
  }
  else if (views[ev.key]) { ev.preventDefault(); state.navigated = true; go(views[ev.key]); }
});

document.addEventListener("DOMContentLoaded", async () => {
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    location.reload();
  });
  $("search-form").addEventListener("submit", (ev) => { ev.preventDefault(); state.navigated = false; go("#/search?" + searchParamsFromForm()); });
  $("chart").addEventListener("keydown", chartKeys);
  $("tree").addEventListener("keydown", treeKeys);
  $("prev-day").addEventListener("click", () => { const d = neighbour(state.day, -1); if (d) go(dayHash(d)); });
  $("next-day").addEventListener("click", () => { const d = neighbour(state.day, +1); if (d) go(dayHash(d)); });
  $("to-today").addEventListener("click", () => { if (today()) go(dayHash(today())); });
  document.querySelectorAll("#zoom button[data-zoom]").forEach((b) => b.addEventListener("click", () => go(dayHash(state.day || today(), b.dataset.zoom))));
  $("day-input").addEventListener("change", (ev) => { if (ev.target.value) go(dayHash(ev.target.value)); });
  $("expand-all").addEventListener("click", () => document.querySelectorAll("#tree li.collapsed").forEach((li) => li.querySelector(".toggle").click()));
  $("collapse-all").addEventListener("click", () => document.querySelectorAll("#tree li:not(.collapsed):not(.ghost)").forEach((li) => { const b = li.querySelector(":scope > .node > .toggle"); if (b && !b.disabled) b.click(); }));
  document.querySelectorAll(".top nav a").forEach((a) => a.addEventListener("click", () => { state.navigated = true; }));
  window.addEventListener("hashchange", route);
  let resized = null;
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(() => { if (state.days && state.day && state.route.view === "timeline") drawChart(state.day); }, 150); });
  try {
    state.overview = await api("/view/overview");
    const o = state.overview;
    $("store-name").textContent = o.store;
    const open = o.markers.filter((m) => m.status === "open").length;
    $("counts").textContent = `${plural(o.records, "record")} · ${plural(o.day_count, "day")}` +
      (o.first_day ? ` (${o.first_day} – ${o.last_day})` : "") + ` · ${plural(open, "open marker")}`;
    $("tz").textContent = `times in ${o.timezone}`;
  } catch (err) { showError(err); }
  await route();
});
