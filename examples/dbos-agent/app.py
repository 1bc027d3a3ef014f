"""dbos-agent: a tool-calling agent as a DBOS durable workflow on PostgreSQL.
Each run is one workflow (workflow id = the run's id) whose steps call the
model (the openai client, Chat Completions, a `@DBOS.step`) and the tools
(each call a `@DBOS.step`), looping until the model answers with text. The
tools, charge_card, send_reminder and send_notification_to_self, post their effect to the provider
(chaos's provider protocol: POST {PROVIDER_URL}/effects/{tool}).

Its API:

    GET  /healthz                         200 once DBOS is launched (the model is not asked)
    POST /runs {"run_id": "r-1", "prompt": "..."}
         200 {"final": "<the agent's final text>"} | 500 {"error": "..."}

A request starts the workflow under `SetWorkflowID(run_id)`. The same
run_id again is the user retrying: DBOS answers with the workflow already
under that id (its result when it finished, or the running one's, which is
joined). A process killed mid-run is recovered by DBOS itself on the next
launch: `DBOS.launch()` resumes every pending workflow of this executor,
replaying the recorded steps' outputs and running the first unrecorded step
again.

Forms (`AGENT_MODE`):

- `naive`: the DBOS docs' pattern, the charge as a step with no key. DBOS
  records a step's output after it returns: a step whose effect committed
  but whose completion was not recorded (the process died in between) runs
  again on recovery, and so charges again. A re-plan (the model calls the
  tool again, a new tool-call id) is a new step: a new charge;
- `keyed`: the effect keyed by the run's structure, sha256(workflow id,
  tool, invoice), claimed in PostgreSQL before the call (dbos_agent_effects)
  and sent as the provider's `Idempotency-Key`: a completed claim answers
  its stored result as `replayed`; a claim left by a killed process is
  re-sent with the same key and its first arguments, so the provider
  replays. Neither the step's id nor the free text (memo, message) is in
  the key: a re-plan is a new step with reworded text, the same charge. A
  note to oneself is its own action each time the model decides it: it is
  keyed by the tool call's id instead.

Environment (the target files fill it in): LISTEN_HOST, LISTEN_PORT,
OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, PROVIDER_URL, DATABASE_URL
(the claims), DBOS_SYSTEM_DATABASE_URL (DBOS's own database, created by
DBOS when missing), AGENT_MODE, UPSTREAM_TIMEOUT_SECONDS.
"""

import hashlib
import json
import os
import sys
import threading
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
from dbos import DBOS, SetWorkflowID
from openai import OpenAI


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"dbos-agent: {name} is not set; the target file sets it (see README.md)")
    return value


MODES = ("naive", "keyed")
MODE = env("AGENT_MODE", "naive")
if MODE not in MODES:
    sys.exit(f"dbos-agent: unknown AGENT_MODE '{MODE}'. Choose from: {', '.join(MODES)}")
LISTEN = (env("LISTEN_HOST", "127.0.0.1"), int(env("LISTEN_PORT")))
OPENAI_MODEL = env("OPENAI_MODEL", "gpt-4.1-mini")
PROVIDER_URL = env("PROVIDER_URL").rstrip("/")
DATABASE_URL = env("DATABASE_URL")
SYSTEM_DATABASE_URL = env("DBOS_SYSTEM_DATABASE_URL", f"postgresql://postgres@127.0.0.1:5432/dbos_agent_{MODE}_sys")
UPSTREAM_TIMEOUT = float(env("UPSTREAM_TIMEOUT_SECONDS", "10"))
MAX_TURNS = int(env("MAX_TURNS", "12"))
TABLE = "dbos_agent_effects"
# Tells this process's claims from a dead one's (a restart after a crash).
BOOT = uuid.uuid4().hex

MODEL = OpenAI(base_url=env("OPENAI_BASE_URL"), api_key=env("OPENAI_API_KEY", "chaos"))
DBOS(config={"name": f"dbos-agent-{MODE}", "system_database_url": SYSTEM_DATABASE_URL})

