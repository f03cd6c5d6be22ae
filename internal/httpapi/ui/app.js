// kmirror status page: polls the JSON API and renders it. Plain
// JavaScript, no dependencies; every value from the API is set as text,
// never as HTML.
"use strict";
(function () {
  const INTERVAL_SECONDS = 3;
  const TOKEN_KEY = "kmirror.token";
  let token = sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || "";
  let timer = null;
  let busy = false; // a refresh is in flight: it schedules the next one
  let polls = 0; // successful refreshes, shown as data-polls on <body>
  let prevCounters = null; // the previous /api/v1/counters, for rates
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

  function ago(iso) {
    const t = Date.parse(iso);
    if (!iso || isNaN(t) || t <= 0) return "never";
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 120) return s + "s ago";
    if (s < 7200) return Math.round(s / 60) + "m ago";
    return Math.round(s / 3600) + "h ago";
  }

  const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "");
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

  // lagTime is a topic's time lag as text ("" when not behind).
  function lagTime(t) {
    const s = t.lag_seconds || 0;
    if (!(t.lag > 0) || s <= 0) return "";
    return s < 120 ? s.toFixed(1) + " s" : s < 7200 ? (s / 60).toFixed(1) + " min" : (s / 3600).toFixed(1) + " h";
  }

  function renderMirror(m, counters) {
    const throughput = rate(m.name, counters);
    const passed = m.last_pass_at && Date.parse(m.last_pass_at) > 0;
    const card = el("article", { class: "card", "data-mirror": m.name },
      el("div", { class: "card-head" },
        el("h3", {}, m.name),
        el("span", { class: "muted" }, m.source + " → " + m.target),
        m.ready ? badge("ready", "ok") : badge("not ready", "notready"),
        el("span", {}, "lag " + fmt(m.lag) + " records"),
        throughput && el("span", { class: "rate" }, throughput),
        el("span", { class: "muted" }, passed ? "last pass " + ago(m.last_pass_at) : "no pass yet")));
    if (m.last_pass_error) card.append(el("p", { class: "error" }, "Last pass failed: " + m.last_pass_error));
    const rl = m.rate_limit;
    if (rl) {
      // A mirror held back by its rate limit copies slower than it could:
      // its lag is the limit's doing, not the link's or the target's.
      const limit = rl.bytes_per_second > 0 ? "rate limit " + fmtBytes(rl.bytes_per_second) + "/s" : "topic rate limits";
      card.append(el("p", { class: rl.throttled ? "throttled" : "muted", "data-throttled": rl.throttled ? "true" : "false" },
        (rl.throttled ? "Held back by its " + limit + " now" : "Within its " + limit) +
        "; held back " + (rl.throttled_seconds + rl.topic_throttled_seconds).toFixed(1) + " s in all"));
    }
    const topics = [...(m.topics || [])].sort((a, b) => a.source_topic.localeCompare(b.source_topic));
    if (topics.length === 0) {
      card.append(el("p", { class: "muted" }, "No topics selected."));
    } else {
      card.append(table([
        ["Source topic", (t) => t.source_topic],
        ["Target topic", (t) => t.target_topic],
        ["Partitions", (t) => fmt(t.partitions), true],
        ["State", (t) => badge(t.state)],
        ["Lag", (t) => fmt(t.lag), true],
        ["Behind by", (t) => lagTime(t), true],
        ["Records/s", (t) => topicRate(m, t), true],
        ["Rate limit", (t) => (t.rate_limit ? fmtBytes(t.rate_limit) + "/s" + (t.throttled ? " (held back)" : "") : ""), true],
        ["Error", (t) => topicErrors(t)],
      ], topics, (t) => ({ "data-topic": t.source_topic, "data-state": t.state })));
    }
    const c = m.cluster;
    if (c) {
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
      if (lag.length) box.append(el("p", { class: "muted" }, "Lag of this worker's slots (slot: records): " + lag.map(([s, n]) => s + ": " + n).join(", ")));
      card.append(box);
    }
    return card;
  }

  // renderClusters lists the brokers the worker cannot reach, per
  // cluster, with what to check; nothing when every broker answers.
  function renderClusters(clusters) {
    const failing = [];
    for (const c of clusters) for (const f of c.failing || []) failing.push({ alias: c.alias, ...f });
    $("clusters-section").hidden = failing.length === 0;
    return table([
      ["Cluster", (f) => f.alias],
      ["Broker", (f) => f.address],
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

  class AuthError extends Error {}

  async function get(path) {
    const headers = token ? { Authorization: "Bearer " + token } : {};
    const r = await fetch(path, { headers, cache: "no-store", credentials: "same-origin" });
    if (r.status === 401) throw new AuthError("token required");
    if (!r.ok) throw new Error(path + ": " + r.status + " " + (await r.text()).trim());
    return r.json();
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

  async function refresh() {
    if (busy) return;
    busy = true;
    clearTimeout(timer);
    try {
      await poll();
    } finally {
      busy = false;
    }
  }

  // poll fetches and renders once; it schedules the next poll unless a
  // token is needed first.
  async function poll() {
    if (!document.hidden) {
      try {
        const [status, groups, ext, changes, counters] = await Promise.all([
          get("api/v1/status"), get("api/v1/groups"), get("api/v1/extensions"), get("api/v1/changes?limit=100"),
          get("api/v1/counters")]);
        $("login").hidden = true;
        $("main").hidden = false;
        $("logout").hidden = !token;
        banner("");
        $("overall").textContent = status.ready ? "ready" : "not ready";
        $("overall").className = "badge " + (status.ready ? "ok" : "notready");
        nextCopied = new Map();
        $("clusters").replaceChildren(renderClusters(status.clusters || []));
        $("mirrors").replaceChildren(...(status.mirrors || []).map((m) => renderMirror(m, counters)));
        prevCounters = counters;
        prevCopied = nextCopied;
        $("groups").replaceChildren(renderGroups(groups.groups || []));
        $("extensions").replaceChildren(renderExtensions(ext));
        $("changes").replaceChildren(renderChanges(changes.changes || []));
        $("updated").textContent = "updated " + new Date().toLocaleTimeString();
        document.body.dataset.polls = String(++polls);
      } catch (e) {
        if (e instanceof AuthError) {
          showLogin(Boolean(token));
          return; // until a token is entered
        }
        // An error is not an absence: keep the last state shown.
        banner("Cannot reach the worker (" + e.message + "); showing the last known state.");
      }
    }
    timer = setTimeout(refresh, INTERVAL_SECONDS * 1000);
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
  refresh();
})();
