"""openai-agents: an agent on the OpenAI Agents SDK with two function tools,
charge_card and send_reminder, that charge through the official `stripe` SDK.

Its API:

    GET  /healthz                         200 once it listens (the model is not asked)
    POST /runs {"run_id": "r-1", "prompt": "..."}
         200 {"final": "<the agent's final text>"} | 500 {"error": "..."}

One request is one agent run, the prompt as the user's message, run to
completion with `Runner.run`. The same run_id again is the user retrying the
run; the SDK's docs have no resume for a run that died with its process, so
the run starts over, as a user would start it.

Forms (`AGENT_MODE`):

- `naive`: the function tool exactly as the SDK's docs show one: the charge
  is made every time the tool runs (the Stripe SDK mints a new idempotency
  key per call), so a re-plan (the model decides the step again, a new call
  id) or a run started over after a crash charges again;
- `keyed`: the effect keyed by the run's structure, sha256(run_id, tool,
  invoice), claimed in PostgreSQL before the call (openai_agents_effects):
  a completed claim answers its stored result as `replayed` without calling
  Stripe; a claim left by a killed process is re-sent with the same Stripe
  idempotency key and its first arguments, so Stripe replays its answer.
  Free text (memo, message) is not in the key: a re-plan rewords it. A
  note to oneself is its own action each time the model decides it: it is
  keyed by the tool call's id (the SDK's ToolContext.tool_call_id) instead.

Environment (the target files fill it in): LISTEN_HOST, LISTEN_PORT,
OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_API ("responses", the default, or
"chat"), OPENAI_MODEL, STRIPE_API_BASE, STRIPE_API_KEY, DATABASE_URL,
AGENT_MODE, UPSTREAM_TIMEOUT_SECONDS.
"""

import asyncio
import hashlib
import json
import os
import sys
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import stripe
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.tool_context import ToolContext
from openai import AsyncOpenAI


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"openai-agents: {name} is not set; the target file sets it (see README.md)")
    return value


MODES = ("naive", "keyed")
MODE = env("AGENT_MODE", "naive")
if MODE not in MODES:
    sys.exit(f"openai-agents: unknown AGENT_MODE '{MODE}'. Choose from: {', '.join(MODES)}")
APIS = ("responses", "chat")
API = env("OPENAI_API", "responses")
if API not in APIS:
    sys.exit(f"openai-agents: unknown OPENAI_API '{API}'. Choose from: {', '.join(APIS)}")
LISTEN = (env("LISTEN_HOST", "127.0.0.1"), int(env("LISTEN_PORT")))
OPENAI_BASE_URL = env("OPENAI_BASE_URL")
OPENAI_API_KEY = env("OPENAI_API_KEY", "chaos")
OPENAI_MODEL = env("OPENAI_MODEL", "gpt-4.1-mini")
DATABASE_URL = env("DATABASE_URL") if MODE == "keyed" else os.environ.get("DATABASE_URL")
UPSTREAM_TIMEOUT = float(env("UPSTREAM_TIMEOUT_SECONDS", "10"))
MAX_TURNS = int(env("MAX_TURNS", "12"))
TABLE = "openai_agents_effects"
# Tells this process's claims from a dead one's (a restart after a crash).
BOOT = uuid.uuid4().hex

# No hosted tracing: the only endpoint this app talks to is the one it is given.
set_tracing_disabled(True)
stripe.api_key = env("STRIPE_API_KEY", "sk_test_openai_agents")
stripe.api_base = env("STRIPE_API_BASE").rstrip("/")
stripe.default_http_client = stripe.RequestsClient(timeout=UPSTREAM_TIMEOUT)


@dataclass
class RunInfo:
    """The run's context, handed to every tool by the SDK (its ToolContext, a
    RunContextWrapper that also carries the tool call's id)."""

    run_id: str


# ---- the effect -----------------------------------------------------------


def stripe_charge(args, idempotency_key=None):
    """One PaymentIntent for the tool call's arguments: {"status", "receipt"}.
    Without a key the SDK mints one per call (reused only by its own retries)."""
    params = {
        "amount": int(args["amount_cents"]),
        "currency": "usd",
        "confirm": True,
        "payment_method": "pm_card_visa",
        "receipt_email": args["recipient"],
        "metadata": {"invoice": args["invoice"], "kind": args["tool"]},
        "description": args.get("memo") or args.get("note") or args["message"],
    }
    if idempotency_key:
        params["idempotency_key"] = idempotency_key
    try:
        intent = stripe.PaymentIntent.create(**params)
    except (stripe.CardError, stripe.InvalidRequestError) as error:
        # A definitive refusal (a decline, a bad parameter): nothing was
        # charged, and sending it again will not change that.
        return {"status": "rejected", "receipt": None, "reason": str(error.user_message)}
    except stripe.IdempotencyError as error:
        # The key was used with other parameters: nothing was charged now.
        return {"status": "conflict", "receipt": None, "reason": str(error.user_message)}
    except stripe.APIError as error:
        if error.http_status == 409:
            # Stripe is executing a request with this key right now.
            return {"status": "pending", "receipt": None, "reason": str(error.user_message)}
        # A 500: the charge may have happened.
        return {"status": "unknown", "receipt": None, "reason": str(error.user_message or error)}
    except stripe.StripeError as error:
        # A lost answer or a 500: the charge may have happened.
        return {"status": "unknown", "receipt": None, "reason": str(error.user_message or error)}
    replayed = (intent.last_response.headers.get("Idempotent-Replayed") or "") == "true"
    return {"status": "replayed" if replayed else "applied", "receipt": intent.id}