TOOL_SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": "charge_card",
            "description": "Charge the customer's card for an invoice.",
            "parameters": {
                "type": "object",
                "properties": {
                    "invoice": {"type": "string", "description": "The invoice to charge."},
                    "amount_cents": {"type": "integer", "description": "The amount, in cents."},
                    "recipient": {"type": "string", "description": "The customer's billing email."},
                    "message": {"type": "string", "description": "The message for the customer."},
                    "memo": {"type": "string", "description": "A note on the charge."},
                },
                "required": ["invoice", "amount_cents", "recipient", "message"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "send_reminder",
            "description": "Send the customer a payment reminder for an invoice.",
            "parameters": {
                "type": "object",
                "properties": {
                    "invoice": {"type": "string", "description": "The invoice to remind about."},
                    "amount_cents": {"type": "integer", "description": "The amount due, in cents."},
                    "recipient": {"type": "string", "description": "The customer's billing email."},
                    "message": {"type": "string", "description": "The reminder's text."},
                },
                "required": ["invoice", "amount_cents", "recipient", "message"],
            },
        },
    },
]
TOOL_SCHEMAS.append(
    {
        "type": "function",
        "function": {
            "name": "send_notification_to_self",
            "description": "Send yourself a note about an invoice.",
            "parameters": {
                "type": "object",
                "properties": {
                    "invoice": {"type": "string", "description": "The invoice the note is about."},
                    "amount_cents": {"type": "integer", "description": "The invoice's amount, in cents."},
                    "recipient": {"type": "string", "description": "The customer's billing email."},
                    "message": {"type": "string", "description": "The message the note is about."},
                    "note": {"type": "string", "description": "The note."},
                },
                "required": ["invoice", "amount_cents", "recipient", "message", "note"],
            },
        },
    }
)
TOOL_FIELDS = {
    "charge_card": ("invoice", "amount_cents", "recipient", "message", "memo"),
    "send_reminder": ("invoice", "amount_cents", "recipient", "message"),
    "send_notification_to_self": ("invoice", "amount_cents", "recipient", "message", "note"),
}


# ---- the effect: chaos's provider protocol (docs/target-protocol.md §4) ----


def provider_send(args, idempotency_key=None):
    """POST the tool's arguments to the provider: {"status", "receipt"}."""
    tool_name = args["tool"]
    body = json.dumps({name: value for name, value in args.items() if name != "tool"}).encode()
    request = urllib.request.Request(f"{PROVIDER_URL}/effects/{tool_name}", data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    if idempotency_key:
        request.add_header("Idempotency-Key", idempotency_key)
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
            answer = json.loads(response.read() or b"{}")
            replayed = (response.headers.get("Idempotent-Replayed") or "") == "true"
            status = "replayed" if replayed or response.status == 200 else "applied"
            return {"status": status, "receipt": answer.get("receipt")}
    except urllib.error.HTTPError as error:
        if error.code >= 500:
            # An internal error, with or without the effect committed.
            return {"status": "unknown", "receipt": None}
        if error.code == 422:
            # The key was used with another body: nothing happened now.
            return {"status": "conflict", "receipt": None}
        # 402 (declined), 400 (not JSON): a definitive refusal, nothing
        # happened, and sending it again will not change that.
        return {"status": "rejected", "receipt": None}
    except (urllib.error.URLError, OSError, ValueError):
        # No answer: it may or may not have been committed.
        return {"status": "unknown", "receipt": None}


# ---- the keyed form: a claim in PostgreSQL before the call -----------------

# A tool whose every decision is a new action by design (a note to oneself
# may be sent again on purpose): keyed by the model's tool call instead of
# the invoice, so each decision acts once and none is lost.
PER_DECISION = {"send_notification_to_self"}

KEY_LOCKS = {}
KEY_LOCKS_LOCK = threading.Lock()


def key_lock(key):
    # A run's recovery and the user's retry may run in this process at once.
    with KEY_LOCKS_LOCK:
        return KEY_LOCKS.setdefault(key, threading.Lock())


def connect():
    return psycopg.connect(DATABASE_URL, autocommit=True)


def create_table():
    with connect() as db:
        # Parallel trials start several processes at once.
        db.execute("SELECT pg_advisory_lock(hashtext(%s))", (TABLE,))
        db.execute(
            f"""CREATE TABLE IF NOT EXISTS {TABLE} (
                key text PRIMARY KEY,
                run_id text NOT NULL,
                tool text NOT NULL,
                invoice text NOT NULL,
                arguments jsonb NOT NULL,
                state text NOT NULL,
                owner text NOT NULL,
                result jsonb,
                created_at timestamptz NOT NULL DEFAULT clock_timestamp())"""
        )
        db.execute("SELECT pg_advisory_unlock(hashtext(%s))", (TABLE,))


def keyed(run_id, args, send, decision=None):
    """Runs `send(arguments, idempotency_key)` at most once per (workflow, tool, invoice),
    or, for a tool whose every decision is its own action, per decision."""
    tool_name, invoice = args["tool"], args["invoice"]
    scope = decision if tool_name in PER_DECISION else invoice
    key = hashlib.sha256(json.dumps([run_id, tool_name, scope]).encode()).hexdigest()
    with key_lock(key), connect() as db:
        claimed = db.execute(
            f"""INSERT INTO {TABLE} (key, run_id, tool, invoice, arguments, state, owner)
                VALUES (%s, %s, %s, %s, %s, 'pending', %s)
                ON CONFLICT (key) DO NOTHING RETURNING arguments""",
            (key, run_id, tool_name, invoice, json.dumps(args), BOOT),
        ).fetchone()
        if claimed is None:
            state, stored, result = db.execute(
                f"SELECT state, arguments, result FROM {TABLE} WHERE key = %s", (key,)
            ).fetchone()
            if state == "done":
                if result["status"] in ("applied", "replayed"):
                    return {"status": "replayed", "receipt": result["receipt"]}
                return result
            # Pending: left by a process that was killed, or by an attempt
            # that could not learn the outcome. Send again under the same
            # key with the first arguments (the provider compares them).
            db.execute(f"UPDATE {TABLE} SET owner = %s WHERE key = %s", (BOOT, key))
            args = stored
        result = send(args, f"dbos-agent-{key}")
        # An outcome not learned (unknown) leaves the claim pending: the
        # next call re-sends under the same key and learns it.
        if result["status"] not in ("unknown", "pending"):
            db.execute(
                f"UPDATE {TABLE} SET state = 'done', result = %s WHERE key = %s",
                (json.dumps(result), key),
            )
        return result


# ---- the workflow and its steps ----------------------------------------------


@DBOS.step()
def call_model(messages):
    """One model turn; its output (the assistant message) is recorded."""
    reply = MODEL.chat.completions.create(model=OPENAI_MODEL, messages=messages, tools=TOOL_SCHEMAS)
    message = reply.choices[0].message
    recorded = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        recorded["tool_calls"] = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}
            for call in message.tool_calls
        ]
    return recorded


