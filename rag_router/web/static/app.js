// rag-router's page: ask (streamed answer, route, hits), documents (upload, browse, delete), evaluate.
// Plain JS, no build step, no CDN: it talks to the same JSON API as every other client.
"use strict";
const $ = (id) => document.getElementById(id);
const KEY = "rag-router-key";

function headers(extra = {}) {
  const key = sessionStorage.getItem(KEY);
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function api(method, path, body, isForm = false) {
  const opts = { method, headers: headers(isForm || body === undefined ? {} : { "content-type": "application/json" }) };
  if (body !== undefined) opts.body = isForm ? body : JSON.stringify(body);
  const r = await fetch(path, opts);
  if (r.status === 401) { askKey(); throw new Error("this server needs an API key"); }
  return r;
}

async function failure(r) {
  try { const e = (await r.json()).error; return `${r.status} ${e.code}: ${e.message}`; }
  catch { return `${r.status} ${r.statusText}`; }
}

// --- API key: asked once, kept in this tab only --------------------------------------------
function askKey() { $("key-form").hidden = false; $("key-input").focus(); }
$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem(KEY, $("key-input").value.trim());
  $("key-input").value = "";
  $("key-form").hidden = true;
  $("q").focus();
  loadIntro();
});
$("key-button").addEventListener("click", askKey);
(async () => {  // does this server ask for keys?
  const r = await fetch("/v1/ingest/jobs", { headers: headers() });
  if (r.status === 401) { $("key-button").hidden = false; askKey(); }
})();

// --- tabs -----------------------------------------------------------------------------------
const tabs = [...document.querySelectorAll('[role="tab"]')];
function show(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", on);
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  if (tab.id === "tab-eval") loadEval();
  if (tab.id === "tab-docs") loadList();
}
tabs.forEach((t, i) => {
  t.addEventListener("click", () => show(t));
  t.addEventListener("keydown", (e) => {
    const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (d) { const n = tabs[(i + d + tabs.length) % tabs.length]; n.focus(); show(n); }
  });
});

// --- server-sent events over fetch (EventSource cannot send a key or a POST body) -------------
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: data.join("\n") };
    }
  }
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// --- Ask: the answer first (its sources, a declined answer's reason and near misses, notes),
// then the route and timings folded in a <details>, then every hit ---------------------------------
let hits = [], citations = [];
const routePanel = $("route-panel");
// closed unless the user opened it (kept for later questions): the answer comes first
let routeChoice = null;  // the user's last toggle: true (open), false (closed), null (never touched)
$("route-summary").addEventListener("click", () => { routeChoice = !routePanel.open; });
const foldRoute = (wanted) => { routePanel.open = routeChoice ?? wanted; };

function clearAnswer() {
  $("answer").textContent = ""; $("answer-mode").textContent = "…"; $("passage").hidden = true;
  $("answer-panel").classList.remove("abstained");
  $("answer-why").hidden = true; $("answer-notes").hidden = true; $("notes-list").replaceChildren();
  $("sources-box").hidden = true; $("sources").replaceChildren();
  $("declined").hidden = true; $("declined-hits").replaceChildren();
  $("hits-panel").hidden = false; $("hits").replaceChildren();
  $("route-facts").replaceChildren(); $("timings").replaceChildren(); $("route-brief").textContent = "";
  hits = []; citations = [];
}

// The conversation: the questions asked in this tab, oldest first. A follow-up ("And Article 18?",
// "那第七条呢？") takes the subject it lacks from them (the answer's `history`, at most 20).
let asked = [];
function showConversation() {
  $("conversation").hidden = !asked.length;
  $("conversation-count").textContent = `Follow-ups lean on the ${asked.length} earlier question${asked.length === 1 ? "" : "s"} of this conversation. `;
}
$("new-conversation").addEventListener("click", () => { asked = []; showConversation(); $("q").focus(); });

