#!/usr/bin/python3
"""Submit to first training step, cold and warm, against a real `burst serve`.

docs/bench.md, "Serverless runtime". Standard library only.

For each series (cold, warm) the script starts
  burst serve --data TMP --listen 127.0.0.1:0 --slots 1 --threads-per-slot 2
              --scaledown-window S
reads the port from its "listening on http://HOST:PORT" line and the key from
TMP/admin.key, uploads the first --lines lines of examples/support/train.jsonl
and then, one job at a time, POSTs
  {"model": "burst-small", "training_file": F, "recipe": {"max_steps": 1, "batch_size": 4}}
noting the client's wall clock (unix ms) at submit, and waits for the job's
first metrics event (its data.unix_ms is the worker's wall clock when step 1
ended; same machine, same clock) and for the job's success.

  cold: --scaledown-window 1; before each submit, wait until GET /v1/workers
        is empty (the previous worker has exited and its exit was observed).
  warm: --scaledown-window 60; one untimed warm-up job first, then before each
        submit wait until the one worker is idle (model loaded).

Breakdown per job, all wall-clock unix ms on this machine:
  submit        client, just before the POST
  requested     the worker's start request (cold; workers.record.requested_ms
                in DATA/meta.db, read read-only at the end)
  registered    the worker's POST /internal/v1/register (workers.record.started_ms)
  assigned      the attempt's start (job.attempts[0].started_at): the task
                is assigned to the worker; it is delivered on the worker's
                next (long-polled) lease
  train_call    the worker enters Train() (first step's unix_ms minus the "in
                X s" of the worker's "loaded base model ... in X s" message;
                X has 10 ms resolution); delivery and fetching the training
                file come before it
  loop_start    the training loop starts (first step's unix_ms minus its
                wall_s): model load (cold) and tokenising the data before it
  first_step    step 1 ended (metrics data.unix_ms)
  seen          this script's events poll (every 50 ms) first returned the
                metrics event (the worker sends events at most every 0.5 s
                while training, and at the end)

Prints one JSON line per job and one per series on stdout, and a readable
summary on stderr.
"""

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def now_ms():
    return time.time() * 1000.0


