"use strict";
// Burst's dashboard: a page over the HTTP API (docs/api.md), with the API
// key the user enters once (kept in this browser's localStorage). Each view
// refreshes itself every POLL_MS while it is shown; everything it prints is
// set as text, never as HTML, so nothing a job or a log line holds can run
// here.

const KEY = "burst.apiKey";
const POLL_MS = Number(new URLSearchParams(location.search).get("poll")) || 2000;
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

class NeedKey extends Error {}

const $ = (sel) => document.querySelector(sel);

// ---- small helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const fmt = {
  time: (s) => (s ? new Date(s * 1000).toISOString().replace("T", " ").slice(0, 19) : "—"),
  money: (c) => (c === null || c === undefined ? "—" : "$" + Number(c).toFixed(c >= 100 ? 2 : 4)),
  num: (v, d = 4) => (v === null || v === undefined ? "—" : Number(v).toFixed(d)),
  secs: (s) => {
    if (s === null || s === undefined) return "—";
    if (s < 120) return Number(s).toFixed(1) + " s";
    if (s < 7200) return (s / 60).toFixed(1) + " min";
    return (s / 3600).toFixed(1) + " h";
  },
};

const statusBadge = (s) => el("span", {class: "status " + s, text: s});
const link = (href, text) => el("a", {href, text});

function table(headers, rows, id) {
  const head = el("tr", {}, headers.map((h) => {
    const [label, num] = Array.isArray(h) ? h : [h, false];
    return el("th", {class: num ? "num" : null, text: label});
  }));
  const body = rows.map((r) => el("tr", {}, r.map((c) => {
    if (c && typeof c === "object" && !(c instanceof Node) && "num" in c) {
      return el("td", {class: "num " + (c.class || ""), text: c.num});
    }
    return el("td", {}, c);
  })));
  return el("table", {id}, el("thead", {}, head), el("tbody", {}, body));
}
const num = (text, cls) => ({num: text, class: cls});

function facts(pairs) {
  return el("div", {class: "card facts"}, pairs.map(([label, value, id]) =>
    el("div", {}, el("span", {text: label}), el("b", {id}, value))));
}

async function api(path) {
  const key = localStorage.getItem(KEY);
  if (!key) throw new NeedKey();
  const r = await fetch(path, {headers: {Authorization: "Bearer " + key}});
  if (r.status === 401) {
    localStorage.removeItem(KEY);
    throw new NeedKey("That key was refused; enter another.");
  }
  const body = await r.json().catch(() => null);
  if (!r.ok) throw new Error((body && body.error && body.error.message) || `${path}: HTTP ${r.status}`);
  return body;
}

// Every page of a paged list (jobs, sweeps, events) with ?after=, up to max.
async function listAll(path, max = 1000) {
  const out = [];
  let after = "";
  for (;;) {
    const sep = path.includes("?") ? "&" : "?";
    const page = await api(path + sep + "limit=100" + (after ? "&after=" + encodeURIComponent(after) : ""));
    out.push(...page.data);
    if (!page.has_more || !page.data.length || out.length >= max) return out;
    after = page.data[page.data.length - 1].id;
  }
}

// ---- a job's metrics, read incrementally (oldest first) and kept per job

const metricCache = new Map();  // job id -> {after, train: [[step, loss]], evals: [[step, {...}]]}

async function jobMetrics(jobId) {
  const m = metricCache.get(jobId) || {after: "", train: [], evals: []};
  metricCache.set(jobId, m);
  for (;;) {
    const q = `/v1/fine_tuning/jobs/${jobId}/events?order=asc&limit=100` + (m.after ? "&after=" + m.after : "");
    const page = await api(q);
    for (const e of page.data) {
      if (e.type !== "metrics" || !e.data) continue;
      if (e.data.type === "train") m.train.push([e.data.step, e.data.train_loss]);
      else if (e.data.type === "eval") m.evals.push([e.data.step, e.data]);
    }
    if (page.data.length) m.after = page.data[page.data.length - 1].id;
    if (!page.has_more || !page.data.length) return m;
  }
}

