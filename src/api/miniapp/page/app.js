// The Mini App's script. Identity is Telegram's signed init data, read from the launch
// parameters in the URL fragment (or Telegram.WebApp when a client injects it) and sent as
// `Authorization: tma <initData>`; the server checks it. Everything shown is set with
// textContent (never parsed as HTML).
"use strict";
(function () {
  const launch = new URLSearchParams(location.hash.slice(1));
  const initData = (window.Telegram && window.Telegram.WebApp && window.Telegram.WebApp.initData) || launch.get("tgWebAppData") || "";
  const $ = (id) => document.getElementById(id);

  // Telegram's theme: only colour values are taken.
  try {
    const theme = JSON.parse(launch.get("tgWebAppThemeParams") || "{}");
    for (const [k, v] of Object.entries(theme)) {
      if (/^[a-z_]{1,40}$/.test(k) && /^#[0-9a-fA-F]{3,8}$/.test(String(v))) document.documentElement.style.setProperty("--tg-" + k.replace(/_/g, "-"), v);
    }
  } catch (_) { /* no theme: the defaults */ }

  function status(text, bad) {
    $("status").textContent = text;
    $("status").className = bad ? "bad" : "";
  }

  async function api(method, path, body) {
    const init = { method, headers: { authorization: "tma " + initData } };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch("/app/api/" + path, init);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.error || "failed (" + r.status + ")");
    return data;
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function button(label, onClick, cls) {
    const b = el("button", cls, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function where(m, me) {
    const parts = [];
    if (m.chat_id === null) parts.push("everywhere");
    else if (m.chat_id === me) parts.push("in our private chat");
    else parts.push("in " + (m.chat_title || "a group"));
    parts.push(new Date(m.at).toLocaleString());
    if (m.supplied_by !== null && m.supplied_by !== me) parts.push("told by someone else");
    try {
      const ids = JSON.parse(m.source_ids || "[]");
      if (Array.isArray(ids) && ids.length) parts.push("from message" + (ids.length > 1 ? "s " : " ") + ids.slice(0, 5).map((i) => "#" + Number(i)).join(", "));
    } catch (_) { /* not known */ }
    return parts.join(" · ");
  }

  /** A button's action: the API call, then `done` in the status line and `reload`; an error
   *  goes to the status line. `body` is a function, so a field's value is read on the click. */
  function act(method, path, body, done, reload) {
    return async () => {
      try {
        await api(method, path, body());
        status(done);
        reload();
      } catch (e) { status(e.message, true); }
    };
  }

  /** A memory, with Edit and Forget when `editable`: `base` is its API path ("memories/" or
   *  "group/memories/"), `reload` redraws its list. */
  function memoryRow(m, meta, editable, base, reload, rewordable = true) {
    const li = el("li", "item");
    li.dataset.id = m.id;
    li.append(el("p", "text", (m.attribute ? m.attribute + ": " : "") + m.text), el("p", "meta", meta));
    if (!editable) return li;
    const actions = el("div", "row");
    if (rewordable) {
      actions.append(button("Edit", () => {
        const input = el("textarea");
        input.value = m.text;
        input.maxLength = 500;
        li.replaceChildren(input, button("Save", act("PUT", base + m.id, () => ({ text: input.value }), "Saved.", reload)), button("Cancel", reload));
      }));
    }
    actions.append(button("Forget", act("DELETE", base + m.id, () => undefined, "Forgotten.", reload), "danger"));
    li.append(actions);
    return li;
  }

  // What a group learnt from the person's words is forgotten here, not reworded (the group's
  // admins would not see the change).
  const memoryItem = (m, me) => memoryRow(m, m.kind + " · " + where(m, me), true, "memories/", load, m.chat_id === me);

  // A group's shared memories: opened from the group's link (its start parameter is part of
  // the signed init data; the server maps it to the group and checks membership).
  const groupItem = (m, admin) => memoryRow(m, m.kind + " · " + new Date(m.at).toLocaleString(), admin, "group/memories/", loadGroup);

  async function loadGroup() {
    try {
      const g = await api("GET", "group");
      document.querySelector("[data-tab='group']").hidden = false;
      $("group-hint").textContent = (g.title || "This group") + ": shared memories" + (g.admin ? " (you are an admin: you may edit them)" : "");
      $("group-list").replaceChildren(...g.memories.map((m) => groupItem(m, g.admin)));
      if (!g.memories.length) $("group-list").append(el("li", "hint", "Nothing shared remembered."));
      document.body.dataset.group = "1";
    } catch (e) {
      document.body.dataset.group = "0";
    }
  }

  function reminderItem(r) {
    const li = el("li", "item");
    li.dataset.id = String(r.id);
    li.append(el("p", "text", r.text), el("p", "meta", "next: " + (r.next_run_local || "—") + (r.repeat ? " · " + r.repeat : "")));
    const at = el("input");
    at.placeholder = "YYYY-MM-DD HH:MM";
    at.setAttribute("aria-label", "new time");
    const repeat = el("input");
    repeat.placeholder = "repeat: daily, weekdays, weekly, none (empty: as now)";
    repeat.setAttribute("aria-label", "repeat");
    const actions = el("div", "row");
    actions.append(
      at,
      repeat,
      button("Change", act("PUT", "reminders/" + r.id, () => {
        // An empty repeat field keeps the current rule; "none" makes it run once.
        const body = { at: at.value };
        if (repeat.value.trim()) body.repeat = repeat.value.trim();
        return body;
      }, "Changed.", load)),
      button("Cancel reminder", act("DELETE", "reminders/" + r.id, () => undefined, "Cancelled.", load), "danger"),
    );
    li.append(actions);
    return li;
  }

  // The person's Telegram Business settings (the same as /business and /business notes); the
  // tab shows only while the operator has the feature on.
  function showBusiness(b) {
    document.querySelector("[data-tab='business']").hidden = !b;
    if (!b) return;
    $("business-mode").value = b.mode;
    $("business-notes").value = b.notes;
    $("business-state").textContent = !b.connected
      ? "No Telegram Business account is connected. In Telegram: Settings → Telegram Business → Chatbots, then add this bot."
      : !b.enabled ? "Your Telegram Business connection is turned off." : b.can_reply ? "Connected: I may reply in your chats." : "Connected, without the right to reply: suggestions only, without Send.";
  }
  $("business-save").addEventListener("click", async () => {
    try {
      showBusiness(await api("PUT", "business", { mode: $("business-mode").value, notes: $("business-notes").value }));
      status("Saved.");
    } catch (e) { status(e.message, true); }
  });

  let operator = false;
  async function load() {
    if (!initData) {
      $("hello").textContent = "Open this page from Telegram";
      return;
    }
    try {
      const me = await api("GET", "me");
      $("hello").textContent = "Hello, " + me.user.first_name;
      const list = $("memory-list");
      list.replaceChildren(...me.memories.map((m) => memoryItem(m, me.user.id)));
      if (!me.memories.length) list.append(el("li", "hint", "Nothing remembered about you."));
      const rem = $("reminder-list");
      rem.replaceChildren(...me.reminders.map(reminderItem));
      if (!me.reminders.length) rem.append(el("li", "hint", "No reminders."));
      $("usage-text").textContent = me.usage;
      showBusiness(me.business);
      operator = me.operator;
      document.body.dataset.loaded = "1";
      if (new URLSearchParams(initData).get("start_param")) await loadGroup();
    } catch (e) {
      $("hello").textContent = "Not available";
      status(e.message, true);
    }
  }

  // Operators: the admin API's own routes, with the admin token typed into this page (a
  // header, never a URL) or, for ADMIN_USER_IDS, the signed init data (/app/api/ops/).
  let adminToken = "";
  async function admin(method, path, body) {
    if (!adminToken) return api(method, "ops/" + path, body);
    const init = { method, headers: { authorization: "Bearer " + adminToken } };
    if (body !== undefined) {
      init.headers["content-type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch("/api/v1/" + path, init);
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(data.error || "failed (" + r.status + ")");
    return data;
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      if (window.uPlot) return resolve();
      const css = el("link");
      css.rel = "stylesheet";
      css.href = "/app/uplot.min.css";
      document.head.append(css);
      const js = el("script");
      js.src = src;
      js.onload = resolve;
      js.onerror = reject;
      document.head.append(js);
    });
  }

  const daySecs = (day) => Date.parse(day + "T00:00:00Z") / 1000;
  // Every UTC day from the first with data (at most 90 back, at least 14) to today: a chart
  // of a few days still shows them in place, and a quiet day as a zero.
  function dayRange(days) {
    const today = new Date().toISOString().slice(0, 10);
    const first = [...days, new Date(Date.now() - 13 * 86400000).toISOString().slice(0, 10)].sort()[0];
    const out = [];
    for (let t = Math.max(daySecs(first), daySecs(today) - 89 * 86400); t <= daySecs(today); t += 86400) out.push(new Date(t * 1000).toISOString().slice(0, 10));
    return out;
  }
  const compact = (v) => (Math.abs(v) >= 1e6 ? (v / 1e6).toFixed(1) + "M" : Math.abs(v) >= 1e3 ? (v / 1e3).toFixed(1) + "k" : String(Math.round(v * 100) / 100));
  const COLORS = ["#2481cc", "#e8a33d", "#3fa34d", "#c94f4f", "#8a5cc2", "#4fb3bf"];
  window.miniappCharts = {};

  // Series over the union of `days`: one array per name, 0 where a day has no row.
  function chart(id, days, series, fmt, range) {
    const target = $(id);
    target.replaceChildren();
    const data = [days.map(daySecs), ...series.map((s) => s.values)];
    window.miniappCharts[id] = { days, series: series.map((s) => ({ label: s.label, values: s.values })) };
    const opts = {
      width: Math.max(280, target.clientWidth || 340),
      height: 180,
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, value: (u, v) => (v == null ? "—" : (fmt || compact)(v)) }))],
      axes: [{}, { size: 64, values: (u, vals) => vals.map(fmt || compact) }],
      scales: range ? { y: { range } } : undefined,
    };
    new window.uPlot(opts, data, target);
  }

  function sumBy(rows, days, keyOf, valueOf) {
    const out = {};
    for (const r of rows) {
      const k = keyOf(r);
      out[k] = out[k] || days.map(() => 0);
      out[k][days.indexOf(r.day)] += valueOf(r) || 0;
    }
    return out;
  }

  async function loadOps() {
    const [costs, activity, pairings, sessions] = await Promise.all([
      admin("GET", "costs?period=all"),
      admin("GET", "activity?days=30"),
      admin("GET", "pairings"),
      admin("GET", "sessions?limit=50"),
    ]);
    await loadScript("/app/uplot.min.js");
    $("token-form").hidden = true;
    $("ops-view").hidden = false;
    const days = dayRange(costs.rows.map((r) => r.day));
    const one = (f) => Object.values(sumBy(costs.rows, days, () => "all", f))[0] || days.map(() => 0);
    const input = one((r) => r.prompt_tokens - r.cached_tokens);
    const cached = one((r) => r.cached_tokens);
    const output = one((r) => r.output_tokens);
    chart("chart-tokens", days, [{ label: "input (not cached)", values: input }, { label: "cached input", values: cached }, { label: "output", values: output }]);
    const byModel = sumBy(costs.rows, days, (r) => r.model, (r) => r.cost_usd);
    chart("chart-cost", days, Object.entries(byModel).map(([m, v]) => ({ label: m, values: v.map((x) => Math.round(x * 1e6) / 1e6) })), (v) => "$" + (v >= 1 ? v.toFixed(2) : v.toPrecision(2)));
    chart("chart-cached", days, [{ label: "cached share", values: days.map((d, i) => (input[i] + cached[i] ? cached[i] / (input[i] + cached[i]) : 0)) }], (v) => Math.round(v * 100) + "%", [0, 1]);
    const aDays = dayRange([...activity.turns, ...activity.messages, ...activity.failures].map((r) => r.day));
    const col = (rows, k) => aDays.map((d) => (rows.find((r) => r.day === d) || {})[k] || 0);
    chart("chart-activity", aDays, [{ label: "messages received", values: col(activity.messages, "received") }, { label: "messages sent", values: col(activity.messages, "sent") }, { label: "turns", values: col(activity.turns, "turns") }]);
    chart("chart-failures", aDays, [{ label: "failed turns", values: col(activity.turns, "failed") }, { label: "dead letters", values: col(activity.failures, "dead_letters") }, { label: "reminders fired", values: col(activity.turns, "scheduled") }]);
    $("personas").replaceChildren(...Object.entries(costs.by_persona || {}).map(([p, v]) => el("li", "item", p + ": $" + v.cost_usd.toFixed(4) + " · " + v.calls + " calls")));
    if (!$("personas").children.length) $("personas").append(el("li", "hint", "No crew personas."));
    const f = activity.free_plan;
    const pct = (k) => Math.round((100 * f.busiest_day_use[k]) / f.daily_limits[k]) + "%";
    $("free-plan").textContent = "Estimate for the busiest of the last " + activity.days + " days: Worker requests " + pct("worker_requests") + ", D1 rows read " + pct("rows_read") + ", rows written " + pct("rows_written") + " of the Free plan's daily limits. " + f.note + ".";
    $("pairings").replaceChildren(...pairings.pairings.map((p) => {
      const li = el("li", "item", (p.name || "user " + p.user_id) + " · code " + p.code);
      li.append(button("Approve", async () => {
        try { await admin("POST", "pairings/" + encodeURIComponent(p.code) + "/approve"); status("Approved."); loadOps(); } catch (e) { status(e.message, true); }
      }));
      return li;
    }));
    if (!pairings.pairings.length) $("pairings").append(el("li", "hint", "None."));
    const b = costs.budgets;
    $("chats").replaceChildren(el("li", "hint", "Budgets: " + b.user_turns_per_hour + " turns per person an hour, " + b.chat_tokens_per_day + " tokens per chat a day, " + b.global_tokens_today + " of " + b.global_tokens_per_day + " tokens used today (settings)."),
      ...sessions.sessions.map((c) => {
        const li = el("li", "item");
        li.append(el("p", "text", (c.title || c.conv) + " · " + c.kind), el("p", "meta", c.messages + " messages · last " + (c.last_message_at ? new Date(c.last_message_at * 1000).toLocaleString() : "—")));
        if (c.kind === "private") {
          const row = el("div", "row");
          for (const [label, access] of [["Allow", "allowed"], ["Block", "blocked"], ["Policy default", null]]) {
            row.append(button(label, async () => {
              try { await admin("PUT", "users/" + c.chat_id + "/access", { access }); status(label + ": done."); } catch (e) { status(e.message, true); }
            }, access === "blocked" ? "danger" : undefined));
          }
          li.append(row);
        }
        return li;
      }));
    document.body.dataset.ops = "1";
  }

  $("token-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    adminToken = $("admin-token").value.trim();
    $("admin-token").value = "";
    try { await loadOps(); } catch (err) { adminToken = ""; status(err.message, true); }
  });

  for (const tab of document.querySelectorAll("[data-tab]")) {
    tab.addEventListener("click", () => {
      status("");
      for (const t of document.querySelectorAll("[data-tab]")) {
        t.classList.toggle("on", t === tab);
        $(t.dataset.tab).hidden = t !== tab;
      }
      if (tab.dataset.tab === "ops" && document.body.dataset.ops !== "1") {
        if (operator) loadOps().catch((e) => status(e.message, true));
        else $("token-form").hidden = false;
      }
    });
  }
  $("forget-all").addEventListener("click", async () => {
    if (!confirm("Forget everything the bot remembers about you?")) return;
    try {
      const r = await api("DELETE", "memories");
      status(r.done);
      load();
    } catch (e) { status(e.message, true); }
  });
  $("export").addEventListener("click", async () => {
    try {
      const data = await api("GET", "export");
      const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
      const a = el("a");
      a.href = url;
      a.download = "my-data.json";
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      status("Exported.");
    } catch (e) { status(e.message, true); }
  });
  load();
})();
