"""Keep-alive HTTP for the benchmarks: JSON over http.client, standard library only.

One keep-alive connection per thread and server; connection errors, 408,
429 and 5xx are retried with backoff (honouring Retry-After), so a request
that carries its own identity (a seq_id, an Idempotency-Key) applies once.
"""
import http.client
import json
import random
import threading
import time
import urllib.parse

__all__ = ["APIError", "Http"]

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class APIError(Exception):
    """A request Burst refused or failed: status, code, message, param."""

    def __init__(self, status, body):
        self.status = status
        self.body = body
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            self.code, self.message, self.param = err.get("code"), err.get("message"), err.get("param")
        else:
            self.code, self.message, self.param = None, str(body), None
        super().__init__(f"HTTP {status}: {self.message}" + (f" (param {self.param})" if self.param else ""))


class Http:
    def __init__(self, base_url, api_key, timeout=120.0, max_retries=8):
        u = urllib.parse.urlsplit(base_url.rstrip("/"))
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port], got {base_url!r}")
        self.scheme, self.host, self.port = u.scheme, u.hostname, u.port
        self.prefix = u.path
        self.base_url = base_url.rstrip("/")
        key = api_key or ""
        self.api_key = key[4:] if key.startswith("tml-") else key
        self.timeout, self.max_retries = timeout, max_retries
        self._local = threading.local()

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            c = cls(self.host, self.port, timeout=self.timeout)
            self._local.conn = c
        return c

    def close(self):
        """Closes this thread's connection (others close with their threads)."""
        self._drop()

    def _drop(self):
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def request(self, method, path, body=None, headers=None, raw=False):
        """The decoded JSON answer (or bytes with raw); APIError on 4xx/5xx."""
        data = None if body is None else json.dumps(body).encode()
        h = {"Authorization": "Bearer " + self.api_key, "Accept": "application/json"}
        if data is not None:
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        for attempt in range(self.max_retries + 1):
            try:
                c = self._conn()
                c.request(method, self.prefix + path, body=data, headers=h)
                r = c.getresponse()
                payload = r.read()
                status, retry_after = r.status, r.getheader("Retry-After")
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                self._drop()
                if attempt == self.max_retries:
                    raise APIError(0, {"error": {"message": f"cannot reach {self.base_url}: {e}"}}) from e
                time.sleep(min(0.25 * 2 ** attempt, 8.0) * (0.75 + 0.5 * random.random()))
                continue
            if status in _RETRY_STATUS and attempt < self.max_retries:
                delay = min(0.25 * 2 ** attempt, 8.0)
                if retry_after and retry_after.isdigit():
                    delay = float(retry_after)
                time.sleep(delay * (0.75 + 0.5 * random.random()))
                continue
            if raw and status < 400:
                return payload
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = payload.decode(errors="replace")
            if status >= 400:
                raise APIError(status, parsed)
            return parsed
        raise AssertionError("unreachable")

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, {} if body is None else body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def upload(self, path, fields, file_field, filename, content):
        """multipart/form-data POST (files)."""
        boundary = "burst" + "".join(random.choice("0123456789abcdef") for _ in range(24))
        parts = []
        for k, v in fields.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode())
        parts.append((f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; '
                      f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n').encode())
        parts.append(content + b"\r\n" + f"--{boundary}--\r\n".encode())
        data = b"".join(parts)
        c = self._conn()
        try:
            c.request("POST", self.prefix + path, body=data,
                      headers={"Authorization": "Bearer " + self.api_key,
                               "Content-Type": f"multipart/form-data; boundary={boundary}"})
            r = c.getresponse()
            payload = r.read()
        except (ConnectionError, http.client.HTTPException, OSError):
            self._drop()
            raise
        parsed = json.loads(payload) if payload else None
        if r.status >= 400:
            raise APIError(r.status, parsed)
        return parsed