// The base model's eval loss: the eval at step 0, before any training.
const baselineOf = (m) => {
  const b = m.evals.find(([step]) => step === 0);
  return b ? b[1].eval_loss : null;
};

function lossChart(container, m) {
  const rows = m.train.map(([s, l]) => [s, {train: l}]).concat(m.evals.map(([s, d]) => [s, {valid: d.eval_loss}]));
  const {x, values} = alignSeries(rows, ["train", "valid"]);
  const base = baselineOf(m);
  const series = [
    {label: "training loss", values: values[0], color: Palette[0]},
    {label: "validation loss", values: values[1], color: Palette[1], points: true},
  ];
  if (base !== null) series.push({label: "base model (validation)", values: x.map(() => base), color: "#6b7280", dash: [6, 4]});
  drawChart(container, {x, series, xLabel: "step", yLabel: "loss", empty: "No steps yet."});
}

// ---- views: each returns a refresh function, called every POLL_MS while shown

const views = {};

views.jobs = async (main) => {
  main.append(el("h1", {text: "Fine-tuning jobs"}), el("div", {id: "jobs"}, el("p", {class: "muted", text: "Loading…"})));
  return async () => {
    const [jobs, usage] = await Promise.all([listAll("/v1/fine_tuning/jobs", 500), api("/v1/usage")]);
    const cost = new Map(usage.runs.map((r) => [r.run, r.total]));
    const rows = jobs.map((j) => [
      link("#/jobs/" + j.id, j.id), statusBadge(j.status), j.model, j.fine_tuned_model || "—",
      num(j.total_steps ? `${j.step}/${j.total_steps}` : String(j.step || 0)),
      j.sweep_id ? link("#/sweeps/" + j.sweep_id, j.sweep_id) : "—", fmt.time(j.created_at), num(fmt.money(cost.get(j.id) ?? 0)),
    ]);
    $("#jobs").replaceChildren(rows.length
      ? table(["Job", "Status", "Model", "Fine-tuned model", ["Steps", true], "Sweep", "Created", ["Cost", true]], rows, "jobs-table")
      : el("p", {class: "muted", text: "No jobs yet: POST /v1/fine_tuning/jobs, or burst jobs create."}));
  };
};