def pct(values, p):
    """Nearest-rank percentile."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    rank = max(1, min(len(v), math.ceil(p / 100.0 * len(v))))
    return v[rank - 1]


from burst_api import Api, Server, wait_for  # noqa: E402  (bench/burst_api.py)


def workers(api):
    status, body = api.call("GET", "/v1/workers")
    if status != 200:
        raise RuntimeError("GET /v1/workers: %s %s" % (status, body))
    return body["data"]


def run_job(api, file_id, series, index):
    """Submits one job and follows it to success; returns its timings."""
    body = {"model": "burst-small", "training_file": file_id, "recipe": {"max_steps": 1, "batch_size": 4}}
    t_submit = now_ms()
    status, job = api.call("POST", "/v1/fine_tuning/jobs", body)
    t_answer = now_ms()
    if status != 200:
        raise RuntimeError("submit failed: %s %s" % (status, job))
    job_id = job["id"]

    events = []

    def first_metrics():
        after = events[-1]["id"] if events else ""
        q = "/v1/fine_tuning/jobs/%s/events?order=asc&limit=1000" % job_id + ("&after=" + after if after else "")
        st, page = api.call("GET", q)
        if st != 200:
            raise RuntimeError("events: %s %s" % (st, page))
        events.extend(page["data"])
        return next((e for e in events if e["type"] == "metrics" and e["data"].get("type") == "train"), None)

    metrics = wait_for("the first metrics event of " + job_id, first_metrics, 300, 0.05)
    t_seen = now_ms()  # when a client polling every 50 ms first saw it

    def finished():
        st, j = api.call("GET", "/v1/fine_tuning/jobs/" + job_id)
        return j if st == 200 and j["status"] in ("succeeded", "failed", "cancelled") else None

    final = wait_for(job_id + " to finish", finished, 300, 0.05)
    if final["status"] != "succeeded":
        raise RuntimeError("%s ended %s: %s" % (job_id, final["status"], final.get("error")))
    first_metrics()  # the rest of the events
    att = final["attempts"][0]
    step_ms = float(metrics["data"]["unix_ms"])
    loop_start = step_ms - 1000.0 * float(metrics["data"].get("wall_s", 0.0))
    train_call = None
    warm_reuse = None
    for e in events:
        m = e["message"]
        if m.startswith("loaded base model ") and " in " in m:
            try:
                train_call = step_ms - 1000.0 * float(m.rsplit(" in ", 1)[1].split()[0])
            except ValueError:
                pass
            warm_reuse = False
        elif m.startswith("base model ") and "already loaded" in m:
            warm_reuse = True
    return {
        "bench": "submit_to_first_step", "series": series, "i": index, "job": job_id,
        "worker": att["worker"], "warm_reuse": warm_reuse, "attempts": len(final["attempts"]),
        "submit_ms": t_submit, "answer_ms": t_answer, "assigned_ms": float(att["started_at"]) * 1000.0,
        "train_call_ms": train_call, "loop_start_ms": loop_start, "first_step_ms": step_ms, "seen_ms": t_seen,
        "step_wall_s": metrics["data"].get("wall_s"), "step_tokens": metrics["data"].get("tokens"),
    }


def add_worker_times(rows, data):
    """Worker start request / registration times from DATA/meta.db (read-only)."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(data, "meta.db"), uri=True, timeout=10)
    recs = {}
    for wid, record in db.execute("SELECT id, record FROM workers"):
        recs[wid] = json.loads(record)
    db.close()
    for r in rows:
        w = recs.get(r["worker"], {})
        r["requested_ms"] = w.get("requested_ms")
        r["registered_ms"] = w.get("started_ms")


def phases(r, cold):
    """Named durations (ms) of one job."""
    def d(a, b):
        return None if r.get(a) is None or r.get(b) is None else r[b] - r[a]
    out = {"total": d("submit_ms", "first_step_ms"), "to_step_start": d("submit_ms", "loop_start_ms"),
           "submit_http": d("submit_ms", "answer_ms")}
    if cold:
        out["submit_to_start_request"] = d("submit_ms", "requested_ms")
        out["process_start_to_register"] = d("requested_ms", "registered_ms")
        out["register_to_assigned"] = d("registered_ms", "assigned_ms")
    else:
        out["submit_to_assigned"] = d("submit_ms", "assigned_ms")
    out["assigned_to_train_call"] = d("assigned_ms", "train_call_ms")
    out["train_call_to_loop"] = d("train_call_ms", "loop_start_ms")
    out["first_step"] = d("loop_start_ms", "first_step_ms")
    out["step_to_seen_by_client"] = d("first_step_ms", "seen_ms")
    return out