$("ask-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const query = $("q").value;
  const body = { query, route: $("route").value, stream: true, history: asked.slice(-20) };
  const err = $("ask-error");
  err.hidden = true;
  if ($("filters").value.trim()) {
    try { body.filters = JSON.parse($("filters").value); }
    catch (x) { err.textContent = `Filters are not JSON: ${x.message}`; err.hidden = false; return; }
  }
  $("intro").hidden = true; $("results").hidden = false;
  clearAnswer();
  foldRoute(false);
  $("query-marked").replaceChildren(query);
  $("ask-button").disabled = true;
  let text = "";
  try {
    const r = await api("POST", "/v1/answer", body);
    if (!r.ok) throw new Error(await failure(r));
    for await (const { event, data } of events(r)) {
      const d = JSON.parse(data);
      if (event === "route") showRoute(query, d);
      else if (event === "hits") showHits(d);
      else if (event === "token") { text += d.text; showAnswer(text); }
      else if (event === "done") showDone(query, { ...d, answer: d.answer || text }, body.route === "both");
      else if (event === "error") throw new Error(`${d.error.code}: ${d.error.message}`);
    }
    asked.push(query); showConversation();
  } catch (x) { err.textContent = x.message; err.hidden = false; $("answer-mode").textContent = ""; }
  finally { $("ask-button").disabled = false; }
});

function showDone(query, d, together = false) {  // the final response (the done event's data)
  citations = d.citations || [];
  showAnswer(d.answer || "");
  showHits(d.hits); showRoute(query, d.route); showTimings(d.timings_ms, together);
  $("answer-mode").textContent = `${d.mode}${d.abstained ? " · declined" : ""}${d.degraded ? " · degraded" : ""}`;
  const notes = [...(d.notes || [])];
  if (d.unavailable && d.unavailable.length) notes.push(`Not searched, unavailable: ${d.unavailable.join(", ")}.`);
  if (d.degraded && !notes.length) notes.push("Part of the service did not answer: this is the best answer it could give.");
  $("notes-title").textContent = d.degraded ? "Degraded answer" : "Note";
  $("notes-list").replaceChildren(...notes.map((n) => el("li", {}, n)));
  $("answer-notes").hidden = !notes.length;
  $("answer-panel").classList.toggle("abstained", !!d.abstained);
  $("answer-why").hidden = $("declined").hidden = $("sources-box").hidden = true;  // each shown below when it applies
  $("hits-panel").hidden = false;
  if (d.abstained) {
    $("answer-why").replaceChildren(el("strong", {}, "Why: "), declineReason(d.route));
    $("answer-why").hidden = false;
    $("declined-hits").replaceChildren(...hits.map((h) => el("li", {},
      el("button", { type: "button", class: "link", onclick: () => openHit(h, h.title || h.doc_id) }, h.title || h.doc_id),
      el("span", { class: "meta" }, ` ${h.doc_id} `, el("span", { class: `tier ${h.tier}` }, h.tier)),
      el("p", { class: "preview" }, preview(h.text)))));
    $("declined").hidden = !hits.length;
    $("hits-panel").hidden = true;  // the same passages, listed above
  } else {
    const cited = citations.map((c) => [c.n, sourceHit(c.n)]).filter(([, h]) => h);
    $("sources").replaceChildren(...cited.map(([n, h]) => el("li", { value: n },
      el("button", { type: "button", class: "link", onclick: () => openSource(n) }, h.title || h.doc_id),
      el("span", { class: "meta" }, ` ${h.doc_id}`))));
    $("sources-box").hidden = !cited.length;
  }
}
// the page's own rendering of a final response (the browser tests call it with a made-up one)
window.ragRender = (response, query = "", together = false) => showDone(query, response, together);

function declineReason(route) {  // why nothing was answered, in plain words
  const m = (route && route.missing) || null;
  if (m && m.document_stored === false && m.law) return `No stored document is named “${m.law}”.`;
  if (m && m.clause && m.document) return `${m.clause} is not in ${m.document}.`;
  if (m && m.clause && m.law) return `${m.clause} is not in the ${m.law}.`;
  if (m && m.clause) return `No stored document has ${m.clause}.`;
  return "No passage was relevant enough to answer from.";
}

