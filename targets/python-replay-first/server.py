"""python-replay-first: an idempotency layer in Python, standard library only.

It is here to prove that chaos drives a target in any language: it speaks
target protocol v1 (docs/target-protocol.md) and nothing else ties it to the
harness. It gets almost everything right:

- one record per operation, claimed under a lock before dispatching, so
  concurrent attempts cannot both dispatch;
- the record is durable: a JSON file in CHAOS_STATE_DIR, fsynced and renamed
  into place on every change, so a SIGKILL loses only what was in memory;
- the payload is bound to the key by a fingerprint of its canonical JSON, so a
  changed payload is a conflict and a reordered one is the same operation;
- the provider is called with a downstream key derived from the operation,
  the same on every attempt and after every restart;
- outcomes are honest: pending while in flight, unknown when the provider's
  answer was lost, reconciled later by what the provider's contract allows.

ITS DOCUMENTED WEAKNESS: a stored result is replayed *before* the caller is
authorized, keyed by tool and Idempotency-Key alone (the tenant is only known
after asking the authority). A caller whose token was revoked still reads the
receipt and result of an operation it may no longer see. chaos catches it at
revoked-permission, as a disclosure.

With `--key structure` (target file structure.target.toml) it keys an
operation the way the seed article "A retry is not a replay" asks a runtime
to: by the agent run's structure, (run, step, tool, business scope), from
the X-Run-Id and X-Step-Id headers of target protocol v1.1 and the invoice
the step acts on, never by the model's Idempotency-Key, arguments or
tool-use id; and it binds the operation to its intent (numbers by value,
the free-text fields `note` and `memo` left out). A step the planner decides
again is then the same operation. Without it, the caller's Idempotency-Key
is the operation.

Run by chaos from target.toml beside this file; by hand:
    CHAOS_LISTEN_ADDR=127.0.0.1:8080 CHAOS_PROVIDER_URL=http://127.0.0.1:9000 \
    CHAOS_AUTHORITY_URL=http://127.0.0.1:9001 CHAOS_PROVIDER_PROFILE=keyed \
    python3 server.py
"""

import hashlib
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


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"python-replay-first: failed to read {name}: it is not set")
    return value


def env_ms(name):
    value = os.environ.get(name)
    return None if value is None else int(value)


LISTEN_ADDR = env("CHAOS_LISTEN_ADDR")
PROVIDER_URL = env("CHAOS_PROVIDER_URL").rstrip("/")
AUTHORITY_URL = env("CHAOS_AUTHORITY_URL").rstrip("/")
UPSTREAM_TIMEOUT = int(env("CHAOS_UPSTREAM_TIMEOUT_MS", "1000")) / 1000.0
PROVIDER_PROFILE = env("CHAOS_PROVIDER_PROFILE")
PROVIDER_RETENTION_MS = env_ms("CHAOS_PROVIDER_RETENTION_MS")
# What the target file declares (7 days), or the shortened period of a live run.
RETENTION_MS = env_ms("CHAOS_RETENTION_MS") or 7 * 24 * 3600 * 1000
STATE_FILE = os.path.join(env("CHAOS_STATE_DIR", "."), "records.json")
# "lab": the authorization lab's four controls on its tools (python-gate.target.toml).
CONTROLS = os.environ.get("CONTROLS", "")
# "own": the callers are rows of its own SQLite table (callers.py), the way a
# service keeps its API keys, instead of asking the authority
# (own-callers.target.toml: chaos writes grants and revocations there).
CALLERS = os.environ.get("CALLERS", "authority")
# A provider SDK's habit (background-retry.target.toml): a provider call that
# got no answer is sent again by a background retry this many milliseconds
# later, whatever the caller was answered meanwhile, the way the stock Stripe
# SDK's timeout and retries go on after the service has answered. Work that
# outlives its call.
BACKGROUND_RETRY_MS = env_ms("BACKGROUND_RETRY_MS")
# How long a provider call waits for its answer, the SDK's own patience
# (the stock Stripe SDK's is 80 s), when it is not the upstream timeout chaos
# gives: such a call can still be waiting when its trial is over.
SDK_TIMEOUT = (env_ms("SDK_TIMEOUT_MS") or UPSTREAM_TIMEOUT * 1000) / 1000.0
LAB_TOOLS = ("read_invoice", "export_invoices", "send_reminder")


def now_ms():
    return int(time.time() * 1000)