@DBOS.step()
def call_tool(name, arguments, call_id):
    """One tool call; the effect happens here, its result is recorded after."""
    if name not in TOOL_FIELDS:
        return json.dumps({"status": "rejected", "receipt": None, "reason": f"no tool named {name}"})
    given = json.loads(arguments or "{}")
    args = {"tool": name, **{field: given[field] for field in TOOL_FIELDS[name] if field in given}}
    run_id = DBOS.workflow_id
    if MODE == "keyed":
        result = keyed(run_id, args, provider_send, decision=call_id)
    else:
        result = provider_send(args)
    print(f"dbos-agent: {run_id} {name} {args.get('invoice')}: {result['status']}", flush=True)
    return json.dumps(result)


@DBOS.workflow()
def agent_run(prompt):
    messages = [
        {"role": "system", "content": "You collect payments for invoices. Use the tools to charge cards and send reminders."},
        {"role": "user", "content": prompt},
    ]
    for _ in range(MAX_TURNS):
        message = call_model(messages)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return message.get("content") or ""
        for call in calls:
            result = call_tool(call["function"]["name"], call["function"]["arguments"], call["id"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    raise RuntimeError(f"the model was still calling tools after {MAX_TURNS} turns")


def run(run_id, prompt):
    # The same id again joins (or answers) the workflow already under it.
    with SetWorkflowID(run_id):
        handle = DBOS.start_workflow(agent_run, prompt)
    return handle.get_result()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.send(200, {"status": "ok", "mode": MODE})
        else:
            self.send(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/runs":
            return self.send(404, {"error": "not found; POST /runs"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
            run_id, prompt = body["run_id"], body["prompt"]
            if not isinstance(run_id, str) or not isinstance(prompt, str):
                raise TypeError
        except (ValueError, TypeError, KeyError):
            return self.send(400, {"error": 'the body must be {"run_id": "<text>", "prompt": "<text>"}'})
        try:
            final = run(run_id, prompt)
        except Exception as error:  # the workflow's failure is the run's answer
            print(f"dbos-agent: run {run_id} failed: {error!r}", flush=True)
            return self.send(500, {"error": f"{type(error).__name__}: {error}"})
        self.send(200, {"final": final})


if __name__ == "__main__":
    if MODE == "keyed":
        create_table()
    # Recovers this executor's pending workflows (a run the last process
    # was killed in) in the background, then serves.
    DBOS.launch()
    server = ThreadingHTTPServer(LISTEN, Handler)
    server.daemon_threads = True
    print(f"dbos-agent: {MODE}, listening on {LISTEN[0]}:{LISTEN[1]}", flush=True)
    server.serve_forever()