# ---- the keyed form: a claim in PostgreSQL before the call -----------------

# A tool whose every decision is a new action by design (a note to oneself
# may be sent again on purpose): keyed by the model's tool call instead of
# the invoice, so each decision acts once and none is lost.
PER_DECISION = {"send_notification_to_self"}

KEY_LOCKS = {}
KEY_LOCKS_LOCK = threading.Lock()


def key_lock(key):
    # Parallel tool calls of one turn run in threads at once: the second
    # waits for the first and then finds its claim completed.
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
    """Runs `send(arguments, idempotency_key)` at most once per (run, tool, invoice),
    or, for a tool whose every decision is its own action, per decision."""
    tool, invoice = args["tool"], args["invoice"]
    scope = decision if tool in PER_DECISION else invoice
    key = hashlib.sha256(json.dumps([run_id, tool, scope]).encode()).hexdigest()
    with key_lock(key), connect() as db:
        claimed = db.execute(
            f"""INSERT INTO {TABLE} (key, run_id, tool, invoice, arguments, state, owner)
                VALUES (%s, %s, %s, %s, %s, 'pending', %s)
                ON CONFLICT (key) DO NOTHING RETURNING arguments""",
            (key, run_id, tool, invoice, json.dumps(args), BOOT),
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
        result = send(args, f"openai-agents-{key}")
        # An outcome not learned (unknown, pending) leaves the claim
        # pending: the next call re-sends under the same key and learns it.
        if result["status"] not in ("unknown", "pending"):
            db.execute(
                f"UPDATE {TABLE} SET state = 'done', result = %s WHERE key = %s",
                (json.dumps(result), key),
            )
        return result


def perform(ctx, args):
    run_id = ctx.context.run_id
    if MODE == "keyed":
        result = keyed(run_id, args, stripe_charge, decision=ctx.tool_call_id)
    else:
        result = stripe_charge(args)
    print(f"openai-agents: {run_id} {args['tool']} {args['invoice']}: {result['status']}", flush=True)
    return json.dumps({"status": result["status"], "receipt": result["receipt"]})


# ---- the tools, as the SDK's docs show them ----------------------------------


@function_tool
def charge_card(
    ctx: ToolContext[RunInfo],
    invoice: str,
    amount_cents: int,
    recipient: str,
    message: str,
    memo: str = "",
) -> str:
    """Charge the customer's card for an invoice.

    Args:
        invoice: The invoice to charge.
        amount_cents: The amount, in cents.
        recipient: The customer's billing email.
        message: The message for the customer.
        memo: A note on the charge.
    """
    args = {"tool": "charge_card", "invoice": invoice, "amount_cents": amount_cents,
            "recipient": recipient, "message": message, "memo": memo}
    return perform(ctx, args)


@function_tool
def send_reminder(
    ctx: ToolContext[RunInfo],
    invoice: str,
    amount_cents: int,
    recipient: str,
    message: str,
) -> str:
    """Send the customer a payment reminder for an invoice.

    Args:
        invoice: The invoice to remind about.
        amount_cents: The amount due, in cents.
        recipient: The customer's billing email.
        message: The reminder's text.
    """
    args = {"tool": "send_reminder", "invoice": invoice, "amount_cents": amount_cents,
            "recipient": recipient, "message": message}
    return perform(ctx, args)


@function_tool
def send_notification_to_self(
    ctx: ToolContext[RunInfo],
    invoice: str,
    amount_cents: int,
    recipient: str,
    message: str,
    note: str,
) -> str:
    """Send yourself a note about an invoice.

    Args:
        invoice: The invoice the note is about.
        amount_cents: The invoice's amount, in cents.
        recipient: The customer's billing email.
        message: The message the note is about.
        note: The note.
    """
    args = {"tool": "send_notification_to_self", "invoice": invoice, "amount_cents": amount_cents,
            "recipient": recipient, "message": message, "note": note}
    return perform(ctx, args)


def make_agent():
    # A client per run: each run has an event loop of its own.
    client = AsyncOpenAI(base_url=OPENAI_BASE_URL, api_key=OPENAI_API_KEY)
    if API == "chat":
        model = OpenAIChatCompletionsModel(model=OPENAI_MODEL, openai_client=client)
    else:
        model = OpenAIResponsesModel(model=OPENAI_MODEL, openai_client=client)
    return Agent(
        name="billing",
        instructions="You collect payments for invoices. Use the tools to charge cards and send reminders.",
        tools=[charge_card, send_reminder, send_notification_to_self],
        model=model,
    )


def run(run_id, prompt):
    """The whole run, started over on a retry (the SDK keeps no state across
    a process's death)."""
    # asyncio.run: each request's thread gets an event loop of its own.
    result = asyncio.run(Runner.run(make_agent(), prompt, context=RunInfo(run_id), max_turns=MAX_TURNS))
    return str(result.final_output)


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
            self.send(200, {"status": "ok", "mode": MODE, "api": API})
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
        except Exception as error:  # the agent's failure is the run's answer
            print(f"openai-agents: run {run_id} failed: {error!r}", flush=True)
            return self.send(500, {"error": f"{type(error).__name__}: {error}"})
        self.send(200, {"final": final})


if __name__ == "__main__":
    if MODE == "keyed":
        create_table()
    server = ThreadingHTTPServer(LISTEN, Handler)
    server.daemon_threads = True
    print(f"openai-agents: {MODE}, {API}, listening on {LISTEN[0]}:{LISTEN[1]}", flush=True)
    server.serve_forever()
