#!/usr/bin/python3
"""A sweep of N equal runs against one run alone, on a real `burst serve`.

docs/bench.md, "Sweeps". Standard library only. The goal: with at
least N free slots, a sweep of N equal runs finishes within 1.2x the wall
time of one run.

The script starts
  burst serve --data TMP --listen 127.0.0.1:0 --slots N --threads-per-slot T
              --scaledown-window W
uploads the first --lines lines of examples/support/train.jsonl and measures,
--repeats times each, in alternating order (single first in odd repeats):

  single  POST /v1/fine_tuning/jobs with the job body below, then GET the job
          every 20 ms until it has ended;
  sweep   POST /v1/sweeps {"job": <the same body>, "runs": [{}, ... N times]}
          (N identical runs), then GET the sweep every 20 ms until it has ended.

  job body: {"model": "burst-small", "training_file": F,
             "recipe": {"max_steps": S, "batch_size": B, "max_seq_len": 128,
                        "checkpoint_every": S}}

makespan = the client's wall clock from just before the POST to the first GET
that shows the job (every job of the sweep) ended. Server side, `attempts` =
the first attempt's start to the last attempt's end (the job's attempts; the
sweep's `wall_s`).

Series:
  warm  --scaledown-window 300; one untimed warm-up sweep of N runs first, so
        N workers hold the model; before each measurement, wait until N
        workers are idle.
  cold  --scaledown-window 1; before each measurement, wait until
        GET /v1/workers is empty (every run starts its own worker).

Before each measurement the script waits (up to --quiet-timeout) until at
most --quiet-cores cores are busy, and it records the cores busy during the
measurement: the whole machine, burst serve plus its workers, and the rest
(other processes: on a shared machine they skew the figure).

Prints one JSON line per measurement and one per series on stdout, and a
readable summary on stderr. Exit status 1 if a job fails.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TERMINAL = ("succeeded", "failed", "cancelled")


from burst_api import Api, Server, wait_for  # noqa: E402  (bench/burst_api.py)


def pool(api):
    return api.ok("GET", "/v1/workers")["data"]


CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count()


def machine_cpu():
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def proc_cpu(pid):
    """utime + stime of a live process, jiffies (0 when gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return 0


def busy_cores(seconds):
    b0, t0 = machine_cpu()
    time.sleep(seconds)
    b1, t1 = machine_cpu()
    return (b1 - b0) / max(1, t1 - t0) * NCPU


def wait_quiet(args):
    """Waits until the machine is nearly idle (others' builds and tests share
    it); returns the busy cores seen last."""
    end = time.time() + args.quiet_timeout
    while True:
        busy = busy_cores(1.0)
        if busy <= args.quiet_cores or time.time() > end:
            return busy


class CpuMeter:
    """Cores busy during a measurement: the whole machine, and burst serve
    plus its workers (the rest is everyone else)."""

    def __init__(self, api, serve_pid):
        self.api, self.serve_pid = api, serve_pid
        self.own0 = {w["pid"]: proc_cpu(w["pid"]) for w in pool(api) if w.get("pid")}
        self.own0[serve_pid] = proc_cpu(serve_pid)
        self.m0 = machine_cpu()
        self.t0 = time.time()

    def stop(self):
        m1 = machine_cpu()
        wall = time.time() - self.t0
        pids = {w["pid"] for w in pool(self.api) if w.get("pid")} | {self.serve_pid}
        own = sum(proc_cpu(p) - self.own0.get(p, 0) for p in pids)
        machine = (m1[0] - self.m0[0]) / max(1, m1[1] - self.m0[1]) * NCPU
        own_cores = own / CLK_TCK / wall
        return {"machine_cores": machine, "burst_cores": own_cores, "other_cores": max(0.0, machine - own_cores)}


def job_body(file_id, args):
    return {"model": "burst-small", "training_file": file_id,
            "recipe": {"max_steps": args.steps, "batch_size": args.batch_size, "max_seq_len": 128,
                       "checkpoint_every": args.steps}}


def attempts_span(job):
    starts = [a["started_at"] for a in job["attempts"]]
    ends = [a["ended_at"] for a in job["attempts"] if a["ended_at"] is not None]
    return (max(ends) - min(starts)) if starts and ends else None


def run_single(api, file_id, args):
    t0 = time.time()
    job = api.ok("POST", "/v1/fine_tuning/jobs", job_body(file_id, args))

    def ended():
        j = api.ok("GET", "/v1/fine_tuning/jobs/" + job["id"])
        return j if j["status"] in TERMINAL else None

    job = wait_for("job " + job["id"], ended, 600)
    t1 = time.time()
    return {"kind": "single", "id": job["id"], "status": job["status"], "makespan_s": t1 - t0,
            "attempts_s": attempts_span(job), "steps": job["step"]}


def run_sweep(api, file_id, args):
    t0 = time.time()
    sweep = api.ok("POST", "/v1/sweeps", {"job": job_body(file_id, args), "runs": [{}] * args.runs})

    def ended():
        s = api.ok("GET", "/v1/sweeps/" + sweep["id"])
        return s if s["status"] in TERMINAL else None

    sweep = wait_for("sweep " + sweep["id"], ended, 600)
    t1 = time.time()
    # The runs overlapped: every attempt started before the first one ended.
    spans = []
    for r in sweep["runs"]:
        j = api.ok("GET", "/v1/fine_tuning/jobs/" + r["job_id"])
        spans.append((min(a["started_at"] for a in j["attempts"]),
                      max(a["ended_at"] for a in j["attempts"] if a["ended_at"] is not None)))
    overlap = max(s for s, _ in spans) < min(e for _, e in spans)
    return {"kind": "sweep", "id": sweep["id"], "status": sweep["status"], "makespan_s": t1 - t0,
            "attempts_s": sweep["wall_s"], "runs": len(sweep["runs"]), "overlapped": overlap,
            "run_wall_s": [r["wall_s"] for r in sweep["runs"]]}


def series(name, args, file_bytes):
    data = tempfile.mkdtemp(prefix="burst-sweep-bench-")
    window = 300 if name == "warm" else 1
    server = Server(args.burst, data, window, args.slots, args.threads_per_slot)
    api = Api(server.url, server.key)
    results = []
    try:
        file_id = api.upload("train.jsonl", file_bytes)
        if name == "warm":
            warm = run_sweep(api, file_id, args)
            if warm["status"] != "succeeded":
                raise RuntimeError("warm-up sweep " + warm["status"])

        def ready():
            w = pool(api)
            if name == "cold":
                return not w
            return sum(1 for x in w if x["state"] == "idle" and x["model"]) >= args.runs

        for rep in range(args.repeats):
            order = [run_single, run_sweep] if rep % 2 == 0 else [run_sweep, run_single]
            for fn in order:
                wait_for("the pool to be ready", ready, 120, 0.05)
                quiet = wait_quiet(args)
                meter = CpuMeter(api, server.proc.pid)
                r = fn(api, file_id, args)
                r.update(meter.stop())
                r.update({"series": name, "repeat": rep + 1, "busy_before": quiet, "load1": os.getloadavg()[0]})
                print(json.dumps(r), flush=True)
                results.append(r)
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    single = [r["makespan_s"] for r in results if r["kind"] == "single"]
    sweep = [r["makespan_s"] for r in results if r["kind"] == "sweep"]
    single_srv = [r["attempts_s"] for r in results if r["kind"] == "single" and r["attempts_s"] is not None]
    sweep_srv = [r["attempts_s"] for r in results if r["kind"] == "sweep" and r["attempts_s"] is not None]
    summary = {
        "series": name, "runs": args.runs, "slots": args.slots, "threads_per_slot": args.threads_per_slot,
        "steps": args.steps, "repeats": args.repeats,
        "single_makespan_s": statistics.median(single), "sweep_makespan_s": statistics.median(sweep),
        "ratio": statistics.median(sweep) / statistics.median(single),
        "ratio_min": min(sweep) / statistics.median(single), "ratio_max": max(sweep) / statistics.median(single),
        "single_attempts_s": statistics.median(single_srv) if single_srv else None,
        "sweep_attempts_s": statistics.median(sweep_srv) if sweep_srv else None,
        "other_cores_single": statistics.median(r["other_cores"] for r in results if r["kind"] == "single"),
        "other_cores_sweep": statistics.median(r["other_cores"] for r in results if r["kind"] == "sweep"),
        "burst_cores_single": statistics.median(r["burst_cores"] for r in results if r["kind"] == "single"),
        "burst_cores_sweep": statistics.median(r["burst_cores"] for r in results if r["kind"] == "sweep"),
        "all_succeeded": all(r["status"] == "succeeded" for r in results),
        "all_overlapped": all(r.get("overlapped", True) for r in results),
    }
    print(json.dumps(summary), flush=True)
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--burst", default=os.path.join(ROOT, "build/src/burst"))
    p.add_argument("--runs", type=int, default=2, help="N: runs in the sweep")
    p.add_argument("--slots", type=int, default=0, help="server slots (default: N)")
    p.add_argument("--threads-per-slot", type=int, default=1)
    p.add_argument("--steps", type=int, default=40, help="max_steps of each run")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lines", type=int, default=160, help="training lines uploaded (160 = 40 steps of 4)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quiet-cores", type=float, default=0.3,
                   help="before each measurement, wait until at most this many cores are busy (over 1 s)")
    p.add_argument("--quiet-timeout", type=float, default=300, help="... but no longer than this (seconds)")
    p.add_argument("--series", default="warm,cold")
    args = p.parse_args()
    if args.slots <= 0:
        args.slots = args.runs
    with open(os.path.join(ROOT, "examples/support/train.jsonl"), "rb") as f:
        file_bytes = b"".join(f.readlines()[:args.lines])
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    print(json.dumps({"commit": commit, "nproc": os.cpu_count(), "cpu": cpu, "load": os.getloadavg(),
                      "argv": sys.argv[1:]}), flush=True)
    summaries = [series(s.strip(), args, file_bytes) for s in args.series.split(",") if s.strip()]
    for s in summaries:
        sys.stderr.write(
            "%-4s  one run %.2f s, sweep of %d equal runs %.2f s (medians of %d): ratio %.3f (min %.3f, max %.3f)"
            "  [server side: %.2f s vs %.2f s]  goal <= 1.2: %s\n"
            "      cores busy with other processes (median): %.2f during single, %.2f during sweep; "
            "burst's own: %.2f, %.2f\n" % (
                s["series"], s["single_makespan_s"], s["runs"], s["sweep_makespan_s"], s["repeats"], s["ratio"],
                s["ratio_min"], s["ratio_max"], s["single_attempts_s"] or 0, s["sweep_attempts_s"] or 0,
                "met" if s["ratio"] <= 1.2 else "NOT met", s["other_cores_single"], s["other_cores_sweep"],
                s["burst_cores_single"], s["burst_cores_sweep"]))
    sys.stderr.write("load average at the end: %.2f %.2f %.2f\n" % os.getloadavg())
    return 0 if all(s["all_succeeded"] for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
