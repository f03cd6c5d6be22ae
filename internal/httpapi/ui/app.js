// kmirror status page: polls the JSON API and renders it. Plain
// JavaScript, no dependencies; every value from the API is set as text,
// never as HTML. It never asks for every topic: a page of each mirror's
// at a time, and one topic's partitions when a topic is open.
"use strict";
(function () {
  const INTERVAL_SECONDS = 3;
  const TOKEN_KEY = "kmirror.token";
  let token = sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || "";
  let timer = null;
  let busy = false; // a refresh is in flight: it schedules the next one
  let polls = 0; // successful refreshes, shown as data-polls on <body>
  let prevCounters = null; // the previous /api/v1/counters, for rates
  // lastHistory is the last /api/v1/history read, for a new card.
  let lastHistory = { mirrors: {} };
  // prevCopied: each topic's "copied" count at the previous poll
  // ("mirror/topic" -> {copied, at}), for per-topic throughput.
  let prevCopied = new Map();
  let nextCopied = new Map();

  const $ = (id) => document.getElementById(id);

  // el builds an element: attrs are set as attributes (class, data-*),
  // children are nodes or strings (as text).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function badge(text, cls) {
    return el("span", { class: "badge " + (cls || text) }, text);
  }

  // table renders rows under labelled columns; each column is
  // [label, cell function, numeric?]. rowAttrs gives a row's attributes.
  function table(columns, rows, rowAttrs) {
    const head = el("tr", {}, ...columns.map(([label, , num]) => el("th", { class: num ? "num" : null }, label)));
    const body = rows.map((r) => el("tr", rowAttrs ? rowAttrs(r) : {},
      ...columns.map(([label, cell, num]) => el("td", { "data-label": label, class: num ? "num" : null }, cell(r)))));
    return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
  }

  // elapsed is the time since iso as text ("90s", "5m", "2h"), "" when
  // iso is not a time.
  function elapsed(iso) {
    const t = Date.parse(iso);
    if (!iso || isNaN(t) || t <= 0) return "";
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 120) return s + "s";
    if (s < 7200) return Math.round(s / 60) + "m";
    return Math.round(s / 3600) + "h";
  }

  function ago(iso) {
    const e = elapsed(iso);
    return e ? e + " ago" : "never";
  }

  // fmt is n with thousands separators. One formatter for the page:
  // Number.toLocaleString makes one per call, which cost a page of 100
  // topics about 200 ms of script on a loaded machine.
  const numberFormat = new Intl.NumberFormat("en-US");
  const fmt = (n) => (typeof n === "number" ? numberFormat.format(n) : "");
  const count = (n, noun) => fmt(n || 0) + " " + noun + (n === 1 ? "" : "s");
  // fmtBytes is a byte count in MB (10^6, as rate limits are mostly
  // written), KB or B.
  const fmtBytes = (n) => (n >= 1e6 ? +(n / 1e6).toFixed(1) + " MB" : n >= 1e3 ? +(n / 1e3).toFixed(1) + " KB" : n + " B");

  function formatSlots(ss) {
    if (!ss || ss.length === 0) return "none";
    const s = [...ss].sort((a, b) => a - b);
    const parts = [];
    for (let i = 0; i < s.length; ) {
      let j = i;
      while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
      parts.push(j > i ? s[i] + "-" + s[j] : String(s[i]));
      i = j + 1;
    }
    return parts.join(" ");
  }

  // rate is a mirror's throughput between the previous and the current
  // counters, as text; "" until there are two samples.
  function rate(name, cur) {
    if (!prevCounters || !cur) return "";
    const a = prevCounters.mirrors[name], b = cur.mirrors[name];
    const dt = (Date.parse(cur.time) - Date.parse(prevCounters.time)) / 1000;
    if (!a || !b || !(dt > 0)) return "";
    const rps = Math.max(0, (b.records - a.records) / dt), bps = Math.max(0, (b.bytes - a.bytes) / dt);
    const size = bps >= 1e6 ? (bps / 1e6).toFixed(1) + " MB/s" : bps >= 1e3 ? (bps / 1e3).toFixed(1) + " kB/s" : Math.round(bps) + " B/s";
    return fmt(Math.round(rps)) + " records/s, " + size;
  }

  // topicRate is a topic's records/s since the previous poll, "" until
  // there are two samples.
  function topicRate(m, t) {
    const key = m.name + "/" + t.source_topic, now = Date.now();
    nextCopied.set(key, { copied: t.copied || 0, at: now });
    const prev = prevCopied.get(key);
    if (!prev || !(now > prev.at)) return "";
    return fmt(Math.round(Math.max(0, ((t.copied || 0) - prev.copied) / ((now - prev.at) / 1000))));
  }

  // topicErrors is a topic's error, its source gaps: offsets the source
  // deleted before they were copied (skipped, or the partition stopped),
  // and its divergent tails: a mirror copying back after a failover, the
  // target's records the former target never got.
  function topicErrors(t) {
    const out = [];
    if (t.error) out.push(el("span", { class: "error" }, t.error));
    for (const g of t.source_gaps || []) {
      const s = "source gap p" + g.partition + ": offsets " + g.from + ".." + g.to + " (" + fmt(g.records) + ", " + g.state + ")";
      out.push(el("div", { class: g.state === "failed" ? "error" : null }, s));
    }
    for (const d of t.divergent || []) {
      out.push(el("div", {}, "divergent tail p" + d.partition + ": offsets " + d.from + ".." + d.to + " (" + fmt(d.records) + " the former target never got)"));
    }
    return out.length ? el("div", {}, ...out) : "";
  }

  // lagCell is a lag (records) to show. It is null when the worker could
  // not read the source's end offsets since lag_unknown_since: unknown,
  // not 0, and shown apart.
  function lagCell(lag, unknownSince, unit) {
    if (typeof lag === "number") return fmt(lag) + (unit || "");
    const e = elapsed(unknownSince);
    return el("span", { class: "unknown", title: unknownSince ? "the source's end offsets could not be read since " + unknownSince : null },
      e ? "unknown for " + e : "unknown");
  }

  // lagTime is a topic's time lag as text ("" when not behind).
  function lagTime(t) {
    const s = t.lag_seconds || 0;
    if (!(t.lag > 0) || s <= 0) return "";
    return s < 120 ? s.toFixed(1) + " s" : s < 7200 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
  }

  // The topic list. Each mirror's card keeps its own search, state filter
  // and page, and asks /api/v1/status for that page only (failed first):
  // a worker with 10,000 topics sends 100 rows, not 10,000.
  const PAGE_SIZE = 100;
  const STATES = ["failed", "pending", "mirroring"];
  // views: mirror name -> {q, state ("" for all), page}.
  const views = new Map();
  const viewOf = (name) => views.get(name) || { q: "", state: "", page: 0 };
  const isDefault = (v) => !v.q && !v.state && v.page === 0;

  function statusQuery(v) {
    const p = new URLSearchParams({ limit: String(PAGE_SIZE), order: "failed" });
    if (v.q) p.set("topic", v.q);
    if (v.state) p.set("state", v.state);
    if (v.page) p.set("offset", String(v.page * PAGE_SIZE));
    return p;
  }

  function setView(name, change) {
    views.set(name, { ...viewOf(name), ...change });
    refresh();
  }

  const topicHash = (mirror, topic) => "#topic=" + encodeURIComponent(mirror) + "/" + encodeURIComponent(topic);

  // cards: mirror name -> the card's parts. The controls are made once, so
  // that a refresh does not take the focus from the search box.
  const cards = new Map();

  function cardFor(name) {
    let c = cards.get(name);
    if (c) return c;
    c = { head: el("div", { class: "card-head" }), notes: el("div", {}), body: el("div", {}), cluster: el("div", {}), buttons: new Map() };
    let debounce = null;
    c.search = el("input", { type: "search", placeholder: "Search topics", "aria-label": "search topics of " + name, "data-search": name });
    c.search.addEventListener("input", () => {
      clearTimeout(debounce);
      debounce = setTimeout(() => setView(name, { q: c.search.value.trim(), page: 0 }), 200);
    });
    const filters = el("div", { class: "filters", role: "group", "aria-label": "topic state" });
    for (const s of ["", ...STATES]) {
      const b = el("button", { type: "button", "data-filter": s || "all" }, s || "all");
      b.addEventListener("click", () => setView(name, { state: viewOf(name).state === s ? "" : s, page: 0 }));
      c.buttons.set(s, b);
      filters.append(b);
    }
    c.prev = el("button", { type: "button", "data-page": "prev" }, "‹ previous");
    c.next = el("button", { type: "button", "data-page": "next" }, "next ›");
    c.range = el("span", { class: "muted range" });
    c.prev.addEventListener("click", () => setView(name, { page: Math.max(0, viewOf(name).page - 1) }));
    c.next.addEventListener("click", () => setView(name, { page: viewOf(name).page + 1 }));
    const pager = el("div", { class: "pager" }, c.prev, c.range, c.next);
    c.root = el("article", { class: "card", "data-mirror": name }, c.head, c.notes, el("div", { class: "controls" }, c.search, filters), c.body, pager, c.cluster);
    cards.set(name, c);
    return c;
  }

  // sparks is a mirror's or a topic's last hour: records/s and lag.
  function sparks(series, what) {
    const pts = (series && series.points) || [];
    if (pts.length === 0) return el("span", { class: "muted sparks" }, "history: none yet");
    const rps = pts.map((p) => p.records_per_second);
    const lag = pts.map((p) => (typeof p.lag === "number" ? p.lag : null));
    const last = pts[pts.length - 1];
    const span = Math.round((pts.length * series.interval_seconds) / 60);
    return el("span", { class: "sparks", "data-history": String(pts.length) },
      el("span", { class: "spark-box" }, window.kmirrorSpark(rps, { label: what + " records/s, last " + span + " min" }),
        el("span", { class: "muted" }, fmt(Math.round(last.records_per_second)) + " rec/s")),
      el("span", { class: "spark-box" }, window.kmirrorSpark(lag, { label: what + " lag (records), last " + span + " min" }),
        el("span", { class: "muted" }, "lag " + (typeof last.lag === "number" ? fmt(last.lag) : "unknown"))));
  }

  // renderHead is a mirror's card head: its state, lag, throughput (from
  // two readings of the counters) and last hour.
  function renderHead(m, counters, history) {
    const c = cardFor(m.name);
    const throughput = rate(m.name, counters);
    const passed = m.last_pass_at && Date.parse(m.last_pass_at) > 0;
    c.head.replaceChildren(
      el("h3", {}, m.name),
      el("span", { class: "muted" }, m.source + " → " + m.target),
      m.ready ? badge("ready", "ok") : badge("not ready", "notready"),
      el("span", {}, "lag ", lagCell(m.lag, m.lag_unknown_since, " records")),
      throughput && el("span", { class: "rate" }, throughput),
      el("span", { class: "muted" }, passed ? "last pass " + ago(m.last_pass_at) : "no pass yet"),
      sparks(history, m.name));
  }

  function renderMirror(m, counters, history) {
    const c = cardFor(m.name);
    const v = viewOf(m.name);
    // A card's head waits for the counters and the history, drawn right
    // after the topics; a new card gets one at once.
    if (!c.head.hasChildNodes()) renderHead(m, counters, history);
    const notes = [];
    if (m.last_pass_error) notes.push(el("p", { class: "error" }, "Last pass failed: " + m.last_pass_error));
    if (m.fenced) notes.push(el("p", { class: "error" }, "Fenced: " + m.fenced));
    const rl = m.rate_limit;
    if (rl) {
      // A mirror held back by its rate limit copies slower than it could:
      // its lag is the limit's doing, not the link's or the target's.
      const limit = rl.bytes_per_second > 0 ? "rate limit " + fmtBytes(rl.bytes_per_second) + "/s" : "topic rate limits";
      notes.push(el("p", { class: rl.throttled ? "throttled" : "muted", "data-throttled": rl.throttled ? "true" : "false" },
        (rl.throttled ? "Held back by its " + limit + " now" : "Within its " + limit) +
        "; held back " + (rl.throttled_seconds + rl.topic_throttled_seconds).toFixed(1) + " s in all"));
    }
    c.notes.replaceChildren(...notes);
    const counts = m.state_counts || {};
    const all = STATES.reduce((n, s) => n + (counts[s] || 0), 0);
    for (const [s, b] of c.buttons) {
      b.textContent = (s || "all") + " " + fmt(s ? counts[s] || 0 : all);
      b.setAttribute("aria-pressed", v.state === s ? "true" : "false");
    }
    const topics = m.topics || [];
    const from = v.page * PAGE_SIZE;
    c.range.textContent = topics.length ? "topics " + fmt(from + 1) + "–" + fmt(from + topics.length) + " of " + fmt(m.topics_total) : "";
    c.prev.disabled = v.page === 0;
    c.next.disabled = from + topics.length >= m.topics_total;
    c.prev.hidden = c.next.hidden = v.page === 0 && m.topics_total <= PAGE_SIZE; // one page: nothing to turn
    if (topics.length === 0) {
      c.body.replaceChildren(el("p", { class: "muted" }, all === 0 && !v.q ? "No topics selected." : "No topic matches."));
    } else {
      c.body.replaceChildren(table([
        ["Source topic", (t) => el("a", { href: topicHash(m.name, t.source_topic), class: "name" }, t.source_topic)],
        ["Target topic", (t) => el("span", { class: "name" }, t.target_topic)],
        ["Partitions", (t) => fmt(t.partitions), true],
        ["State", (t) => badge(t.state)],
        ["Lag", (t) => lagCell(t.lag, t.lag_unknown_since), true],
        ["Behind by", (t) => lagTime(t), true],
        ["Records/s", (t) => topicRate(m, t), true],
        ["Rate limit", (t) => (t.rate_limit ? fmtBytes(t.rate_limit) + "/s" + (t.throttled ? " (held back)" : "") : ""), true],
        ["Error", (t) => topicErrors(t)],
      ], topics, (t) => ({ "data-topic": t.source_topic, "data-state": t.state })));
    }
    c.cluster.replaceChildren(...(m.cluster ? [renderSlots(m.cluster)] : []));
    return c.root;
  }

  // renderSlots is a cluster-mode mirror's workers and their slots.
  function renderSlots(c) {
    const box = el("div", { class: "cluster" },
      el("p", {}, "Cluster: " + c.slots + " slots; this worker ", el("code", {}, c.member || "?"),
        " owns " + formatSlots(c.owned) + "; control plane: " + (c.control_plane ? "yes" : "no")));
    if (c.workers_error) box.append(el("p", { class: "error" }, "Workers as last described (describing the group failed: " + c.workers_error + ")"));
    box.append(table([
      ["Worker", (w) => w.member],
      ["Client ID", (w) => w.client_id],
      ["Host", (w) => w.host],
      ["Slots", (w) => formatSlots(w.slots)],
      ["Control plane", (w) => (w.control_plane ? "yes" : "")],
    ], c.workers || []));
    const lag = Object.entries(c.slot_lag || {}).sort((a, b) => a[0] - b[0]);
    if (lag.length) box.append(el("p", { class: "muted" }, "Lag of this worker's slots (slot: records): " + lag.map(([s, n]) => s + ": " + (typeof n === "number" ? fmt(n) : "?")).join(", ")));
    return box;
  }

  // mirrorsShown is the card order last put on the page: the cards are
  // moved only when it changes (moving one would blur its search box).
  let mirrorsShown = "";

  function renderMirrors(mirrors, counters, hist) {
    const roots = mirrors.map((m) => renderMirror(m, counters, (hist.mirrors || {})[m.name]));
    const key = mirrors.map((m) => m.name).join("\n");
    if (key !== mirrorsShown) {
      $("mirrors").replaceChildren(...roots);
      mirrorsShown = key;
    }
  }

  // renderClusters lists the brokers the worker cannot reach, per
  // cluster, with what to check; nothing when every broker answers.
  function renderClusters(clusters) {
    const failing = [];
    for (const c of clusters) for (const f of c.failing || []) failing.push({ alias: c.alias, ...f });
    $("clusters-section").hidden = failing.length === 0;
    return table([
      ["Cluster", (f) => f.alias],
      ["Broker", (f) => el("span", { class: "addr" }, f.address)],
      ["Failing since", (f) => ago(f.since)],
      ["Failures", (f) => fmt(f.failures), true],
      ["Error", (f) => el("span", { class: "error" }, f.error)],
      ["Check", (f) => f.check],
    ], failing, (f) => ({ "data-cluster": f.alias, "data-broker": f.address }));
  }

  function renderGroups(groups) {
    if (groups.length === 0) return el("p", { class: "muted" }, "No translated groups.");
    return table([
      ["Group", (g) => g.group],
      ["Mirror", (g) => g.mirror],
      ["State", (g) => badge(g.state)],
      ["Last sync", (g) => ago(g.last_sync_at)],
      ["Partitions", (g) => {
        const ps = g.partitions || [];
        if (ps.length === 0) return "none";
        const list = el("ul", {}, ...ps.map((p) => {
          let s = p.source_topic + "/" + p.partition + ": " + fmt(p.source_offset) + " → ";
          s += p.untranslatable ? "untranslatable" + (p.reason ? " (" + p.reason + ")" : "") : fmt(p.target_offset) + " on " + p.target_topic;
          if (p.behind) s += " (behind the copy)";
          return el("li", { class: p.untranslatable ? "error" : null }, s);
        }));
        return el("details", {}, el("summary", {}, ps.length + " partitions"), list);
      }],
      ["Error", (g) => (g.error ? el("span", { class: "error" }, g.error) : "")],
    ], groups, (g) => ({ "data-group": g.group }));
  }

  function renderExtensions(ext) {
    const plugins = ext.plugins || [], listeners = ext.listeners || [];
    if (plugins.length === 0 && listeners.length === 0) return el("p", { class: "muted" }, "None configured.");
    const out = el("div", {});
    if (plugins.length) {
      out.append(table([
        ["Plugin", (p) => p.name],
        ["State", (p) => (p.up ? badge("up", "ok") : badge("down", "failed"))],
        ["PID", (p) => p.pid || "", true],
        ["Restarts", (p) => fmt(p.restarts), true],
        ["Version", (p) => p.version || ""],
      ], plugins, (p) => ({ "data-plugin": p.name })));
    }
    if (listeners.length) {
      out.append(table([
        ["Listener", (l) => l.name],
        ["Type", (l) => l.type],
        ["Mirrors", (l) => (l.mirrors || []).join(", ")],
        ["Health", (l) => (l.healthy ? badge("ok") : badge("failing", "failed"))],
        ["Calls", (l) => fmt(l.calls), true],
        ["Errors", (l) => fmt(l.errors), true],
        ["Last error", (l) => (l.last_error ? el("span", { class: "error" }, l.last_error + " (" + ago(l.last_error_at) + ")") : "")],
      ], listeners, (l) => ({ "data-listener": l.name })));
    }
    return out;
  }

  function renderChanges(changes) {
    if (changes.length === 0) return el("p", { class: "muted" }, "No changes yet.");
    return table([
      ["When", (c) => new Date(c.time).toLocaleTimeString()],
      ["Mirror", (c) => c.mirror],
      ["Change", (c) => badge(c.kind.replace("_", " "), c.kind)],
      ["Name", (c) => c.name || ""],
      ["Target", (c) => c.target || ""],
      ["Detail", (c) => c.detail || ""],
    ], changes, (c) => ({ "data-change": c.kind, "data-name": c.name || "" }));
  }

  // renderClusterList lists every configured cluster with its state, the
  // failing brokers counted (their details are in the next section).
  function renderClusterList(clusters) {
    if (clusters.length === 0) return el("p", { class: "muted" }, "This worker does not report its clusters.");
    return table([
      ["Cluster", (c) => c.alias],
      ["Bootstrap servers", (c) => el("span", { class: "addr" }, (c.bootstrap_servers || []).join(", "))],
      ["State", (c) => ((c.failing || []).length ? badge((c.failing.length === 1 ? "1 broker" : c.failing.length + " brokers") + " not answering", "failed") : badge("reachable", "ok"))],
    ], clusters, (c) => ({ "data-cluster-state": c.alias, "data-failing": String((c.failing || []).length) }));
  }

  // The topic view (#topic=MIRROR/TOPIC): one topic's partitions, offsets
  // on both sides, and its last hour.
  function openTopic() {
    const h = location.hash;
    if (!h.startsWith("#topic=")) return null;
    const [m, t] = h.slice(7).split("/");
    if (!m || !t) return null;
    try {
      return { mirror: decodeURIComponent(m), topic: decodeURIComponent(t) };
    } catch {
      return null; // a hand-edited address: the list
    }
  }

  const offset = (n) => (typeof n === "number" && n >= 0 ? fmt(n) : "?");

  function renderTopic(open, d, err) {
    const back = el("a", { href: "#", class: "back" }, "← all topics");
    const title = el("h2", {}, open.mirror + " / " + open.topic);
    if (err) return [back, title, el("p", { class: "error" }, err)];
    if (!d) return [back, title, el("p", { class: "muted" }, "loading…")];
    const t = d.topic;
    const here = d.partitions.filter((p) => p.here).length;
    const box = el("div", { class: "card", "data-topic-view": t.source_topic },
      el("div", { class: "card-head" },
        el("span", {}, "→ " + t.target_topic),
        badge(t.state),
        el("span", {}, "lag ", lagCell(t.lag, t.lag_unknown_since, " records")),
        lagTime(t) && el("span", {}, "behind by " + lagTime(t)),
        el("span", { class: "muted" }, count(t.copied, "record") + " copied by this worker"),
        sparks(d.history, t.source_topic)),
      topicErrors(t),
      el("p", { class: "muted" }, count(t.partitions, "partition") + ", " + fmt(here) + " copied by this worker. " +
        "Source end: the source's last stable offset; copied to: every source record below it is on the target; target end: the target offset after the last record copied."),
      table([
        ["Partition", (p) => fmt(p.partition), true],
        ["State", (p) => badge(p.state, p.state === "copying" ? "mirroring" : p.state)],
        ["Source end", (p) => offset(p.source_end), true],
        ["Copied to", (p) => offset(p.copied_to), true],
        ["Target end", (p) => offset(p.target_end), true],
        ["Lag", (p) => (p.here ? lagCell(p.lag, p.lag_unknown_since) : ""), true],
        ["Copied", (p) => (p.here ? fmt(p.copied) : ""), true],
        ["Error", (p) => (p.error ? el("span", { class: "error" }, p.error) : "")],
      ], d.partitions, (p) => ({ "data-partition": String(p.partition), "data-state": p.state })));
    return [back, title, box];
  }

  async function pollTopic() {
    const open = openTopic();
    $("topic-view").hidden = !open;
    $("mirrors").hidden = Boolean(open);
    if (!open) return;
    let d = null, err = "";
    try {
      d = await get("api/v1/mirrors/" + encodeURIComponent(open.mirror) + "/topics/" + encodeURIComponent(open.topic));
    } catch (e) {
      if (e instanceof AuthError) throw e;
      err = e.message;
    }
    $("topic-view").replaceChildren(...renderTopic(open, d, err));
  }

  // duration is seconds as "3d 4h", "2h 5m" or "40s".
  function duration(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m " + (s % 60) + "s";
    return s + "s";
  }

  function renderWorker(w) {
    if (!w) return [el("p", { class: "muted" }, "Not described by this server.")];
    $("worker").textContent = "kmirror " + (w.version || "?") + ", up " + duration(w.uptime_seconds);
    return [
      el("p", { "data-worker": "" }, "kmirror ", el("code", {}, w.version || "?"), " (" + w.go_version + "), started " +
        new Date(w.started_at).toLocaleString() + ", up " + duration(w.uptime_seconds) + "."),
      el("details", {}, el("summary", {}, "Configuration in force (secrets masked)"), el("pre", { class: "config" }, w.config)),
    ];
  }

  class AuthError extends Error {}

  // first is the request boot.js started for the first page of topics,
  // taken by the first get of the same path.
  let first = window.kmirrorFirst || null;

  async function get(path) {
    const headers = token ? { Authorization: "Bearer " + token } : {};
    let pending;
    if (first && first.path === path) {
      pending = first.response;
    } else {
      pending = fetch(path, { headers, cache: "no-store", credentials: "same-origin" });
    }
    first = null; // only the page's first request may use it
    const r = await pending;
    if (r.status === 401) throw new AuthError("token required");
    if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()).trim());
    return r.json();
  }

  // optional fetches what an older or smaller server may not serve (501):
  // null then.
  async function optional(path) {
    try {
      return await get(path);
    } catch (e) {
      if (e instanceof AuthError || !/: 501 /.test(e.message)) throw e;
      return null;
    }
  }

  function banner(text) {
    $("banner").textContent = text;
    $("banner").hidden = !text;
  }

  function showLogin(refused) {
    $("login").hidden = false;
    $("main").hidden = true;
    $("overall").textContent = "token required";
    $("overall").className = "badge notready";
    banner(refused ? "The token was refused." : "");
    $("token").focus();
  }

  // statuses fetches the page of topics each card shows: one request for
  // the mirrors showing their first page unfiltered, one more for each
  // mirror searched, filtered or paged.
  async function statuses() {
    const custom = [...views.entries()].filter(([, v]) => !isDefault(v)).map(([name]) => name);
    const [all, ...own] = await Promise.all([
      get("api/v1/status?" + statusQuery(viewOf("")).toString()),
      ...custom.map((name) => get("api/v1/status?" + new URLSearchParams({ mirror: name, ...Object.fromEntries(statusQuery(viewOf(name))) }).toString())),
    ]);
    const byName = new Map();
    for (const r of own) for (const m of r.mirrors || []) byName.set(m.name, m);
    all.mirrors = (all.mirrors || []).map((m) => byName.get(m.name) || m);
    return all;
  }

  let firstRows = false;

  // refresh polls now; one asked for during a poll (a search typed) runs
  // right after it. It schedules the next unless a token is needed first.
  let again = false;
  async function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    clearTimeout(timer);
    let next = true;
    try {
      do {
        again = false;
        next = await poll();
      } while (again && next);
    } finally {
      busy = false;
    }
    if (next) timer = setTimeout(refresh, INTERVAL_SECONDS * 1000);
  }

  // poll fetches and renders once: the topics first, alone (the page's
  // first paint waits for nothing else, and nothing competes with it for
  // the worker: /api/v1/counters gathers every metric), then the rest. It
  // returns false when a token is needed.
  async function poll() {
    if (document.hidden) return true;
    try {
      const status = await statuses();
      $("login").hidden = true;
      $("main").hidden = false;
      $("logout").hidden = !token;
      banner("");
      $("overall").textContent = status.ready ? "ready" : "not ready";
      $("overall").className = "badge " + (status.ready ? "ok" : "notready");
      nextCopied = new Map();
      renderMirrors(status.mirrors || [], null, lastHistory);
      prevCopied = nextCopied;
      const clusters = status.clusters || [];
      $("cluster-list").replaceChildren(renderClusterList(clusters));
      $("clusters").replaceChildren(renderClusters(clusters));
      if (!firstRows && document.querySelector("tr[data-topic]")) {
        // When the first rows were on the page, from the navigation's
        // start: the browser test's first-paint figure.
        firstRows = true;
        document.body.dataset.firstRowsMs = String(Math.round(performance.now()));
      }
      const [hist, counters, groups, ext, changes, worker] = await Promise.all([
        get("api/v1/history"), get("api/v1/counters"), get("api/v1/groups"), get("api/v1/extensions"),
        get("api/v1/changes?limit=100"), optional("api/v1/worker"), pollTopic()]);
      // The mirrors' heads again, with the throughput and the history.
      for (const m of status.mirrors || []) renderHead(m, counters, (hist.mirrors || {})[m.name]);
      prevCounters = counters;
      lastHistory = hist;
      $("groups").replaceChildren(renderGroups(groups.groups || []));
      $("extensions").replaceChildren(renderExtensions(ext));
      $("changes").replaceChildren(renderChanges(changes.changes || []));
      $("worker-info").replaceChildren(...renderWorker(worker));
      $("updated").textContent = "updated " + new Date().toLocaleTimeString();
      document.body.dataset.polls = String(++polls);
    } catch (e) {
      if (e instanceof AuthError) {
        showLogin(Boolean(token));
        return false; // until a token is entered
      }
      // An error is not an absence: keep the last state shown.
      banner("Cannot reach the worker (" + e.message + "); showing the last known state.");
    }
    return true;
  }

  $("interval").textContent = String(INTERVAL_SECONDS);
  $("login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("token").value.trim();
    $("token").value = "";
    sessionStorage.setItem(TOKEN_KEY, token);
    if ($("remember").checked) localStorage.setItem(TOKEN_KEY, token);
    refresh();
  });
  $("logout").addEventListener("click", () => {
    token = "";
    sessionStorage.removeItem(TOKEN_KEY);
    localStorage.removeItem(TOKEN_KEY);
    showLogin(false);
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refresh(); });
  window.addEventListener("hashchange", () => {
    $("topic-view").replaceChildren();
    refresh();
  });
  refresh();
})();