def canonical(payload):
    """Two payloads that mean the same thing have the same canonical form."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def intent(value, free_text=()):
    """What the action is, however the model worded it: numbers by value
    (4999.0 is 4999), free-text fields left out. Mirrors
    chaos_kit::canonical::intent, so fingerprints agree across languages."""
    if isinstance(value, dict):
        return {name: intent(field) for name, field in value.items() if name not in free_text}
    if isinstance(value, list):
        return [intent(item) for item in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 9.0e15:
        return int(value)
    return value


# `--key structure`: where an operation's identity comes from (see above).
KEY_FROM = "caller"
if len(sys.argv) == 3 and sys.argv[1] == "--key" and sys.argv[2] in ("caller", "structure"):
    KEY_FROM = sys.argv[2]
elif len(sys.argv) != 1:
    sys.exit("python-replay-first: usage: server.py [--key caller|structure]")
FREE_TEXT = ("note", "memo")
BUSINESS_SCOPE = "invoice"
# Tools whose every call is its own effect: the runtime's per-tool policy.
ALLOW_EVERY_CALL = ("send_notification_to_self",)


def operation_key(tool, headers, arguments):
    """The operation's key within its tool, or None when the call has none."""
    run, step = headers.get("X-Run-Id"), headers.get("X-Step-Id")
    if KEY_FROM == "structure" and run and step:
        if tool in ALLOW_EVERY_CALL:
            tool_use = headers.get("X-Tool-Use-Id")
            return f"{run}/{step}/{tool_use}" if tool_use else headers.get("Idempotency-Key")
        scope = arguments.get(BUSINESS_SCOPE) if isinstance(arguments, dict) else None
        return f"{run}/{step}/{scope or ''}"
    return headers.get("Idempotency-Key")


def fingerprint(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


# ---- durable records ------------------------------------------------------

class Records:
    """Every operation's record, in memory and in one JSON file.

    Every change is written to a temporary file, fsynced, renamed over the old
    file and the directory fsynced: after a crash the file holds the state of
    the last completed change, never half of one."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        try:
            with open(path, encoding="utf-8") as file:
                self.records = json.load(file)
        except FileNotFoundError:
            self.records = {}
        # Which operations this process is working on. Memory: a crash forgets
        # it, which is how a claim left by a dead worker is recognised.
        self.in_flight = set()

    def save(self):
        temporary = self.path + ".tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(self.records, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        directory = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


RECORDS = Records(STATE_FILE)


# ---- the provider and the authority ----------------------------------------

def call(method, url, body=None, headers=None, timeout=UPSTREAM_TIMEOUT):
    """One upstream call. Returns (status, headers, body), or None when no
    answer came back (timeout, reset, refused): the call may or may not have
    been acted on."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
            http.client.HTTPException, OSError):
        return None


