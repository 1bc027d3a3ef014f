"""A small service with an API shape of its own, for harness/tests/mapping.rs:
chaos's [request]/[response] mapping drives it; it knows nothing of the chaos
protocol's shape. Standard library only.

    POST /v1/invoices/{invoice}/reminders
    X-Request-Key: <the operation id>
    X-Api-Key: <the caller's token>
    {"to": "...", "amount_cents": 4999, "message": "..."}

answers 201 {"status": "sent", "id": "<receipt>"}, the same with
`X-Replayed: true` for a request key seen before with the same body, 409
{"status": "in_progress"} while one is in flight, 422 {"status":
"key_reused"} for a key seen with another body, 403 for a caller the
authority does not allow, 503 {"error": ...} when the provider's answer is
lost. REMINDERS_TOOL: the name the caller's scope must grant (default
send_reminder). REMINDERS_PENDING_MS > 0: each key is answered 409 in_progress with
`Retry-After: 1` for that long after its first request (a stale-claim
window). REQUEST_LOG: a file each request's arrival is appended to.
"""

import http.client
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROVIDER = os.environ["CHAOS_PROVIDER_URL"].rstrip("/")
AUTHORITY = os.environ["CHAOS_AUTHORITY_URL"].rstrip("/")
UPSTREAM_TIMEOUT = int(os.environ["CHAOS_UPSTREAM_TIMEOUT_MS"]) / 1000.0
PENDING_FOR = int(os.environ.get("REMINDERS_PENDING_MS", "0")) / 1000.0
REQUEST_LOG = os.environ.get("REQUEST_LOG")
TOOL = "send_reminder"
# The name this service grants and checks its tool by: a service of its own
# calls it what it likes (a target file's [request.tools] maps the suite's).
OWN_TOOL = os.environ.get("REMINDERS_TOOL", TOOL)

lock = threading.Lock()
# request key -> {"body": ..., "state": "in_progress" | "sent", "id": ..., "first": t}
records = {}


def upstream(method, url, body, headers):
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
            http.client.HTTPException, OSError):
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        parts = self.path.split("/")
        # ['', 'v1', 'invoices', '{invoice}', 'reminders']
        if len(parts) != 5 or parts[1:3] != ["v1", "invoices"] or parts[4] != "reminders":
            self.answer(404, {"error": f"no route {self.path}"})
            return
        invoice = urllib.parse.unquote(parts[3])
        key = self.headers.get("X-Request-Key")
        if REQUEST_LOG:
            with open(REQUEST_LOG, "a") as log:
                log.write(f"{time.time():.3f} {key}\n")
        if not key:
            self.answer(400, {"error": "X-Request-Key is required"})
            return
        try:
            fields = json.loads(raw)
        except ValueError:
            self.answer(400, {"error": "the body is not JSON"})
            return
        grant = upstream("POST", AUTHORITY + "/introspect",
                         urllib.parse.urlencode({"token": self.headers.get("X-Api-Key", "")}).encode(),
                         {"Content-Type": "application/x-www-form-urlencoded"})
        if grant is None or grant[0] != 200:
            self.answer(503, {"error": "the authority did not answer"})
            return
        grant = json.loads(grant[2])
        if not grant.get("active") or OWN_TOOL not in (grant.get("scope") or "").split():
            self.answer(403, {"error": "not allowed"})
            return
        arguments = {"invoice": invoice, "recipient": fields.get("to"),
                     "amount_cents": fields.get("amount_cents"), "message": fields.get("message")}
        body = json.dumps(arguments, sort_keys=True)
        now = time.time()
        with lock:
            record = records.get(key)
            if record is None:
                record = records[key] = {"body": body, "state": "in_progress", "first": now,
                                         "window": bool(PENDING_FOR)}
                action = "wait" if PENDING_FOR else "send"
            elif record["body"] != body:
                action = "conflict"
            elif record["state"] == "sent":
                action = "replay"
            elif record["window"] and now - record["first"] >= PENDING_FOR:
                # The stale-claim window is over: this request sends it.
                record["window"] = False
                action = "send"
            else:
                action = "wait"
        if action == "conflict":
            self.answer(422, {"status": "key_reused"})
            return
        if action == "replay":
            self.answer(200, {"status": "sent", "id": record["id"]}, [("X-Replayed", "true")])
            return
        if action == "wait":
            self.answer(409, {"status": "in_progress"}, [("Retry-After", "1")] if PENDING_FOR else [])
            return
        answer = upstream("POST", f"{PROVIDER}/effects/{TOOL}", json.dumps(arguments).encode(),
                          {"Content-Type": "application/json", "Idempotency-Key": key})
        if answer is None or not 200 <= answer[0] < 300:
            with lock:
                # Not known whether it happened: the next retry asks the
                # provider again under the same key.
                records.pop(key, None)
            self.answer(503, {"error": "the provider's answer was lost"})
            return
        status, headers, data = answer
        receipt = json.loads(data)["receipt"]
        with lock:
            record.update(state="sent", id=receipt)
        if headers.get("idempotent-replayed") == "true":
            # The provider had it already: an earlier attempt's effect.
            self.answer(200, {"status": "sent", "id": receipt}, [("X-Replayed", "true")])
        else:
            self.answer(201, {"status": "sent", "id": receipt})


def main():
    host, port = os.environ["CHAOS_LISTEN_ADDR"].rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
