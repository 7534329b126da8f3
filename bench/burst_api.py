"""Shared by Burst's HTTP benchmarks (runtime_e2e.py, sweep_bench.py) and
the GPU check's system stage (scripts/gpu_system.py): a small client for
Burst's API and a `burst serve` started on a free port.
Standard library only, for Debian's /usr/bin/python3."""

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid


class Api:
    def __init__(self, base, key):
        self.base = base
        self.key = key

    def call(self, method, path, body=None, content_type="application/json", timeout=60):
        headers = {"Authorization": "Bearer " + self.key}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                return e.code, json.loads(raw)
            except ValueError:
                return e.code, {"raw": raw.decode(errors="replace")}

    def ok(self, method, path, body=None, timeout=60):
        status, out = self.call(method, path, body, timeout=timeout)
        if status != 200:
            raise RuntimeError("%s %s: %s %s" % (method, path, status, out))
        return out

    def upload(self, name, content):
        boundary = "----burstbench" + uuid.uuid4().hex
        parts = [
            ("--%s\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nfine-tune\r\n" % boundary).encode(),
            ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"%s\"\r\n"
             "Content-Type: application/jsonl\r\n\r\n" % (boundary, name)).encode() + content + b"\r\n",
            ("--%s--\r\n" % boundary).encode(),
        ]
        status, body = self.call("POST", "/v1/files", b"".join(parts),
                                 "multipart/form-data; boundary=" + boundary)
        if status != 200:
            raise RuntimeError("upload failed: %s %s" % (status, body))
        return body["id"]


class Server:
    def __init__(self, burst, data, window, slots, threads_per_slot, preload="", extra=(), listen="127.0.0.1:0"):
        self.data = data
        self.lines = []
        cmd = [burst, "serve", "--data", data, "--listen", listen, "--slots", str(slots),
               "--threads-per-slot", str(threads_per_slot), "--scaledown-window", str(window), *extra]
        env = dict(os.environ)
        if preload:  # workers inherit it from serve's environment
            env["LD_PRELOAD"] = os.path.abspath(preload)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env=env)
        self.url = None
        got = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))
                if self.url is None and "listening on http://" in line:
                    self.url = line.split("listening on ", 1)[1].split()[0]
                    got.set()
            got.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not got.wait(60) or self.url is None:
            self.stop()
            raise RuntimeError("burst serve did not start:\n" + "\n".join(self.lines[-20:]))
        with open(os.path.join(data, "admin.key")) as f:
            self.key = f.read().strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def wait_for(what, fn, timeout, period=0.02):
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(period)