def run_series(args, series):
    cold = series == "cold"
    window = args.cold_window if cold else args.warm_window
    data = tempfile.mkdtemp(prefix="burst-e2e-%s-" % series, dir=args.dir or None)
    server = Server(args.burst, data, window, args.slots, args.threads_per_slot, args.preload)
    rows = []
    try:
        api = Api(server.url, server.key)
        with open(args.train, "rb") as f:
            content = b"".join(f.readline() for _ in range(args.lines))
        file_id = api.upload("train.jsonl", content)
        if not cold:
            run_job(api, file_id, "warm-up", -1)
        for i in range(args.jobs):
            if cold:
                wait_for("the worker pool to empty", lambda: not workers(api), 120, 0.05)
            else:
                def one_idle():
                    ws = workers(api)
                    return len(ws) == 1 and ws[0]["state"] == "idle"
                wait_for("one idle worker", one_idle, 60, 0.02)
            if args.pause > 0:
                time.sleep(args.pause)
            r = run_job(api, file_id, series, i)
            rows.append(r)
            r["nodelay_preload"] = bool(args.preload)
            print(json.dumps(r), flush=True)
        add_worker_times(rows, data)
    finally:
        server.stop()
        if args.keep:
            print("kept " + data, file=sys.stderr)
        else:
            shutil.rmtree(data, ignore_errors=True)
    table = [phases(r, cold) for r in rows]
    summary = {"bench": "submit_to_first_step_summary", "series": series, "jobs": len(rows),
               "nodelay_preload": bool(args.preload),
               "scaledown_window_s": window, "slots": args.slots, "threads_per_slot": args.threads_per_slot,
               "warm_reuse": sum(1 for r in rows if r["warm_reuse"]),
               "retried": sum(1 for r in rows if r["attempts"] != 1),
               "step_tokens": pct([r["step_tokens"] for r in rows], 50)}
    for key in table[0]:
        vals = [t[key] for t in table if t[key] is not None]
        summary[key] = {"p50": pct(vals, 50), "p99": pct(vals, 99), "min": min(vals) if vals else None,
                        "max": max(vals) if vals else None, "mean": statistics.mean(vals) if vals else None}
    print(json.dumps(summary), flush=True)
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burst", default=os.path.join(ROOT, "build", "src", "burst"))
    ap.add_argument("--train", default=os.path.join(ROOT, "examples", "support", "train.jsonl"))
    ap.add_argument("--lines", type=int, default=64, help="training file: the first N lines")
    ap.add_argument("--jobs", type=int, default=20, help="timed jobs per series")
    ap.add_argument("--series", default="cold,warm")
    ap.add_argument("--cold-window", type=float, default=1)
    ap.add_argument("--warm-window", type=float, default=60)
    ap.add_argument("--slots", type=int, default=1)
    ap.add_argument("--threads-per-slot", type=int, default=2)
    ap.add_argument("--pause", type=float, default=0.0, help="seconds to wait before each submit")
    ap.add_argument("--dir", default="", help="parent of the data folders (default: $TMPDIR or /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the data folders")
    ap.add_argument("--preload", default="",
                    help="what-if: LD_PRELOAD this library into serve and its workers "
                         "(build/bench/libburst_nodelay_preload.so: TCP_NODELAY on every socket)")
    args = ap.parse_args()

    results = [run_series(args, s.strip()) for s in args.series.split(",") if s.strip()]
    goals = {"cold": 1000.0, "warm": 100.0}
    print("\n== submit to first training step (ms; p99 of %d jobs is their max)%s ==" % (
        args.jobs, ", what-if: TCP_NODELAY everywhere (LD_PRELOAD)" if args.preload else ""), file=sys.stderr)

    def verdict(v, goal):
        return "MET" if v < goal else "NOT MET (%.1fx)" % (v / goal)

    for s in results:
        goal = goals.get(s["series"])
        t, st = s["total"], s["to_step_start"]
        print("%s: to step 1's end p50 %.0f  p99 %.0f (min %.0f, max %.0f); to step 1's start p50 %.0f  p99 %.0f; "
              "%d/%d reused a loaded model" % (s["series"], t["p50"], t["p99"], t["min"], t["max"], st["p50"],
                                               st["p99"], s["warm_reuse"], s["jobs"]), file=sys.stderr)
        if goal is not None:
            print("    goal p50 < %.0f ms: to step end %s; to step start %s" % (
                goal, verdict(t["p50"], goal), verdict(st["p50"], goal)), file=sys.stderr)
        for k, v in s.items():
            if isinstance(v, dict) and k not in ("total", "to_step_start") and v["p50"] is not None:
                print("    %-28s p50 %7.1f  p99 %7.1f" % (k, v["p50"], v["p99"]), file=sys.stderr)


if __name__ == "__main__":
    main()
