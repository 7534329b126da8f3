#!/usr/bin/python3
"""The cost model against measured jobs (docs/cost-model.md).

Starts a real `burst serve` (2 slots of 1 thread, its own data folder),
calibrates on three short jobs of the demo LoRA task (1 worker, 2 over
c10d, 2 over the store), then for a longer job asks POST
/v1/fine_tuning/jobs/estimate for N = 1, 2 on each channel and runs each,
comparing the predicted time with the job's measured run time (its
attempt's, from assignment to finish). Then the fitted model's prediction for N = 1..64 on each
channel (a simulation beyond this machine's 2 slots), with the break-even,
printed and drawn to an SVG.

    /usr/bin/python3 bench/cost_model_bench.py [--epochs 2] [--svg docs/cost-model-sim.svg]
"""
import argparse, json, os, re, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BURST = os.path.join(ROOT, "build", "src", "burst")


class Server:
    def __init__(self, data):
        self.proc = subprocess.Popen(
            [BURST, "serve", "--data", data, "--listen", "127.0.0.1:0", "--slots", "2", "--threads-per-slot", "1",
             "--scaledown-window", "30"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = ""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit("burst serve did not start:\n" + out)
            out += line
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        self.key = open(os.path.join(data, "admin.key")).read().strip()

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    def upload(self, path):
        boundary = "burstbench"
        content = open(path, "rb").read()
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nfine-tune\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"train.jsonl\"\r\n"
                f"Content-Type: application/jsonl\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
        req = urllib.request.Request(self.url + "/v1/files", data=body, method="POST",
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": f"multipart/form-data; boundary={boundary}"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())["id"]

    def run(self, body):
        job = self.call("POST", "/v1/fine_tuning/jobs", body)
        while job["status"] not in ("succeeded", "failed", "cancelled"):
            time.sleep(0.2)
            job = self.call("GET", "/v1/fine_tuning/jobs/" + job["id"])
        if job["status"] != "succeeded":
            raise SystemExit("job failed: " + json.dumps(job)[:2000])
        return job

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60)


def spec(file, epochs, workers, communication):
    # Bound by epochs, not steps: N workers then take 1/N of the steps, each
    # feeding N times the sequences.
    s = {"model": "burst-small", "training_file": file, "seed": 3,
         "recipe": {"epochs": epochs, "batch_size": 8, "max_seq_len": 256, "checkpoint_every": 30,
                    "lora": {"rank": 16, "alpha": 32, "targets": ["q", "k", "v", "o", "gate", "up", "down"]}}}
    if workers > 1:
        s.update(workers=workers, communication=communication)
    return s


def svg(path, sims):
    w, h, pad = 640, 360, 50
    t_max = max(r["seconds"] for rows in sims.values() for r in rows)
    n_max = max(r["workers"] for rows in sims.values() for r in rows)
    x = lambda n: pad + (w - 2 * pad) * (n - 1) / max(1, n_max - 1)
    y = lambda t: h - pad - (h - 2 * pad) * t / t_max
    colours = {"c10d": "#1f77b4", "store": "#d62728"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">workers (N)</text>',
             f'<text x="14" y="{h / 2}" transform="rotate(-90 14 {h / 2})" text-anchor="middle">predicted time (s)'
             f'</text>',
             f'<text x="{w / 2}" y="24" text-anchor="middle">Burst cost model: the demo LoRA job on N workers '
             f'(fitted on the measuring machine)</text>']
    for n in range(1, n_max + 1):
        parts.append(f'<text x="{x(n)}" y="{h - pad + 16}" text-anchor="middle">{n}</text>')
    for frac in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f'<text x="{pad - 6}" y="{y(t_max * frac) + 4}" text-anchor="end">{t_max * frac:.0f}</text>')
    for i, (comm, rows) in enumerate(sims.items()):
        pts = " ".join(f"{x(r['workers']):.1f},{y(r['seconds']):.1f}" for r in rows)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{colours[comm]}" stroke-width="2"/>')
        parts.append(f'<text x="{w - pad - 120}" y="{pad + 16 * i}" fill="{colours[comm]}">{comm}</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--svg", default="")
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="burst-cost-bench-")
    s = Server(data)
    try:
        file = s.upload(os.path.join(ROOT, "examples", "support", "train.jsonl"))
        for workers, comm in ((1, ""), (2, "c10d"), (2, "store")):  # calibration
            s.run(spec(file, 1, workers, comm))
        results = []
        for workers, comm in ((1, ""), (2, "c10d"), (2, "store")):
            body = spec(file, args.epochs, workers, comm)
            est = s.call("POST", "/v1/fine_tuning/jobs/estimate", body)
            job = s.run(body)
            run_s = sum(a["ended_at"] - a["started_at"] for a in job["attempts"])  # assignment to finish
            row = {"workers": workers, "communication": comm or None, "steps": job["total_steps"],
                   "predicted_s": round(est["seconds"], 2), "measured_s": round(run_s, 2),
                   "error": round(est["seconds"] / run_s - 1, 3),
                   "compute_s": round(est["seconds_compute"], 2), "exchange_s": round(est["seconds_exchange"], 2),
                   "overhead_s": round(est["seconds_overhead"], 2), "exchange_source": est["exchange_source"],
                   "tokens_per_second_source": est["tokens_per_second_source"]}
            results.append(row)
            print(json.dumps(row), flush=True)
        sims = {}
        for comm in ("c10d", "store"):
            body = spec(file, args.epochs, 1, comm)
            body["communication"] = comm
            body["workers"] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
            est = s.call("POST", "/v1/fine_tuning/jobs/estimate", body)
            sims[comm] = [{"workers": r["workers"], "seconds": r["seconds"], "cost": r["cost_if_dedicated"]}
                          for r in est["by_workers"]]
            print(json.dumps({"simulation": comm, "workers": [r["workers"] for r in sims[comm]],
                              "fastest_workers": est["fastest_workers"],
                              # What each doubling of N leaves of the time (1.0: it stopped paying).
                              "time_ratio_per_doubling": {f"{a['workers']}->{b['workers']}": round(
                                  b["seconds"] / a["seconds"], 3) for a in sims[comm] for b in sims[comm]
                                  if b["workers"] == 2 * a["workers"]},
                              "cheapest_workers": est["cheapest_workers"],
                              "seconds": [round(r["seconds"], 1) for r in sims[comm]],
                              "cost_if_dedicated": [round(r["cost"], 6) for r in sims[comm]]}), flush=True)
        if args.svg:
            svg(args.svg, sims)
        worst = max(abs(r["error"]) for r in results)
        print(json.dumps({"worst_error": worst, "within_15pct": worst <= 0.15}))
    finally:
        s.stop()
        subprocess.run(["rm", "-rf", data])


if __name__ == "__main__":
    main()