const preview = (text, n = 180) => {  // one line: a markdown heading's marks dropped, its end marked
  const lines = (text || "").split(/\n+/).map((l) => (/^#{1,6}\s/.test(l) ? l.replace(/^#+\s*/, "") + " —" : l));
  const flat = lines.join(" ").replace(/\s+/g, " ").replace(/ —$/, "").trim();
  return flat.length > n ? flat.slice(0, n).replace(/\s\S*$/, "") + "…" : flat;
};

function showAnswer(text) {  // "[n]" becomes a button that opens source n
  const out = $("answer");
  out.replaceChildren();
  let last = 0;
  for (const m of text.matchAll(/\[(\d+)\]/g)) {
    out.append(text.slice(last, m.index));
    const n = Number(m[1]);
    out.append(el("button", { type: "button", class: "cite", "data-n": n, onclick: () => openSource(n) }, `[${n}]`));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
}

function sourceHit(n) {  // source n: the cited chunk once done says which, else the n-th relevant hit
  const c = citations.find((x) => x.n === n);
  return (c && hits.find((h) => h.chunk_id === c.chunk_id)) || hits.filter((h) => h.relevant !== false)[n - 1] || null;
}

function openSource(n) { const h = sourceHit(n); if (h) openHit(h, `[${n}] ${h.title || h.doc_id}`); }

function openHit(h, heading) {
  const p = $("passage");
  p.replaceChildren(el("h3", {}, heading), el("p", { class: "meta" }, `${h.doc_id} · ${h.tier}`), el("p", { class: "text" }, h.text));
  p.hidden = false;
  p.focus();
}

const FEATURE_WORDS = /\b(latest|recent(?:ly)?|newest|current(?:ly)?|this (?:year|month|week)|today)\b|最近|最新|近期|今年|本月/gi;

function spans(query, f) {  // [start, end, kind] of every feature found in the query
  const out = [];
  for (const c of f.clauses || []) out.push([c.span[0], c.span[1], "clause"]);
  for (const l of f.laws || []) out.push([l.span[0], l.span[1], "law"]);
  const find = (s, kind) => { const i = query.indexOf(s); if (s && i >= 0) out.push([i, i + s.length, kind]); };
  for (const y of f.years || []) find(String(y), "year");
  for (const s of f.identifiers || []) find(s, "identifier");
  for (const s of f.quoted || []) find(s, "quoted");
  if (f.recency) for (const m of query.matchAll(FEATURE_WORDS)) out.push([m.index, m.index + m[0].length, "recency"]);
  out.sort((a, b) => a[0] - b[0]);
  return out.filter((s, i) => i === 0 || s[0] >= out[i - 1][1]);
}

function showRoute(query, route) {
  if (!route) return;
  const f = route.features || {};
  const q = $("query-marked");
  q.replaceChildren();
  let at = 0;
  for (const [a, b, kind] of f.carried ? [] : spans(query, f)) {  // carried: spans of another text
    q.append(query.slice(at, a), el("mark", { class: kind, title: kind }, query.slice(a, b)));
    at = b;
  }
  q.append(query.slice(at));
  const facts = $("route-facts");
  const filters = Object.keys(route.filters || {}).length ? JSON.stringify(route.filters) : "none";
  facts.replaceChildren(
    el("dt", {}, "tiers"), el("dd", {}, (route.tiers || []).join(", ")),
    el("dt", {}, "filters"), el("dd", {}, filters),
    el("dt", {}, "reason"), el("dd", { id: "route-reason" }, route.reason || ""),
  );
  if (f.carried) {  // what an earlier question gave this one
    const what = f.carried.document ? `“${f.carried.document}”` : `“${f.carried.terms}”`;
    facts.append(el("dt", {}, "carried"), el("dd", { id: "route-carried" }, `${what} from “${f.carried.from}”`));
  }
  $("route-brief").textContent = ` · ${(route.tiers || []).join(" + ") || "no tier"}${filters === "none" ? "" : " · filtered"}`;
}

// Stages in the order the search runs them; hot and cold are lanes of one step: side by side
// when both tiers are searched at once, one after the other in the cascade (hot, then cold).
const BEFORE_TIERS = ["features", "embed"], TIERS = ["hot", "cold"];

function timeline(t, together) {  // [{stage, start, ms}], and the scale that holds them all
  const tiers = TIERS.filter((k) => k in t), rest = Object.keys(t).filter((k) => k !== "total" && !tiers.includes(k));
  const rows = [];
  let at = 0;
  for (const s of rest.filter((k) => BEFORE_TIERS.includes(k))) { rows.push({ stage: s, start: at, ms: t[s] }); at += t[s]; }
  const spent = rest.reduce((a, k) => a + t[k], 0), sum = tiers.reduce((a, k) => a + t[k], 0);
  const longest = Math.max(0, ...tiers.map((k) => t[k])), window = (t.total ?? spent + sum) - spent;
  // route "both" always searches the tiers at once; otherwise (a cascade, or a ladder that widened)
  // the response does not say which: the one that fits the total better
  const serial = !together && tiers.length > 1 && Math.abs(window - sum) < Math.abs(window - longest);
  let lane = at;
  for (const s of tiers) { rows.push({ stage: s, start: serial ? lane : at, ms: t[s] }); lane += t[s]; }
  at = serial ? lane : at + longest;
  for (const s of rest.filter((k) => !BEFORE_TIERS.includes(k))) { rows.push({ stage: s, start: at, ms: t[s] }); at += t[s]; }
  const how = tiers.length < 2 ? "" : serial ? " · cold after hot (cascade)" : " · hot and cold in parallel";
  return { rows, scale: Math.max(t.total || 0, at) || 1, how };
}

function showTimings(t, together = false) {  // one lane per stage, all on one time scale: never wider than the box
  const bar = $("timings");
  bar.replaceChildren();
  if (!t) return;
  const { rows, scale, how } = timeline(t, together);
  for (const { stage, start, ms } of rows) {
    const w = Math.min(100, Math.max(0.5, (100 * ms) / scale)), left = Math.min(100 - w, (100 * start) / scale);
    const tip = `${stage}: ${ms.toFixed(1)} ms, from ${start.toFixed(1)} ms`;
    bar.append(el("div", { class: "lane", title: tip },
      el("span", { class: "lane-name" }, stage),
      el("span", { class: "track" }, el("span", { class: `seg ${stage}`, style: `left:${left}%;width:${w}%` })),
      el("span", { class: "lane-ms" }, `${ms.toFixed(1)} ms`)));
  }
  bar.append(el("small", { class: "lane-total" }, `total ${(t.total ?? scale).toFixed(1)} ms${how}`));
  if (t.total !== undefined) $("route-brief").append(` · ${t.total.toFixed(0)} ms`);
}

// What ingestion adds to every chunk (indexers/records.py SYSTEM_METADATA): not the user's.
const INTERNAL = new Set(["char_start", "doc_hash"]);
const userMeta = (m) => Object.fromEntries(Object.entries(m || {}).filter(([k]) => !INTERNAL.has(k)));

function showHits(list) {
  hits = list || [];
  $("hits").replaceChildren(...hits.map((h, i) => {
    const meta = userMeta(h.metadata);
    return el("li", { id: `hit-${i + 1}`, class: h.relevant === false ? "below-floor" : "" },
      el("div", { class: "hit-head" }, el("strong", {}, h.title || h.doc_id), ` ${h.doc_id} `, el("span", { class: `tier ${h.tier}` }, h.tier), ` score ${h.score.toFixed(3)}`,
        h.relevant === false ? el("small", { class: "floor", title: "below the relevance floor: not used to answer" }, " not relevant enough") : ""),
      el("div", { class: "legs" }, Object.entries(h.legs || {}).map(([leg, s]) => `${leg} #${s.rank} (${s.score.toFixed(3)})`).join(" · ")),
      el("p", { class: "text" }, h.text),
      Object.keys(meta).length ? el("details", {}, el("summary", {}, "metadata"), el("pre", {}, JSON.stringify(meta, null, 1))) : "",
    );
  }));
}

// --- the landing hint: what to do, and how much is stored ---------------------------------------
async function loadIntro() {
  const count = $("intro-count");
  try {
    const r = await api("GET", "/v1/documents?limit=1");
    if (!r.ok) throw new Error(await failure(r));
    const { total } = await r.json();
    count.textContent = total
      ? `${total} document${total === 1 ? "" : "s"} stored. Ask a question above, in English or Chinese; each [n] in the answer opens its source.`
      : "Nothing is stored yet: add documents first (below), then ask.";
    $("intro-try").hidden = !total;
  } catch (x) { count.textContent = `Could not count the documents: ${x.message}`; }
}
for (const b of document.querySelectorAll("#intro .sample")) {
  b.addEventListener("click", () => { $("q").value = b.textContent; $("ask-form").requestSubmit(); });
}
loadIntro();

// --- Documents -----------------------------------------------------------------------------------
$("upload-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = new FormData();
  for (const f of $("files").files) form.append("files", f, f.name);
  form.append("tier", $("upload-tier").value);
  const status = $("job-status"), bar = $("job-progress");
  $("file-results").replaceChildren();
  status.textContent = "uploading…";
  try {
    const r = await api("POST", "/v1/ingest/files", form, true);
    if (!r.ok) throw new Error(await failure(r));
    const accepted = await r.json();
    $("file-results").replaceChildren(...accepted.files.map((f) =>
      el("li", { class: f.error ? "error" : "" }, f.error ? `${f.name}: ${f.error}` : `${f.name}: ${f.documents} document(s)`)));
    bar.hidden = false; bar.value = 0;
    const ev = await api("GET", `/v1/ingest/jobs/${accepted.job_id}/events`);
    for await (const { event, data } of events(ev)) {
      const j = JSON.parse(data);
      bar.value = j.total ? (j.done + j.failed) / j.total : 0;
      status.textContent = `job ${j.job_id}: ${j.status}, ${j.done}/${j.total} done, ${j.failed} failed`;
      if (event === "done") {
        bar.value = 1;
        $("file-results").append(...(j.errors || []).map((x) => el("li", { class: "error" }, `${x.id}: ${x.error}`)));
        loadList();
        break;
      }
    }
  } catch (x) { status.textContent = x.message; }
});

const docPath = (id) => "/v1/documents/" + id.split("/").map(encodeURIComponent).join("/");

async function openDoc(id) {
  const view = $("doc-view"), status = $("doc-status");
  view.hidden = true; $("doc-delete").disabled = true;
  $("doc-id").value = id;
  const r = await api("GET", docPath(id));
  if (!r.ok) { status.textContent = await failure(r); return; }
  const d = await r.json();
  const meta = userMeta(d.metadata);
  status.textContent = `${d.id}: ${d.chunks.length} chunk(s) in ${d.tiers.join(", ")}`;
  view.replaceChildren(el("h3", {}, d.title || d.id),
    Object.keys(meta).length ? el("pre", { class: "meta" }, JSON.stringify(meta)) : "",
    el("div", { class: "text" }, d.text || ""));
  view.hidden = false; $("doc-delete").disabled = false;
}

$("doc-form").addEventListener("submit", (e) => { e.preventDefault(); openDoc($("doc-id").value.trim()); });

$("doc-delete").addEventListener("click", async () => {
  const id = $("doc-id").value.trim();
  if (!confirm(`Delete ${id} from every tier?`)) return;
  const r = await api("DELETE", docPath(id));
  $("doc-status").textContent = r.ok ? `deleted ${id}: ${(await r.json()).deleted_chunks} chunk(s)` : await failure(r);
  $("doc-view").hidden = true; $("doc-delete").disabled = true;
  loadList();
});

// --- the stored documents: GET /v1/documents, a page at a time (the cursor), filtered ------------
const LIST_PAGE = 25;
const listed = { cursor: null, shown: 0, asked: 0 };  // asked: only the latest request's answer is shown

function docRow(d, exact = false) {
  const facts = [d.id, `${d.chunks} chunk${d.chunks === 1 ? "" : "s"}`, d.date].filter(Boolean).join(" · ");
  return el("li", {}, el("button", { type: "button", class: "doc-row", "data-id": d.id, onclick: () => { openDoc(d.id); $("doc-form").scrollIntoView(); } },
    el("strong", {}, d.title || d.id), exact ? el("small", { class: "exact" }, " exact id") : "",
    el("span", { class: "meta" }, `${facts} `, ...d.tiers.map((t) => el("span", { class: `tier ${t}` }, t)))));
}

async function exactId(q) {  // the box also takes a document id: that one first, when it exists
  if (!q) return null;
  const r = await api("GET", docPath(q));
  if (!r.ok) return null;
  const d = await r.json();
  return { id: d.id, title: d.title, tiers: d.tiers, chunks: d.chunks.length, date: d.metadata.date || null };
}

async function loadList(more = false) {
  const q = $("list-q").value.trim(), tier = $("list-tier").value, status = $("list-status");
  const params = new URLSearchParams({ limit: LIST_PAGE });
  if (q) params.set("title_prefix", q);
  if (tier) params.set("tier", tier);
  if (more && listed.cursor) params.set("cursor", listed.cursor);
  const asked = ++listed.asked;
  try {
    const [r, exact] = await Promise.all([api("GET", `/v1/documents?${params}`), more ? null : exactId(q)]);
    if (!r.ok) throw new Error(await failure(r));
    const page = await r.json();
    if (asked !== listed.asked) return;  // a newer search (or page) was asked meanwhile
    const rows = page.documents.map((d) => docRow(d));
    const extra = exact && !page.documents.some((d) => d.id === exact.id) && (!tier || exact.tiers.includes(tier));
    if (extra) rows.unshift(docRow(exact, true));
    if (more) $("doc-list").append(...rows); else $("doc-list").replaceChildren(...rows);
    listed.cursor = page.next_cursor;
    listed.shown = (more ? listed.shown : 0) + page.documents.length;
    $("list-more").hidden = !page.next_cursor;
    const which = [q && `title starting with “${q}”`, tier && `in ${tier}`].filter(Boolean).join(", ");
    const found = page.total
      ? `${listed.shown} of ${page.total} document${page.total === 1 ? "" : "s"}${which ? ` (${which})` : ""}`
      : which ? `No document with a ${which}.` : "Nothing stored yet: upload files above.";
    status.textContent = (extra ? `“${q}” is a document id. ` : "") + found;
  } catch (x) { if (asked === listed.asked) status.textContent = x.message; }
}

$("list-form").addEventListener("submit", (e) => { e.preventDefault(); loadList(); });
$("list-tier").addEventListener("change", () => loadList());
$("list-more").addEventListener("click", () => loadList(true));

// --- Evaluate ------------------------------------------------------------------------------------
const METRICS = ["ndcg@10", "recall@100", "mrr@10", "success@1", "latency_ms_p50", "latency_ms_p99", "queries"];
const ANSWER_METRICS = ["gold@answer", "gold@lead", "cite@gold", "abst@ooc", "false_abst", "median_chars", "queries"];

async function loadEval() {
  const r = await fetch("/ui/evals.json", { headers: headers() });
  const reports = r.ok ? await r.json() : { evals: [], cascade: null };
  $("eval-status").textContent = reports.evals.length ? "" : "No evaluation yet: run `rag-router eval DATASET_DIR` on this data dir.";
  $("eval-tables").replaceChildren(...reports.evals.map((rep) => {
    const rows = [["all", rep], ...Object.entries(rep.by_kind || {})];
    const metrics = "gold@lead" in rep ? ANSWER_METRICS : METRICS;  // an answer report (eval --answers)
    return el("table", {}, el("caption", {}, `${rep.dataset} · ${rep.legs === "answers" ? "answers" : "route " + rep.route} · ${rep.when}`),
      el("tr", {}, el("th", {}, "kind"), ...metrics.map((m) => el("th", {}, m))),
      ...rows.map(([name, v]) => el("tr", {}, el("th", {}, name), ...metrics.map((m) => el("td", {}, fmt(v[m]))))));
  }));
  $("eval-plot").replaceChildren(reports.cascade ? plot(reports.cascade) : "");
}
const fmt = (v) => (v === undefined || v === null ? "" : Number.isInteger(v) ? v : Number(v).toFixed(3));

function plot(points) {  // the cascade trade-off: share of queries that also search cold vs quality
  const ns = "http://www.w3.org/2000/svg", W = 420, H = 240, P = 40;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`); svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "cascade trade-off: cold searched vs nDCG@10");
  const xs = points.map((p) => p.cold_share), ys = points.map((p) => p.ndcg);
  const [y0, y1] = [Math.min(...ys), Math.max(...ys) || 1];
  const px = (x) => P + x * (W - 2 * P), py = (y) => H - P - ((y - y0) / (y1 - y0 || 1)) * (H - 2 * P);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", points.map((p) => `${px(p.cold_share)},${py(p.ndcg)}`).join(" "));
  line.setAttribute("class", "curve");
  svg.append(line);
  for (const [t, x, y] of [["cold searched →", W - P, H - 8], [`nDCG@10 ${y0.toFixed(3)}–${y1.toFixed(3)}`, P, 14]]) {
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", x); label.setAttribute("y", y); label.setAttribute("text-anchor", x > P ? "end" : "start");
    label.textContent = t; svg.append(label);
  }
  return svg;
}