views.job = async (main, id) => {
  main.append(
    el("h1", {}, "Job ", el("span", {id: "job-id", text: id}), " ", el("span", {id: "job-status"})),
    el("div", {id: "job-facts"}),
    el("h2", {text: "Loss"}), el("div", {class: "card chart", id: "chart-loss"}),
    el("h2", {text: "Checkpoints"}), el("div", {id: "job-checkpoints"}),
    el("h2", {text: "Attempts"}), el("div", {id: "job-attempts"}),
    el("h2", {text: "Logs"}), el("pre", {class: "logs", id: "job-logs"}));
  let logAfter = -1, done = false;
  return async () => {
    if (done) return;
    const job = await api("/v1/fine_tuning/jobs/" + id);
    const m = await jobMetrics(id);
    const [cps, usage] = await Promise.all([api(`/v1/fine_tuning/jobs/${id}/checkpoints?limit=100`), api("/v1/usage")]);
    const run = usage.runs.find((r) => r.run === id);
    $("#job-status").replaceChildren(statusBadge(job.status));
    const last = m.train.length ? m.train[m.train.length - 1] : null;
    const lastEval = m.evals.length ? m.evals[m.evals.length - 1][1] : null;
    $("#job-facts").replaceChildren(facts([
      ["Model", job.model], ["Fine-tuned model", job.fine_tuned_model || "—"],
      ["Step", job.total_steps ? `${job.step}/${job.total_steps}` : String(job.step || 0), "job-step"],
      ["Training loss", last ? fmt.num(last[1]) : "—", "job-train-loss"],
      ["Validation loss", lastEval ? fmt.num(lastEval.eval_loss) : "—", "job-valid-loss"],
      ["Base model", fmt.num(baselineOf(m)), "job-baseline"],
      ["Trained tokens", job.trained_tokens ?? "—"], ["Created", fmt.time(job.created_at)],
      ["Finished", fmt.time(job.finished_at)], ["Cost", fmt.money(run ? run.total : 0), "job-cost"],
    ].concat(job.error && job.error.message ? [["Error", job.error.message]] : [])));
    lossChart($("#chart-loss"), m);
    $("#job-checkpoints").replaceChildren(cps.data.length ? table(
      ["Checkpoint", ["Step", true], ["Eval loss", true], ["Base model", true], ["Difference", true], "Kinds", "Created"],
      cps.data.map((c) => {
        const mt = c.metrics || {}, vs = c.vs_baseline || {};
        const diff = vs.eval_loss;
        return [c.fine_tuned_model_checkpoint, num(String(c.step_number)), num(fmt.num(mt.eval_loss)),
          num(fmt.num(mt.baseline && mt.baseline.eval_loss)),
          num(diff === undefined || diff === null ? "—" : (diff > 0 ? "+" : "") + fmt.num(diff),
            vs.better_than_baseline === true ? "better" : vs.better_than_baseline === false ? "worse" : ""),
          (c.kinds || []).join(", "), fmt.time(c.created_at)];
      }), "checkpoints-table") : el("p", {class: "muted", text: "None yet."}));
    $("#job-attempts").replaceChildren(table(
      ["#", "Worker", "Started", "Outcome", ["Queued", true], ["Start-up", true], ["Resumed from", true]],
      (job.attempts || []).map((a) => [String(a.attempt), a.worker || "—", fmt.time(a.started_at), a.outcome || "running",
        num(fmt.secs(a.queued_s)), num(fmt.secs(a.startup_s)), num(a.resumed_from_step ?? "—")])));
    // Logs follow: new lines are appended, and the view stays at the bottom
    // if it was there.
    const pre = $("#job-logs");
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    for (;;) {
      const logs = await api(`/v1/fine_tuning/jobs/${id}/logs?limit=500` + (logAfter >= 0 ? "&after=" + logAfter : ""));
      for (const l of logs.data) pre.append(l.text + "\n");
      if (logs.data.length) logAfter = logs.data[logs.data.length - 1].seq;
      if (!logs.has_more || !logs.data.length) break;
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
    done = TERMINAL.has(job.status);
  };
};

views.sweeps = async (main) => {
  main.append(el("h1", {text: "Sweeps"}), el("div", {id: "sweeps"}));
  return async () => {
    const sweeps = await listAll("/v1/sweeps", 200);
    $("#sweeps").replaceChildren(sweeps.length ? table(
      ["Sweep", "Status", "Metric", "Best run", ["Best value", true], "Runs", ["Wall time", true], ["Cost", true], "Created"],
      sweeps.map((s) => [link("#/sweeps/" + s.id, s.id), statusBadge(s.status), `${s.metric} (${s.metric_goal})`,
        s.best ? link("#/jobs/" + s.best.job_id, s.best.job_id) : "—", num(s.best ? fmt.num(s.best.value) : "—"),
        Object.entries(s.counts || {}).filter(([, n]) => n).map(([k, n]) => `${n} ${k}`).join(", "),
        num(fmt.secs(s.wall_s)), num(fmt.money(s.usage.cost)), fmt.time(s.created_at)]), "sweeps-table")
      : el("p", {class: "muted", text: "No sweeps yet: POST /v1/sweeps, or burst sweep."}));
  };
};

views.sweep = async (main, id) => {
  main.append(el("h1", {}, "Sweep ", el("span", {text: id}), " ", el("span", {id: "sweep-status"})), el("div", {id: "sweep-facts"}),
    el("h2", {text: "Training loss of each run"}), el("div", {class: "card chart", id: "chart-sweep"}),
    el("h2", {text: "Runs"}), el("div", {id: "sweep-runs"}));
  return async () => {
    const s = await api("/v1/sweeps/" + id);
    $("#sweep-status").replaceChildren(statusBadge(s.status));
    $("#sweep-facts").replaceChildren(facts([["Metric", `${s.metric} (${s.metric_goal})`],
      ["Best", s.best ? `run ${s.best.index}: ${fmt.num(s.best.value)}` : "—"], ["Wall time", fmt.secs(s.wall_s)],
      ["Cost", fmt.money(s.usage.cost), "sweep-cost"]]));
    const runs = s.runs.filter((r) => r.job_id);
    const ms = await Promise.all(runs.map((r) => jobMetrics(r.job_id)));
    const rows = [];
    ms.forEach((m, i) => { for (const [step, l] of m.train) rows.push([step, {["r" + i]: l}]); });
    const {x, values} = alignSeries(rows, runs.map((_, i) => "r" + i));
    drawChart($("#chart-sweep"), {x, xLabel: "step", yLabel: "training loss",
      series: runs.map((r, i) => ({label: `run ${r.index} ` + JSON.stringify(r.overrides), values: values[i]}))});
    $("#sweep-runs").replaceChildren(table(["Run", "Job", "Overrides", "Status", ["Steps", true], ["Eval loss", true], ["Cost", true]],
      s.runs.map((r) => [String(r.index), r.job_id ? link("#/jobs/" + r.job_id, r.job_id) : "—", JSON.stringify(r.overrides),
        statusBadge(r.status), num(r.total_steps ? `${r.step}/${r.total_steps}` : "—"), num(fmt.num(r.metrics.eval_loss)),
        num(fmt.money(r.usage.cost))]), "sweep-runs-table"));
  };
};

// The pool over time: each worker counts from when it was asked for until it
// exited (or now), so the chart shows the scale from zero and back to zero.
function poolSeries(pool, nowMs) {
  const edges = [];
  for (const w of pool.data.concat(pool.exited || [])) {
    if (!w.requested_ms) continue;
    edges.push([w.requested_ms, +1]);
    edges.push([w.exited_ms || nowMs, -1]);
  }
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const x = [], y = [];
  let n = 0;
  for (const [t, d] of edges) {
    n += d;
    if (x.length && x[x.length - 1] === t / 1000) y[y.length - 1] = n;
    else { x.push(t / 1000); y.push(n); }
  }
  if (x.length && x[x.length - 1] < nowMs / 1000) { x.push(nowMs / 1000); y.push(n); }
  return {x, y};
}

// "2 x h100, 1 x l40s", or "none".
function gpuCounts(gpus) {
  const n = {};
  for (const g of gpus) n[g.type] = (n[g.type] || 0) + 1;
  const parts = Object.entries(n).map(([t, k]) => `${k} x ${t}`);
  return parts.length ? parts.join(", ") : "none";
}

// Where a worker runs: "CPU slot 0", or "h100 GPU 0,1".
function deviceOf(w) {
  return !w.device || w.device === "cpu" ? `CPU slot ${w.slot}` : `${w.device} GPU ${(w.gpus || []).join(",")}`;
}

views.workers = async (main) => {
  main.append(el("h1", {text: "Workers"}), el("div", {id: "pool-facts"}),
    el("h2", {text: "The pool over time"}), el("div", {class: "card chart", id: "chart-pool"}),
    el("h2", {text: "Live"}), el("div", {id: "workers-live"}),
    el("h2", {text: "Exited (that served you)"}), el("div", {id: "workers-exited"}));
  return async () => {
    const pool = await api("/v1/workers?include=exited");
    const {x, y} = poolSeries(pool, Date.now());
    drawChart($("#chart-pool"), {x, time: true, xLabel: "time", yLabel: "workers",
      yFromZero: true, series: [{label: "workers", values: y, stepped: true}], empty: "No worker has run yet."});
    $("#pool-facts").replaceChildren(facts([["Live workers", String(pool.data.length), "pool-live"],
      ["Slots", String(pool.slots)], ["Threads per slot", String(pool.threads_per_slot)],
      ["GPUs", gpuCounts(pool.gpus || [])], ["Queued", String(pool.queued)]]));
    $("#workers-live").replaceChildren(pool.data.length ? table(["Worker", "State", "Device", "Model", "Job", "Deployment", "Since"],
      pool.data.map((w) => [w.id, statusBadge(w.state), deviceOf(w), w.model || "—", w.job ? link("#/jobs/" + w.job, w.job) : "—",
        w.deployment || "—", fmt.time(w.since)]), "workers-table") : el("p", {class: "muted", text: "None: the pool is at zero."}));
    const exited = (pool.exited || []).slice(-50).reverse();
    $("#workers-exited").replaceChildren(exited.length ? table(["Worker", "Requested", "Exited", ["Lifetime", true], ["Queued", true], "Reason", "Billed"],
      exited.map((w) => [w.id, fmt.time(w.requested_ms / 1000), fmt.time(w.exited_ms / 1000), num(fmt.secs((w.exited_ms - w.requested_ms) / 1000)),
        num(fmt.secs((w.queued_ms || 0) / 1000)), w.exit_reason || "—",
        Object.entries(w.billed_seconds).map(([k, v]) => `${k} ${fmt.secs(v)}`).join(", ")])) : el("p", {class: "muted", text: "None yet."}));
  };
};

views.deployments = async (main) => {
  main.append(el("h1", {text: "Deployments"}), el("div", {id: "deployments"}));
  return async () => {
    const deps = await api("/v1/deployments");
    $("#deployments").replaceChildren(deps.data.length ? table(
      ["Name", "Status", "Checkpoint", ["Replicas", true], ["Min–max", true], ["Busy", true], ["Requests", true], ["Cold starts", true],
        ["Idle", true], ["Replica time", true], ["Cost", true]],
      deps.data.map((d) => [d.name, statusBadge(d.status), d.checkpoint, num(`${d.ready_replicas}/${d.replicas}`),
        num(`${d.min_replicas}–${d.max_replicas}`), num(String(d.busy)), num(String(d.requests)), num(String(d.cold_starts)),
        num(fmt.secs(d.idle_s)), num(fmt.secs(d.replica_seconds)), num(fmt.money(d.cost))]), "deployments-table")
      : el("p", {class: "muted", text: "No deployments: POST /v1/deployments, or burst deploy."}));
  };
};

// Loops: each row is one loop (Tinker's training run), with the Tinker
// session that drives it (docs/loops.md).
views.loops = async (main) => {
  main.append(el("h1", {text: "Loops"}), el("div", {id: "loops"}));
  return async () => {
    const runs = await api("/api/v1/training_runs?limit=200");
    $("#loops").replaceChildren(runs.training_runs.length ? table(
      ["Loop", "Tinker session", "Base model", ["LoRA rank", true], "Last request", ["Requests", true], ["Cold starts", true],
        ["Billed", true], ["Cost", true], "Last checkpoint"],
      runs.training_runs.map((r) => [r.training_run_id, r.burst.session_id, r.base_model, num(String(r.lora_rank)),
        r.last_request_time, num(String(r.burst.requests)), num(String(r.burst.cold_starts)), num(fmt.secs(r.burst.billed_seconds)),
        num(fmt.money(r.burst.cost)), r.last_checkpoint ? r.last_checkpoint.tinker_path : "—"]), "loops-table")
      : el("p", {class: "muted", text: "No loops yet: see docs/loops.md and examples/loops/."}));
  };
};
views.sessions = views.loops;  // the page's earlier address

views.cost = async (main) => {
  main.append(el("h1", {text: "Cost"}), el("div", {id: "cost-facts"}),
    el("h2", {text: "By day"}), el("div", {class: "card chart", id: "chart-cost"}), el("div", {id: "cost-days"}),
    el("h2", {text: "By run"}), el("div", {id: "cost-runs"}));
  return async () => {
    const u = await api("/v1/usage");
    $("#cost-facts").replaceChildren(facts([["Total", fmt.money(u.total_cost), "cost-total"], ["Billed time", fmt.secs(u.total_seconds)],
      ["Slot-hour (dedicated)", fmt.money(Object.values(u.prices.dedicated)[0].per_slot_hour)]]));
    const days = [...new Set(u.data.map((l) => l.day))].sort();
    const perDay = days.map((d) => u.data.filter((l) => l.day === d).reduce((a, l) => a + l.cost, 0));
    drawChart($("#chart-cost"), {x: days.map((d) => Date.parse(d + "T00:00:00Z") / 1000), time: true, xLabel: "day", yLabel: "cost ($)",
      xPad: 86400, yFromZero: true, yFormat: (v) => "$" + Number(v.toPrecision(3)), series: [{label: "cost", values: perDay, bars: true}], empty: "Nothing billed yet."});
    $("#cost-days").replaceChildren(u.data.length ? table(["Day", "Line", "Scope", ["Seconds", true], ["Tokens", true], ["Cost", true]],
      u.data.map((l) => [l.day, l.line, l.scope, num(fmt.num(l.seconds, 1)), num(String(l.tokens)), num(fmt.money(l.cost))]), "cost-table")
      : el("p", {class: "muted", text: "Nothing billed yet."}));
    $("#cost-runs").replaceChildren(u.runs.length ? table(["Run", ["Training and sampling", true], ["Evaluation", true], ["Deployment", true],
      ["Idle", true], ["Total", true]],
      u.runs.map((r) => [r.run ? (r.run.startsWith("ftjob-") ? link("#/jobs/" + r.run, r.run) : r.run) : "(none)",
        num(fmt.money(r.training_and_sampling)), num(fmt.money(r.evaluation)), num(fmt.money(r.deployment)), num(fmt.money(r.idle)),
        num(fmt.money(r.total))]), "cost-runs-table") : el("p", {class: "muted", text: "No runs yet."}));
  };
};

// ---- the key, and the router

function askKey(main, why) {
  main.replaceChildren(el("form", {class: "card key", id: "key-form", onsubmit: (ev) => {
    ev.preventDefault();
    const v = $("#key-input").value.trim();
    if (v) { localStorage.setItem(KEY, v); route(); }
  }}, el("h1", {text: "Sign in"}),
  el("p", {text: why || "Enter an API key of your organisation. It stays in this browser; the page sends it only to this server."}),
  el("p", {class: "muted", text: "burst serve prints where the first key is (DATA/admin.key); burst keys create makes more."}),
  el("input", {id: "key-input", type: "password", autocomplete: "off", placeholder: "API key"}),
  el("button", {type: "submit", text: "Save"})));
}

let generation = 0;

async function route() {
  const gen = ++generation;
  const main = $("#main");
  const [name, arg] = location.hash.replace(/^#\/?/, "").split("/");
  const view = arg ? (name === "jobs" ? "job" : name === "sweeps" ? "sweep" : null) : views[name] ? name : "jobs";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.getAttribute("href") === "#/" + (name || "jobs"));
  const key = localStorage.getItem(KEY);
  $("#signout").hidden = !key;
  $("#who").textContent = key ? "key …" + key.slice(-4) : "";
  if (!key) return askKey(main);
  main.replaceChildren();
  if (!view) { main.append(el("p", {class: "error", text: "No such page."})); return; }
  document.title = "Burst · " + (arg || view);
  const refresh = await views[view](main, arg);
  const tick = async () => {
    if (gen !== generation) return;
    try {
      await refresh();
      $("#view-error") && $("#view-error").remove();
      main.dataset.loaded = String(Date.now());
    } catch (e) {
      if (gen !== generation) return;
      if (e instanceof NeedKey) return askKey(main, e.message || undefined);
      const box = $("#view-error") || main.insertBefore(el("p", {class: "error", id: "view-error"}), main.firstChild);
      box.textContent = e.message;
    }
    if (gen === generation) setTimeout(tick, POLL_MS);
  };
  tick();
}

$("#signout").addEventListener("click", () => { localStorage.removeItem(KEY); route(); });
window.addEventListener("hashchange", route);
route();
