"""Slow clients and big bodies against `burst serve` (issue: no request may
stall or bloat the server), with legitimate load measured in the same run.

Phases, each with 400 authenticated GET /v1/fine_tuning/jobs requests on one
kept-alive connection, timed one by one:
  quiet       nothing else (the peer the others are compared with)
  slow-body   200 connections without a key that declare a 500 MB body and
              send a byte every 2 s (reconnecting when answered and closed)
  slowloris   200 connections that send their headers a byte every 2 s, from
              four client addresses (127.0.3.1-4)
  big-body    4 connections without a key sending 400 MB JSON bodies as fast
              as they can, over and over; the server's resident memory is
              sampled every 10 ms
Prints one JSON object; docs/bench.md has the figures.

Usage: /usr/bin/python3 bench/attack_bench.py build/src/burst
"""

import http.client
import json
import os
import selectors
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from burst_api import Server  # noqa: E402


def rss_kb(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def legit(host, port, key, n=400):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    lat, errors = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            conn.request("GET", "/v1/fine_tuning/jobs?limit=5", headers={"Authorization": "Bearer " + key})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                errors += 1
        except (OSError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
        lat.append((time.perf_counter() - t0) * 1000)
    conn.close()
    return {"requests": n, "errors": errors, "p50_ms": round(percentile(lat, 50), 3),
            "p99_ms": round(percentile(lat, 99), 3), "max_ms": round(max(lat), 3)}


class Trickle(threading.Thread):
    """`count` connections that each send `opening` and then one byte of
    `drip` every `period` seconds; a connection the server answers or closes
    is counted and replaced."""

    def __init__(self, port, count, opening, drip, period, sources):
        super().__init__(daemon=True)
        self.port, self.count, self.opening, self.drip, self.period = port, count, opening, drip, period
        self.sources = sources
        self.stop = threading.Event()
        self.answers = {}
        self.connects = 0
        self.refused = 0
        self.sel = selectors.DefaultSelector()
        self.socks = {}

    def connect(self, i):
        s = socket.socket()
        s.bind((self.sources[i % len(self.sources)], 0))
        try:
            s.connect(("127.0.0.1", self.port))
            s.sendall(self.opening)
        except OSError:
            self.refused += 1
            s.close()
            return
        s.setblocking(False)
        self.connects += 1
        self.socks[s] = i
        self.sel.register(s, selectors.EVENT_READ)

    def drop(self, s):
        i = self.socks.pop(s)
        self.sel.unregister(s)
        s.close()
        return i

    def run(self):
        for i in range(self.count):
            self.connect(i)
        next_drip = time.time() + self.period
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    data = s.recv(65536)
                except OSError:
                    data = b""
                if data.startswith(b"HTTP/1.1 "):
                    code = data[9:12].decode()
                    self.answers[code] = self.answers.get(code, 0) + 1
                self.connect(self.drop(s))
            if time.time() >= next_drip:
                for s in list(self.socks):
                    try:
                        s.send(self.drip)
                    except OSError:
                        self.connect(self.drop(s))
                next_drip = time.time() + self.period
        for s in list(self.socks):
            self.drop(s)


class BigBodies(threading.Thread):
    def __init__(self, port, body_mb=400):
        super().__init__(daemon=True)
        self.port, self.body_mb = port, body_mb
        self.stop = threading.Event()
        self.sent_mb = 0
        self.answers = {}

    def run(self):
        chunk = b"[" * (1 << 20)
        while not self.stop.is_set():
            s = socket.create_connection(("127.0.0.1", self.port))
            s.sendall(b"POST /v1/fine_tuning/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % (self.body_mb << 20))
            try:
                for _ in range(self.body_mb):
                    s.sendall(chunk)
                    self.sent_mb += 1
            except OSError:
                pass
            try:
                s.settimeout(2)
                data = s.recv(4096)
                if data.startswith(b"HTTP/1.1 "):
                    code = data[9:12].decode()
                    self.answers[code] = self.answers.get(code, 0) + 1
            except OSError:
                pass
            s.close()


def main():
    burst = sys.argv[1] if len(sys.argv) > 1 else "build/src/burst"
    data = tempfile.mkdtemp(prefix="burst-attack-")
    server = Server(burst, data, window=5, slots=1, threads_per_slot=1)
    host, port = server.url.split("//")[1].split(":")
    port = int(port)
    pid = server.proc.pid
    out = {"machine": os.uname().nodename, "cores": os.cpu_count()}
    try:
        legit(host, port, server.key, 50)  # warm up
        out["idle_rss_mb"] = round(rss_kb(pid) / 1024, 1)
        out["quiet"] = legit(host, port, server.key)

        body = Trickle(port, 200, b"POST /v1/fine_tuning/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 500000000\r\n\r\n",
                       b"{", 2.0, ["127.0.4.%d" % i for i in range(1, 5)])
        body.start()
        time.sleep(3)
        out["slow_body"] = legit(host, port, server.key)
        body.stop.set()
        body.join()
        out["slow_body"].update(attack_connections=body.connects, attack_answers=body.answers)

        loris = Trickle(port, 200, b"GET /v1/fine_tuning/jobs HTTP/1.1\r\n", b"X", 2.0,
                        ["127.0.3.%d" % i for i in range(1, 5)])
        loris.start()
        time.sleep(3)
        out["slowloris"] = legit(host, port, server.key)
        out["slowloris"]["open_connections_mid_attack"] = len(loris.socks)
        loris.stop.set()
        loris.join()
        out["slowloris"].update(attack_connections=loris.connects, attack_answers=loris.answers,
                                attack_refused=loris.refused)

        senders = [BigBodies(port) for _ in range(4)]
        peak = [rss_kb(pid)]
        sampling = threading.Event()

        def sample():
            while not sampling.is_set():
                peak[0] = max(peak[0], rss_kb(pid))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for s in senders:
            s.start()
        out["big_body"] = legit(host, port, server.key)
        time.sleep(2)
        for s in senders:
            s.stop.set()
        for s in senders:
            s.join(30)
        sampling.set()
        sampler.join()
        answers = {}
        for s in senders:
            for k, v in s.answers.items():
                answers[k] = answers.get(k, 0) + v
        out["big_body"].update(peak_rss_mb=round(peak[0] / 1024, 1),
                               peak_over_idle_mb=round((peak[0] / 1024) - out["idle_rss_mb"], 1),
                               attack_mb_sent=sum(s.sent_mb for s in senders), attack_answers=answers)
        for phase in ("slow_body", "slowloris", "big_body"):
            out[phase]["p99_vs_quiet"] = round(out[phase]["p99_ms"] / max(out["quiet"]["p99_ms"], 1e-9), 2)
    finally:
        server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
