"""An HTTP tool service around agent-outbox 0.1.1, wired as the library's
README says: one `ToolExecutor` over a persistent `OutboxStore("outbox.db")`,
every tool call made through `ex.run(tool, fn, args, session_id)` with the
agent run as the session, and a tool function that takes `idempotency_key`
so the library passes its key downstream ("so the downstream API can also
dedupe"). The rest is what a user writes: authorize the caller, answer by
status code (see ../chaos_protocol.py). Standard library only, like the
library itself.

Started by chaos from target.toml, which fills OUTBOX_DB and LISTEN_PORT in
from the run's facts.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agent_outbox import OutboxStore, ToolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import chaos_protocol as chaos  # noqa: E402

store = OutboxStore(os.environ["OUTBOX_DB"])
# wait_timeout: the README's default is 10 s, longer than the agent waits for
# one answer (2.5 s live); a service in front of a client sets it below the
# client's timeout, or every wait ends as a dropped connection. The lease
# (30 s) and everything else keep the library's defaults.
ex = ToolExecutor(store, wait_timeout=float(os.environ.get("OUTBOX_WAIT_TIMEOUT_S", "1.0")))


def tool_function(tool):
    def send(idempotency_key=None, **arguments):
        receipt = chaos.dispatch(tool, arguments, idempotency_key)
        return chaos.receipt_body(tool, receipt)

    return send


def tool_call(tool, headers, raw_body):
    try:
        arguments = json.loads(raw_body or b"null")
    except ValueError:
        return 400, {}, {"reason": "arguments are not JSON"}
    if not isinstance(arguments, dict):
        return 400, {}, {"reason": "arguments must be a JSON object"}
    try:
        chaos.authorize(headers, tool)
    except chaos.Unauthorized as error:
        return 403, {}, {"reason": str(error)}
    except chaos.AuthorityDown as error:
        return 503, {}, {"reason": f"{error}; nothing was done"}
    # "session_id: one agent run / conversation" (the README's table).
    session = headers.get("X-Run-Id") or ""
    execution = ex.run(tool, tool_function(tool), arguments, session)
    if execution.ok:
        if execution.replay:
            return 200, {"Idempotent-Replayed": "true"}, execution.result
        return 201, {}, execution.result
    error = execution.error or ""
    if "still pending" in error:
        return 409, {}, {"reason": error}
    # The library stores the exception as "TypeName: message".
    if error.startswith(chaos.Declined.__name__ + ":"):
        return 402, {}, {"reason": error}
    return 503, {}, {"reason": error}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        if self.path == "/healthz":
            self.reply(200, {}, {"ok": True})
        else:
            self.reply(404, {}, {"reason": "not found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if not self.path.startswith("/tools/"):
            self.reply(404, {}, {"reason": "not found"})
            return
        status, headers, payload = tool_call(self.path[len("/tools/"):], self.headers, body)
        self.reply(status, headers, payload)

    def reply(self, status, headers, payload):
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer((os.environ["LISTEN_HOST"], int(os.environ["LISTEN_PORT"])), Handler)
    server.daemon_threads = True
    server.serve_forever()