def introspect(token):
    """The caller's grant, or None when the authority could not be asked."""
    answer = call("POST", AUTHORITY_URL + "/introspect",
                  body=urllib.parse.urlencode({"token": token}).encode(),
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    if answer is None or answer[0] != 200:
        return None
    try:
        return json.loads(answer[2])
    except ValueError:
        return None


def own_grant(token):
    """The caller's grant from its own table, in introspection's shape."""
    import callers  # beside this file; only this mode needs sqlite3

    return callers.grant_of(token)


def owner(invoice):
    """The tenant that owns `invoice`, from the stored record at the provider
    (never from the arguments): a tenant, "" for no such record, or None when
    the provider could not be asked."""
    answer = call("GET", f"{PROVIDER_URL}/records/{urllib.parse.quote(invoice, safe='')}")
    if answer is None or answer[0] not in (200, 404):
        return None
    if answer[0] == 404:
        return ""
    try:
        return json.loads(answer[2])["tenant"]
    except (ValueError, KeyError, TypeError):
        return None


def approvals(actor):
    """Every approval recorded for `actor` at the authority, or None."""
    answer = call("GET", f"{AUTHORITY_URL}/approvals?actor={urllib.parse.quote(actor, safe='')}")
    if answer is None or answer[0] != 200:
        return None
    try:
        return json.loads(answer[2])
    except ValueError:
        return None


def lab_refusal(tool, grant, arguments):
    """The lab's tenant and approval controls (identity and scope are every
    call's, above): the answer that refuses the call, or None."""
    if not isinstance(arguments, dict):
        return answer("rejected", 400, reason="arguments are not a JSON object")
    invoice = arguments.get("invoice")
    if invoice is not None:
        tenant = owner(str(invoice))
        if tenant is None:
            return answer("failed", 503, reason="the record's owner could not be read")
        if tenant != grant.get("tenant"):
            return answer("denied", 403, reason=f"invoice {invoice} is not the caller's tenant's")
    if tool == "send_reminder":
        actor = grant.get("sub") or ""
        recorded = approvals(actor)
        if recorded is None:
            return answer("failed", 503, reason="the approvals could not be read")
        exact = any(a.get("actor") == actor and a.get("tool") == tool
                    and a.get("invoice") == invoice
                    and a.get("recipient") == arguments.get("recipient")
                    and a.get("body") == arguments.get("body")
                    and (a.get("expires_at_ms") is None or now_ms() < a["expires_at_ms"])
                    for a in recorded)
        if not exact:
            return answer("denied", 403,
                          reason="no approval matches this actor, tool, invoice, recipient and body")
    return None


def dispatch(tool, record):
    """POST the effect under the record's downstream key.
    Returns ("succeeded", receipt, replayed) | ("rejected", reason) | ("unknown",)."""
    send = lambda: call("POST", f"{PROVIDER_URL}/effects/{tool}",
                        body=record["payload"].encode("utf-8"),
                        headers={"Idempotency-Key": record["downstream_key"],
                                 "Content-Type": "application/json"},
                        timeout=SDK_TIMEOUT)
    answer = send()
    if answer is None:
        if BACKGROUND_RETRY_MS is not None:
            retry = threading.Timer(BACKGROUND_RETRY_MS / 1000.0, send)
            retry.daemon = True
            retry.start()
        return ("unknown",)
    status, headers, body = answer
    if 200 <= status < 300:
        try:
            receipt = json.loads(body)["receipt"]
        except (ValueError, KeyError, TypeError):
            return ("unknown",)
        replayed = any(name.lower() == "idempotent-replayed" and value == "true"
                       for name, value in headers.items())
        return ("succeeded", receipt, replayed)
    if 400 <= status < 500:
        return ("rejected", f"the provider refused the effect with status {status}")
    return ("unknown",)


def lookup(record):
    """GET the receipt of an earlier dispatch: ("found", receipt) | ("not-found",) | ("failed",)."""
    key = urllib.parse.quote(record["downstream_key"], safe="")
    answer = call("GET", f"{PROVIDER_URL}/effects?key={key}")
    if answer is None:
        return ("failed",)
    status, _, body = answer
    if status == 200:
        try:
            return ("found", json.loads(body)["receipt"])
        except (ValueError, KeyError, TypeError):
            return ("failed",)
    if status == 404:
        return ("not-found",)
    return ("failed",)


# ---- answers ---------------------------------------------------------------

def answer(outcome, status, receipt=None, result=None, reason=None, replayed=False):
    body = {"outcome": outcome}
    if receipt is not None:
        body["receipt"] = receipt
    if result is not None:
        body["result"] = result
    if reason is not None:
        body["reason"] = reason
    headers = {"Idempotent-Replayed": "true"} if replayed else {}
    return status, headers, body


def succeeded(tool, receipt, replayed):
    result = {"tool": tool, "status": "done", "receipt": receipt}
    if replayed:
        return answer("replayed", 200, receipt, result, replayed=True)
    return answer("applied", 201, receipt, result)


def from_record(tool, record):
    if record["state"] == "succeeded":
        return succeeded(tool, record["receipt"], replayed=True)
    if record["state"] == "rejected":
        return answer("rejected", 400, reason=record["reason"])
    return answer("unknown", 503, reason="the operation's outcome is not known yet")


# ---- its own traces ----------------------------------------------------------

# The OpenTelemetry variable a service reads for where its spans go. Set, each
# tool call is one server span, in OTLP JSON, in the trace of the
# `traceparent` it was called with: the way an instrumented service's spans
# join chaos's `--otlp` trace (harness/tests/otlp.rs).
OTLP_TRACES_ENDPOINT = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def export_span(tool, traceparent, started_ns, status):
    if not OTLP_TRACES_ENDPOINT or not traceparent:
        return
    parts = traceparent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return
    span = {
        "traceId": parts[1],
        "spanId": os.urandom(8).hex(),
        "parentSpanId": parts[2],
        "name": f"POST /tools/{tool}",
        "kind": 2,  # SERVER
        "startTimeUnixNano": str(started_ns),
        "endTimeUnixNano": str(time.time_ns()),
        "attributes": [
            {"key": "http.response.status_code", "value": {"intValue": str(status)}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": tool}},
        ],
    }
    body = {"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "python-replay-first"}}]},
        "scopeSpans": [{"scope": {"name": "python-replay-first"}, "spans": [span]}],
    }]}
    call("POST", OTLP_TRACES_ENDPOINT, json.dumps(body).encode("utf-8"),
         {"Content-Type": "application/json"})


# ---- the tool call ---------------------------------------------------------

