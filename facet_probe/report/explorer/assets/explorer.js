// facet_probe flip explorer. Hand-written vanilla JS (no framework, nothing downloaded): the page is one
// static file opened from disk, offline. Its data: an index in <script id="data"> (runs, the item list with each
// model's flip status) and chunks of items' details (trials, prompts, images), read when one of their items opens:
// inside the page as <script type="application/json" id="chunk-<i>"> elements, or beside it as classic script
// files explorer_data/<token>-<i>.js that call facetProbeExplorerChunk (a page over file:// cannot fetch()).
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const STATUS = ["any", "flipped", "stable", "parse error", "correct", "incorrect"];
  const PAGE = 300; // rows drawn at a time; "show more" draws the next
  // The list's orders (a column's header sorts by it): flipped items first (the default), or as stored, or by question.
  const SORTS = { status: "status", item: "item", question: "question" };
  const DEFAULTS = { facet: "", ds: "", model: "", status: "any", q: "", item: "", tab: "audit", sort: "status" };
  const state = { ...DEFAULTS, shown: PAGE };
  const $ = (sel) => document.querySelector(sel);

  // ---- chunks: an item's details, parsed or loaded on first use ------------------------------------------
  const SPEC = DATA.chunks || { token: "", n: 0, dir: null };
  const chunks = new Map(); // chunk number -> {items, prompts, images}
  const loading = new Map(); // chunk number -> Promise
  window.facetProbeExplorerChunk = (token, i, data) => { if (token === SPEC.token) chunks.set(i, data); };
  const chunkFile = (i) => `${SPEC.dir}/${SPEC.token}-${String(i).padStart(4, "0")}.js`;

  function chunkNow(i) { // the chunk if it is at hand (loaded, or inside the page), else null
    if (chunks.has(i)) return chunks.get(i);
    const node = document.getElementById("chunk-" + i);
    if (!node) return null;
    chunks.set(i, JSON.parse(node.textContent));
    node.remove();
    return chunks.get(i);
  }

  function loadChunk(i) {
    if (!loading.has(i)) loading.set(i, new Promise((resolve, reject) => {
      const s = el("script", { src: chunkFile(i) });
      s.onload = () => chunks.has(i) ? resolve(chunks.get(i))
        : reject(new Error(`${chunkFile(i)} is not this page's data (from another build)`));
      s.onerror = () => { loading.delete(i); reject(new Error(`${chunkFile(i)} could not be read`)); };
      document.head.append(s);
    }));
    return loading.get(i);
  }

  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") node.textContent = v;
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) if (kid !== null && kid !== undefined) node.append(kid);
    return node;
  }

  // ---- index: model names, search text ------------------------------------------------------------
  const models = [...new Set(DATA.items.flatMap((it) => Object.keys(it.models)))].sort();
  const facets = [...new Set(DATA.items.map((it) => it.f))].sort();
  const datasets = [...new Set(DATA.items.map((it) => it.ds))].sort();
  for (const it of DATA.items) it._text = (it.id + " " + it.q + " " + (it.choices || []).join(" ")).toLowerCase();
  const byKey = new Map(DATA.items.map((it) => [it.key, it]));

  function cellMatches(cell, status) {
    if (!cell) return false;
    switch (status) {
      case "any": return true;
      case "flipped": return cell.st === "flipped";
      case "stable": return cell.st === "stable";
      case "parse error": return !!cell.pe;
      case "correct": return cell.acc === 1;
      case "incorrect": return cell.acc !== null && cell.acc !== undefined && cell.acc < 1;
    }
    return true;
  }

  function filtered() {
    const q = state.q.trim().toLowerCase();
    return DATA.items.filter((it) => {
      if (state.facet && it.f !== state.facet) return false;
      if (state.ds && it.ds !== state.ds) return false;
      if (q && !it._text.includes(q)) return false;
      const names = state.model ? [state.model] : Object.keys(it.models);
      return names.some((m) => cellMatches(it.models[m], state.status));
    });
  }

  // Flipped first: the items where more of the models shown flip, then those with a parse error, then the less
  // accurate; ties keep the stored order (facet, dataset, item).
  function flipRank(it) {
    const cells = (state.model ? [state.model] : models).map((m) => it.models[m]).filter(Boolean);
    const accs = cells.map((c) => c.acc).filter((a) => a !== null && a !== undefined);
    return [-cells.filter((c) => c.st === "flipped").length, -cells.filter((c) => c.pe).length,
      accs.length ? accs.reduce((a, b) => a + b, 0) / accs.length : 2];
  }

  const orders = new Map(); // "<sort>\n<model filter>" -> item key -> its place in that order (made once each)
  function place(sort) {
    const id = sort + "\n" + state.model;
    if (!orders.has(id)) {
      let all = DATA.items;
      if (sort === SORTS.question) all = [...all].sort((a, b) => a.q.localeCompare(b.q));
      if (sort === SORTS.status) {
        const ranks = new Map(all.map((it) => [it.key, flipRank(it)]));
        const before = (a, b) => { for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i]; return 0; };
        all = [...all].sort((a, b) => before(ranks.get(a.key), ranks.get(b.key))); // stable: ties as stored
      }
      orders.set(id, new Map(all.map((it, i) => [it.key, i])));
    }
    return orders.get(id);
  }

  function sorted(rows) {
    if (state.sort === SORTS.item) return rows;
    const at = place(state.sort);
    return [...rows].sort((a, b) => at.get(a.key) - at.get(b.key));
  }

  // ---- URL hash: filters, the order and the open item survive a reload and can be linked to ----------
  // Keys (docs/report.md): facet, ds, model, status, q, item, tab, sort; a key at its default is left out.
  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    for (const k of Object.keys(DEFAULTS)) if (params.has(k)) state[k] = params.get(k);
    if (!Object.values(SORTS).includes(state.sort)) state.sort = DEFAULTS.sort;
  }
  function writeHash() {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(DEFAULTS)) if (state[k] !== v) params.set(k, state[k]);
    history.replaceState(null, "", "#" + params.toString());
  }

  // ---- header ----------------------------------------------------------------------------------------
  function provenance() {
    const box = el("details", { class: "prov" }, el("summary", { text: "Provenance (models, settings, versions, cost)" }));
    for (const run of DATA.runs) {
      const p = run.provenance || {};
      box.append(el("div", { text: `${run.name} (${run.kind}): K=${p.k ?? "-"}, seed=${p.seed ?? "-"}, ` +
        `repeats=${p.repeats ?? "-"}, mode ${p.prompt_mode ?? "-"}; started ${p.date ?? "-"}; ` +
        `facet_probe ${p.facet_probe ?? "-"}, commit ${p.git_commit ?? "-"}` }));
      const rows = Object.entries(p.models || {}).map(([name, m]) => el("tr", {},
        el("td", { text: name }), el("td", { text: m.model_id || m.policy || "-" }),
        el("td", { text: m.revision || m.weights || m.commit || "-" }),
        el("td", { text: JSON.stringify(m.settings_sent || {}) }), el("td", { text: m.sampling || "-" }),
        el("td", { text: m.cost_usd === undefined || m.cost_usd === null ? "-" : "$" + Number(m.cost_usd).toFixed(4) })));
      if (rows.length) box.append(el("table", {}, el("tr", {}, ...["model", "id", "revision / weights",
        "settings sent", "sampling", "API cost"].map((h) => el("th", { text: h }))), ...rows));
    }
    return box;
  }

  // Why the distinct prompts are fewer than the trials: trials that read the same text share one prompt.
  function promptCount(r) {
    const n = DATA.n_trials;
    return `${r.prompts} distinct prompts for ${n} trials` + (r.prompts < n ? ": items with fewer possible " +
      "orderings than K (two documents have two) repeat an ordering, and the trials of one ordering (its repeats) " +
      "share one prompt" : "");
  }

  function recoveryNote() {
    const r = DATA.recovery || { prompts: 0, differs: 0, unavailable: 0 };
    if (!r.prompts) return null;
    if (!r.differs && !r.unavailable)
      return el("p", { class: "note ok", id: "recovery", text: `Every prompt shown (${promptCount(r)}) was rendered ` +
        "again from its item and permutation and its hash equals the trial's stored prompt_hash: exactly what the model saw." });
    return el("p", { class: "note warn", id: "recovery", text: `Of the prompts shown (${promptCount(r)}), ${r.differs} rendered today differ ` +
      `from what was stored (hash mismatch) and ${r.unavailable} cannot be rendered (item, facet or prompt mode ` +
      "missing, as in FACET-PROBE v0.0.1 trial files). " +
      "Those orderings are marked: their text is today's rendering, not necessarily what the model saw." });
  }

  function header() {
    const h = $("header");
    const nTrials = DATA.n_trials;
    h.append(el("h1", { text: DATA.title }),
      el("p", { class: "note", text: `${DATA.items.length} items, ${models.length} model(s), ${nTrials} trials` +
        (DATA.attack.length ? `, ${DATA.attack.length} attack samples` : "") +
        ". Flip: the item's answer (its meaning, not the letter) changes across its orderings." }),
      recoveryNote(), provenance());
  }

  // ---- controls --------------------------------------------------------------------------------------
  function select(id, label, values, current, onChange, allLabel) {
    const s = el("select", { id, on: { change: (e) => onChange(e.target.value) } },
      allLabel === null ? null : el("option", { value: "", text: allLabel || "all" }),
      ...values.map((v) => el("option", { value: v, text: v, selected: v === current })));
    return el("label", {}, label + " ", s);
  }

  function controls() {
    const c = $(".controls");
    c.innerHTML = "";
    if (DATA.attack.length && DATA.items.length)
      c.append(el("span", { class: "tabs" }, ...["audit", "attack"].map((t) => el("button", {
        class: state.tab === t ? "on" : null, id: "tab-" + t, text: t === "audit" ? "Audit items" : "Attack samples",
        on: { click: () => { state.tab = t; state.item = ""; refresh(); } } }))));
    if (state.tab === "attack") {
      c.append(select("f-status", "status", ["any", "success", "no success", "rationale changed"], state.status,
        (v) => { state.status = v; refreshList(); }, null));
    } else {
      c.append(select("f-facet", "facet", facets, state.facet, (v) => { state.facet = v; refreshList(); }),
        select("f-dataset", "dataset", datasets, state.ds, (v) => { state.ds = v; refreshList(); }),
        select("f-model", "model", models, state.model, (v) => { state.model = v; refreshList(); }),
        select("f-status", "status", STATUS, state.status, (v) => { state.status = v; refreshList(); }, null));
    }
    const search = el("input", { type: "search", id: "f-search", placeholder: "search item id or text",
      value: state.q, on: { input: (e) => { state.q = e.target.value; refreshList(); } } });
    c.append(search, el("span", { id: "count", class: "note" }));
  }

  // ---- the list --------------------------------------------------------------------------------------
  function badge(name, cell) {
    const cls = cell.st === "flipped" ? "flipped" : cell.st === "stable" ? "stable" : "nopair";
    const acc = cell.acc === null || cell.acc === undefined ? "" : ` acc ${Math.round(cell.acc * 100)}%`;
    return [el("span", { class: "badge " + cls, title: name, text: `${models.length > 1 ? name + ": " : ""}${cell.st}${acc}` }),
      cell.pe ? el("span", { class: "badge perr", text: "parse error" }) : null];
  }

  // An item id ("synthetic_docs::test-00012") may wrap after its "::" rather than inside a word.
  const breakable = (id) => id.split("::").flatMap((part, i, all) =>
    i < all.length - 1 ? [part + "::", el("wbr")] : [part]);

  function refreshList() {
    state.shown = PAGE;
    drawList();
    writeHash();
  }

  function drawList() {
    if (state.tab === "attack") return drawAttackList();
    const rows = sorted(filtered());
    $("#count").textContent = `${rows.length} of ${DATA.items.length} items`;
    const list = $("#list");
    list.innerHTML = "";
    if (!rows.length) { list.append(el("p", { class: "empty", text: "No item matches these filters." })); return; }
    const names = state.model ? [state.model] : models;
    const body = el("tbody");
    for (const it of rows.slice(0, state.shown)) {
      body.append(el("tr", { "data-key": it.key, class: it.key === state.item ? "sel" : null,
        on: { click: () => openItem(it.key) } },
        el("td", { class: "id" }, ...breakable(it.id), el("div", { class: "cell", text: it.f + " / " + it.ds })),
        el("td", {}, ...names.filter((m) => it.models[m]).map((m) => badge(m, it.models[m]))),
        el("td", { class: "q", title: it.q }, el("div", { class: "qtext", text: it.q }))));
    }
    const heads = [["item", SORTS.item, "stored order: facet, dataset, item"],
      ["status", SORTS.status, "flipped first, then parse errors, then the least accurate"],
      ["question", SORTS.question, "by question"]];
    list.append(el("table", { class: "items" },
      el("colgroup", {}, el("col", { class: "c-id" }), el("col", { class: "c-status" }), el("col", { class: "c-q" })),
      el("thead", {}, el("tr", {}, ...heads.map(([h, sort, how]) => el("th", {
        class: state.sort === sort ? "sorted" : null, title: "sort: " + how, "data-sort": sort,
        text: h + (state.sort === sort ? " ▾" : ""), on: { click: () => { state.sort = sort; refreshList(); } } })))),
      body));
    if (rows.length > state.shown)
      list.append(el("button", { class: "more", text: `show ${Math.min(PAGE, rows.length - state.shown)} more`,
        on: { click: () => { state.shown += PAGE; drawList(); } } }));
  }

  // ---- an item: its K orderings side by side ----------------------------------------------------------
  function promptView(hash, chunk) {
    const p = chunk.prompts[hash];
    const box = el("div", { class: "prompt" });
    if (!p || p.recovered === "unavailable") { box.textContent = "(prompt not recoverable: item, facet or prompt mode missing)"; return box; }
    const system = DATA.systems[p.s];
    if (system) box.append(el("details", {}, el("summary", { class: "role", text: "system" }), system));
    for (const [role, parts] of p.m) {
      box.append(el("div", { class: "role", text: role }));
      for (const part of parts) {
        if (typeof part === "string") box.append(part);
        else box.append(el("img", { src: chunk.images[part.img], alt: "image " + part.img.slice(0, 12), title: "sha256 " + part.img }));
      }
    }
    return box;
  }

  function mark(correct) {
    if (correct === true) return el("span", { class: "ok-mark", text: "✓ correct" });
    if (correct === false) return el("span", { class: "bad-mark", text: "✗ wrong" });
    return el("span", { class: "note", text: "correctness unknown" });
  }

  function replyView(t, it) {
    const shown = t.a === null || t.a === undefined ? "—" : t.a;
    // MCQ: the letter as displayed, then the option it names (answers are compared by that meaning);
    // no parsed text stored (FACET-PROBE v0.0.1): the stored answer and what it means
    const text = t.a === null || t.a === undefined ? `${t.mean}` + (t.mean !== t.n ? ` (stored as ${t.n})` : "")
      : it.choices && it.choices.length ? `${shown} (as displayed) → ${t.n} in source order: "${t.mean}"`
      : `"${shown}" → ${t.mean}` + (t.mean !== shown ? " (normalised)" : "");
    const answer = t.mean === null ? el("span", { class: "ans perr", text: "parse error" })
      : el("span", { class: "ans", text });
    const judge = (t.j || []).filter((v) => v.verdict || v.set_verdict).map((v) => el("div", { class: "judge" },
      el("b", { text: `judge ${v.judge}: ` }), `${v.verdict ?? ""} ${v.verdict_label ?? ""}`.trim() || "reference answer",
      v.reason ? el("div", { text: "rationale: " + v.reason }) : null,
      v.set_verdict ? el("div", { text: `set verdict ${v.set_verdict}` + (v.set_reason ? ": " + v.set_reason : "") }) : null));
    return el("div", { class: "reply" },
      el("div", { class: "role", text: `reply · repeat ${t.r}` + (t.err ? " · error" : "") }),
      el("pre", { text: t.err ? "(call failed: " + t.err + ")" : (t.out ?? "") }),
      t.think ? el("details", {}, el("summary", { text: "thinking" }), el("pre", { text: t.think })) : null,
      el("div", {}, "parsed: ", answer, " ", mark(t.c)), ...judge);
  }

  function orderingCards(trials, it, chunk) {
    const byOrdering = new Map();
    for (const t of trials) {
      if (!byOrdering.has(t.o)) byOrdering.set(t.o, []);
      byOrdering.get(t.o).push(t);
    }
    const cards = [];
    for (const [o, trials] of [...byOrdering.entries()].sort((a, b) => a[0] - b[0])) {
      const first = trials[0];
      const p = chunk.prompts[first.h] || {};
      const wrong = trials.some((t) => t.c === false);
      const hashNote = first.seen === "exact" ? `prompt hash ${first.h} ✓ re-rendered exactly`
        : first.seen === "differs" ? `⚠ re-rendered prompt differs from stored hash ${first.h}: not what the model saw`
        : `⚠ prompt ${first.h} not recoverable`;
      cards.push(el("div", { class: "ordering " + (wrong ? "wrong" : "right"), "data-ordering": o },
        el("h3", { text: `ordering ${o}` + (o === 0 ? " (source order)" : "") }),
        el("div", { class: "note", text: `permutation [${first.p.join(", ")}]` + (p.labels && p.labels.length ? ` · labels ${p.labels.join(" ")}` : "") }),
        promptView(first.h, chunk), el("div", { class: "hash " + first.seen, text: hashNote }),
        ...trials.map((t) => replyView(t, it))));
    }
    return el("div", { class: "orderings" }, cards);
  }

  function openItem(key) {
    state.item = key;
    for (const tr of document.querySelectorAll("tr.sel")) tr.classList.remove("sel");
    const row = document.querySelector(`tr[data-key="${CSS.escape(key)}"]`);
    if (row) row.classList.add("sel");
    drawDetail();
    writeHash();
  }

  // Draws the open item whole once its chunk is at hand (loading it first if need be); the promise settles
  // when the detail shown is the open item's.
  function drawDetail() {
    const d = $("#detail");
    d.innerHTML = "";
    if (state.tab === "attack") return drawAttackDetail();
    const it = byKey.get(state.item);
    if (!it) { d.append(el("p", { class: "empty", text: "Choose an item on the left to see its orderings side by side." })); return; }
    const chunk = chunkNow(it.ch);
    if (chunk) return drawItem(d, it, chunk);
    d.append(el("p", { class: "note loading", text: `loading ${it.id} ...` }));
    const key = state.item;
    return loadChunk(it.ch).then(() => { if (state.item === key && state.tab !== "attack") drawDetail(); },
      (err) => { if (state.item !== key) return; d.innerHTML = "";
        d.append(el("p", { class: "empty error", text: `${err.message}: build the page again ` +
          "(python -m facet_probe.explore input=<its run folder(s)>)." })); });
  }

  function drawItem(d, it, chunk) {
    const details = chunk.items[it.key];
    d.append(el("h2", { id: "item-title", text: it.id }),
      el("div", { class: "note", text: `${it.f} / ${it.ds}` + (it.gold !== null && it.gold !== undefined ? ` · gold: ${it.gold}` : "") }),
      el("p", { text: it.q }));
    if (it.choices && it.choices.length)
      d.append(el("div", { class: "note", text: "options in source order: " +
        it.choices.map((c, i) => String.fromCharCode(65 + i) + ". " + c).join("   ") }));
    const names = (state.model ? [state.model] : models).filter((m) => it.models[m]);
    for (const m of names) {
      const cell = it.models[m];
      const run = DATA.run_names[cell.run];
      d.append(el("h2", {}, `${m} `, ...badge(m, cell), DATA.runs.length > 1 && DATA.runs.some((r) => r.name === run) ? el("span", { class: "note", text: ` run ${run}` }) : null), orderingCards(details[m], it, chunk));
    }
  }

  // ---- attack samples ----------------------------------------------------------------------------------
  function attackRows() {
    const q = state.q.trim().toLowerCase();
    return DATA.attack.filter((a) => {
      if (state.status === "success" && !a.success) return false;
      if (state.status === "no success" && a.success) return false;
      if (state.status === "rationale changed" && !a.rationale_changed) return false;
      return !q || (a.sample_id + " " + a.item_id + " " + (a.clean.output || "")).toLowerCase().includes(q);
    });
  }

  function drawAttackList() {
    const rows = attackRows();
    $("#count").textContent = `${rows.length} of ${DATA.attack.length} samples`;
    const list = $("#list");
    list.innerHTML = "";
    const body = el("tbody");
    for (const a of rows.slice(0, state.shown)) {
      body.append(el("tr", { "data-key": a.sample_id, class: a.sample_id === state.item ? "sel" : null,
        on: { click: () => openItem(a.sample_id) } },
        el("td", { text: a.sample_id }), el("td", { text: `${a.attack} · ${a.model}` }),
        el("td", {}, el("span", { class: "badge " + (a.success ? "flipped" : "stable"), text: a.success ? "success" : a.attacked ? "no success" : "not attacked" }),
          a.rationale_changed ? el("span", { class: "badge perr", text: "rationale changed" }) : null)));
    }
    list.append(el("table", { class: "items" }, el("thead", {}, el("tr", {}, ...["sample", "attack · model", "outcome"].map((h) => el("th", { text: h })))), body));
  }

  function side(title, s) {
    return el("div", { class: "side" }, el("h3", { text: title }),
      ...(s.images || []).map((src) => el("img", { src, alt: title + " image" })),
      el("pre", { text: s.output ?? "" }),
      el("div", {}, "answer: ", el("span", { class: "ans", text: s.answer ?? "parse error" }), " ", mark(s.correct)),
      el("div", { class: "note", text: "rationale: " + (s.rationale ?? "") }));
  }

  function drawAttackDetail() {
    const d = $("#detail");
    const a = DATA.attack.find((x) => x.sample_id === state.item);
    if (!a) { d.append(el("p", { class: "empty", text: "Choose a sample on the left." })); return; }
    d.append(el("h2", { text: a.sample_id }), el("div", { class: "note", text: `${a.attack} on ${a.model}, gold ${a.gold}` +
      (a.target ? `, target ${a.target}` : "") + (a.linf_255 !== null && a.linf_255 !== undefined ? `, L∞ ${a.linf_255}/255` : "") +
      (a.error ? `, error: ${a.error}` : "") }),
      el("div", { class: "sides" }, side("clean", a.clean), side("adversarial", a.adv)),
      el("h3", { text: "rationale diff (clean → adversarial)" }),
      el("p", { class: "diff" }, ...(a.rationale_diff || []).flatMap(([op, text]) =>
        [op === "-" ? el("del", { text }) : op === "+" ? el("ins", { text }) : text, " "])));
  }

  // ---- start ------------------------------------------------------------------------------------------
  function refresh() { controls(); drawList(); const drawn = drawDetail(); writeHash(); return drawn; }

  readHash();
  if (!DATA.items.length && DATA.attack.length) state.tab = "attack";
  header();
  const ready = () => { window.explorerReadyAt = performance.now(); document.body.dataset.ready = "1"; };
  Promise.resolve(refresh()).then(ready, ready); // an item linked to (#item=...) is shown before the page says ready
})();