def tool_call(tool, headers, raw_body):
    try:
        arguments = json.loads(raw_body or b"null")
    except ValueError:
        return answer("rejected", 400, reason="arguments are not JSON")
    key = operation_key(tool, headers, arguments)
    if not key:
        return answer("rejected", 400, reason="an Idempotency-Key header is required")
    payload = canonical(arguments)
    if KEY_FROM == "structure":
        payload_fingerprint = fingerprint(canonical(intent(arguments, FREE_TEXT)))
    else:
        payload_fingerprint = fingerprint(payload)
    scope = f"{tool}/{key}"

    # THE WEAKNESS: the stored result is replayed before anyone asked the
    # authority whether this caller may still see it.
    with RECORDS.lock:
        stored = RECORDS.records.get(scope)
        if stored and stored["state"] == "succeeded" and stored["fingerprint"] == payload_fingerprint:
            return succeeded(tool, stored["receipt"], replayed=True)

    authorization = headers.get("Authorization", "")
    token = authorization[len("Bearer "):] if authorization.startswith("Bearer ") else None
    if token is None:
        return answer("denied", 403)
    grant = introspect(token) if CALLERS == "authority" else own_grant(token)
    if grant is None:
        return answer("unknown", 503, reason="authority unreachable; nothing was done")
    if not grant.get("active") or tool not in (grant.get("scope") or "").split():
        return answer("denied", 403)
    if CONTROLS == "lab" and tool in LAB_TOOLS:
        refusal = lab_refusal(tool, grant, arguments)
        if refusal is not None:
            return refusal

    # The claim: check and write under one lock, before anything is dispatched.
    with RECORDS.lock:
        record = RECORDS.records.get(scope)
        if record and now_ms() - record["created_at_ms"] >= RETENTION_MS:
            record = None  # past the declared retention, a retry is a new operation
        if record is None:
            record = {
                "fingerprint": payload_fingerprint,
                "payload": payload,
                "downstream_key": "py-" + fingerprint(grant.get("tenant", "") + "/" + scope),
                "created_at_ms": now_ms(),
                "state": "pending",
            }
            RECORDS.records[scope] = record
            RECORDS.save()
            RECORDS.in_flight.add(scope)
            fresh = True
        else:
            if record["fingerprint"] != payload_fingerprint:
                return answer("conflict", 422,
                              reason="this Idempotency-Key was used with a different payload")
            if record["state"] in ("succeeded", "rejected"):
                return from_record(tool, record)
            if scope in RECORDS.in_flight:
                return answer("pending", 409, reason="another attempt of this operation is in flight")
            RECORDS.in_flight.add(scope)
            fresh = False
        record = dict(record)

    try:
        outcome = dispatch(tool, record) if fresh else reconcile(tool, record)
        return settle(tool, scope, record, outcome)
    finally:
        with RECORDS.lock:
            RECORDS.in_flight.discard(scope)


def reconcile(tool, record):
    """Learn the outcome of an earlier dispatch, by what the provider allows."""
    if PROVIDER_PROFILE == "lookup":
        found = lookup(record)
        if found[0] == "found":
            return ("succeeded", found[1], True)
        if found[0] == "not-found":
            return dispatch(tool, record)  # it never took effect: this is the first time
        return ("unknown",)
    if PROVIDER_PROFILE == "keyed":
        age = now_ms() - record["created_at_ms"]
        if PROVIDER_RETENTION_MS is None or age < PROVIDER_RETENTION_MS:
            return dispatch(tool, record)  # the provider replays its first answer
        return ("unknown",)
    return ("unknown",)  # blind: nobody can tell


def settle(tool, scope, record, outcome):
    with RECORDS.lock:
        stored = RECORDS.records.get(scope)
        if stored is None or stored["created_at_ms"] != record["created_at_ms"]:
            return answer("unknown", 503, reason="the operation's record changed under this attempt")
        if stored["state"] in ("succeeded", "rejected"):
            return from_record(tool, stored)
        if outcome[0] == "succeeded":
            stored.update(state="succeeded", receipt=outcome[1])
        elif outcome[0] == "rejected":
            stored.update(state="rejected", reason=outcome[1])
        else:
            stored["state"] = "unknown"
        RECORDS.save()
    if outcome[0] == "succeeded":
        return succeeded(tool, outcome[1], outcome[2])
    if outcome[0] == "rejected":
        return answer("rejected", 400, reason=outcome[1])
    return answer("unknown", 503, reason="the provider's answer was lost; the effect may have happened")


# ---- HTTP ------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/healthz":
            self.reply(200, {}, {"ok": True})
        else:
            self.reply(404, {}, {})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if not self.path.startswith("/tools/") or "/" in self.path[len("/tools/"):]:
            self.reply(404, {}, {})
            return
        tool = self.path[len("/tools/"):]
        started = time.time_ns()
        status, headers, answer_body = tool_call(tool, self.headers, body)
        self.reply(status, headers, answer_body)
        export_span(tool, self.headers.get("traceparent"), started, status)

    def reply(self, status, headers, body):
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        pass  # one line per request would bury the errors chaos quotes from stderr


def main():
    host, port = LISTEN_ADDR.rsplit(":", 1)
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
