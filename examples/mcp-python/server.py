"""mcp-python: an MCP server on the official `mcp` SDK (its `MCPServer`,
which mcp 2 calls what mcp 1 called FastMCP) whose one tool, `create_charge`,
charges an invoice through the official `stripe` SDK. It serves Streamable
HTTP at /mcp on LISTEN_HOST:LISTEN_PORT.

    tools/call create_charge {"invoice": "INV-1", "amount_cents": 4999,
                              "recipient": "a@b.example", "message": "..."}
    Authorization: Bearer <token>     (introspected, RFC 7662, on every call)

answers with structured content {"status": ..., "payment_intent": "pi_...",
"reason": ...}: "created", "replayed", "processing", "key_reused",
"declined", "forbidden", "invalid", "failed" (nothing was started) or
"unknown" (the charge may have happened).

Modes (`CHARGES_MODE`):

- `naive`, the common MCP server: a new Stripe idempotency key on every
  tools/call. The SDK's own retry within the call reuses it; a client that
  calls again (its answer was lost, the server restarted, the model decided
  the step again) charges again, while the tool declares idempotentHint.
- `correct`: the call is claimed in PostgreSQL before Stripe is asked, with
  a Stripe key minted once for the operation and sent again on every later
  call of it, so Stripe replays what it did. The operation is the one the
  client names: its run and step when its HTTP requests carry them
  (X-Run-Id, X-Step-Id: a re-planned step is a new tool call with a new key,
  and still the same step), or else the idempotency key it passes, as the
  `idempotency_key` argument or under `_meta` (IDEMPOTENCY_META). A call
  with neither is refused: nothing would tell its retry from a new charge.

Configuration, all from the environment (the target files fill it in):
LISTEN_HOST, LISTEN_PORT, STRIPE_API_BASE, STRIPE_API_KEY,
INTROSPECTION_URL, DATABASE_URL, UPSTREAM_TIMEOUT_SECONDS, CHARGES_MODE,
IDEMPOTENCY_META (default io.example/idempotency-key).
"""

import hashlib
import json
import logging
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

import psycopg
import stripe
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"mcp-python: {name} is not set; the target file sets it (see README.md)")
    return value


MODES = ("naive", "correct")
MODE = env("CHARGES_MODE", "correct")
if MODE not in MODES:
    sys.exit(f"mcp-python: unknown CHARGES_MODE '{MODE}'. Choose from: {', '.join(MODES)}")
LISTEN_HOST = env("LISTEN_HOST")
LISTEN_PORT = int(env("LISTEN_PORT"))
STRIPE_API_BASE = env("STRIPE_API_BASE").rstrip("/")
STRIPE_API_KEY = env("STRIPE_API_KEY", "sk_test_mcp_python")
INTROSPECTION_URL = env("INTROSPECTION_URL")
DATABASE_URL = env("DATABASE_URL", "") if MODE == "naive" else env("DATABASE_URL")
UPSTREAM_TIMEOUT = float(env("UPSTREAM_TIMEOUT_SECONDS", "0.5"))
IDEMPOTENCY_META = env("IDEMPOTENCY_META", "io.example/idempotency-key")
TOOL = "create_charge"
# Notes a caller may reword without changing what the charge is (the
# message is part of the charge: it becomes its description).
FREE_TEXT = {"note", "memo"}
TABLE = "mcp_python_charges"
# Tells this process's claims from a dead one's (a restart after a crash).
BOOT = uuid.uuid4().hex
# Operations this process is working on now.
IN_FLIGHT = set()
IN_FLIGHT_LOCK = threading.Lock()


def connect():
    return psycopg.connect(DATABASE_URL, autocommit=True)


def create_table():
    with connect() as db:
        # Parallel trials start several processes at once.
        db.execute("SELECT pg_advisory_lock(hashtext(%s))", (TABLE,))
        db.execute(
            f"""CREATE TABLE IF NOT EXISTS {TABLE} (
                tenant text NOT NULL,
                operation text NOT NULL,
                fingerprint text NOT NULL,
                stripe_key text NOT NULL,
                state text NOT NULL,
                payment_intent text,
                created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                PRIMARY KEY (tenant, operation))"""
        )
        db.execute("SELECT pg_advisory_unlock(hashtext(%s))", (TABLE,))


class Answer(Exception):
    """How a call ends: a kind (created, replayed, ...), the payment intent
    when there is one, and a reason."""

    def __init__(self, kind, payment_intent=None, reason=None):
        super().__init__(kind)
        self.kind, self.payment_intent, self.reason = kind, payment_intent, reason

    def body(self):
        body = {"status": self.kind}
        if self.payment_intent:
            body["payment_intent"] = self.payment_intent
        if self.reason:
            body["reason"] = self.reason
        return body


def introspect(token):
    """The caller's tenant, asked of the authority on every call."""
    body = urllib.parse.urlencode({"token": token}).encode()
    request = urllib.request.Request(INTROSPECTION_URL, data=body, method="POST")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
            grant = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        # Nothing is known about the caller: do nothing, not even a replay.
        raise Answer("failed", reason=f"the authority did not answer: {error}")
    if not grant.get("active") or TOOL not in (grant.get("scope") or "").split():
        raise Answer("forbidden", reason=f"the token does not grant {TOOL}")
    return grant.get("tenant") or grant.get("sub") or ""


def intent(value):
    """The charge as an intent: numbers by value, free text left out."""
    if isinstance(value, dict):
        return {key: intent(item) for key, item in value.items() if key not in FREE_TEXT and item is not None}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def fingerprint(args):
    canonical = json.dumps(intent(args), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def operation_of(ctx, args, idempotency_key):
    """The operation this call belongs to, as the client names it; None when
    it names none."""
    headers = ctx.headers or {}
    run, step = headers.get("x-run-id"), headers.get("x-step-id")
    if run and step:
        return f"step:{run}:{step}:{TOOL}:{args['invoice']}"
    meta = ctx.request_context.meta or {}
    key = idempotency_key or meta.get(IDEMPOTENCY_META)
    if isinstance(key, str) and key:
        return f"key:{key}"
    return None


def claim(db, tenant, operation, print_):
    """(row, fresh): the operation's record, and whether this call created it."""
    stripe_key = f"mcp-python-{uuid.uuid4().hex}"
    row = db.execute(
        f"""INSERT INTO {TABLE} (tenant, operation, fingerprint, stripe_key, state)
            VALUES (%s, %s, %s, %s, 'pending')
            ON CONFLICT (tenant, operation) DO NOTHING
            RETURNING fingerprint, stripe_key, state, payment_intent""",
        (tenant, operation, print_, stripe_key),
    ).fetchone()
    if row:
        return row, True
    row = db.execute(
        f"SELECT fingerprint, stripe_key, state, payment_intent FROM {TABLE} WHERE tenant = %s AND operation = %s",
        (tenant, operation),
    ).fetchone()
    return row, False


def charge(ctx, args, idempotency_key):
    """One tools/call: raises the Answer it ends with."""
    headers = ctx.headers or {}
    token = (headers.get("authorization") or "").removeprefix("Bearer ").strip()
    tenant = introspect(token)
    amount = args["amount_cents"]
    if amount != int(amount) or amount <= 0:
        raise Answer("invalid", reason="amount_cents must be a positive whole number")
    if MODE == "naive":
        # THE BUG: a Stripe key of this call's own, so a second tools/call
        # of the same operation is a second charge.
        return dispatch(None, None, args, int(amount), f"mcp-python-{uuid.uuid4().hex}", True)
    operation = operation_of(ctx, args, idempotency_key)
    if operation is None:
        raise Answer("invalid", reason=f"pass an idempotency key: the idempotency_key argument or _meta['{IDEMPOTENCY_META}']")
    print_ = fingerprint(args)
    scoped = (tenant, operation)
    with IN_FLIGHT_LOCK:
        if scoped in IN_FLIGHT:
            raise Answer("processing", reason="another call of this operation is in flight")
        IN_FLIGHT.add(scoped)
    try:
        with connect() as db:
            (stored, stripe_key, state, payment_intent), fresh = claim(db, tenant, operation, print_)
            if stored != print_:
                raise Answer("key_reused", reason="this operation was asked before with a different charge")
            if state == "succeeded":
                raise Answer("replayed", payment_intent)
            if state == "declined":
                raise Answer("declined", reason="the card was declined (answered before)")
            # Pending: new, or left by a call that could not learn the
            # outcome (here or in a process that died): send again, under
            # the stored key, so Stripe replays what it did.
            return dispatch(db, scoped, args, int(amount), stripe_key, fresh)
    finally:
        with IN_FLIGHT_LOCK:
            IN_FLIGHT.discard(scoped)


def stripe_client():
    """(client, its HTTP client): one per call, closed after it, since one
    trial's provider is gone by the next."""
    http = stripe.RequestsClient(timeout=UPSTREAM_TIMEOUT)
    return stripe.StripeClient(
        STRIPE_API_KEY,
        base_addresses={"api": STRIPE_API_BASE},
        http_client=http,
        # One retry of the SDK's own, under the same key, as Stripe
        # recommends; two with its 0.5 s+ backoff would outlast the caller.
        max_network_retries=1,
    ), http


def record(db, scoped, state, payment_intent=None):
    if db is not None:
        db.execute(
            f"UPDATE {TABLE} SET state = %s, payment_intent = %s WHERE tenant = %s AND operation = %s",
            (state, payment_intent, *scoped),
        )


def dispatch(db, scoped, args, amount, stripe_key, fresh):
    params = {
        "amount": amount,
        "currency": args.get("currency") or "usd",
        "confirm": True,
        "payment_method": "pm_card_visa",
        # The Stripe key in the metadata too: a search finds this very
        # charge when Stripe's answer does not tell (a saved 500).
        "metadata": {"invoice": args["invoice"], "charge_key": stripe_key},
    }
    if args.get("recipient"):
        params["receipt_email"] = args["recipient"]
    if args.get("message"):
        params["description"] = args["message"]
    client, http = stripe_client()
    try:
        intent_ = client.v1.payment_intents.create(params=params, options={"idempotency_key": stripe_key})
        replayed_by_stripe = (intent_.last_response.headers.get("Idempotent-Replayed") or "") == "true"
    except stripe.CardError:
        record(db, scoped, "declined")
        raise Answer("declined", reason="the card was declined")
    except stripe.IdempotencyError as error:
        raise Answer("unknown", reason=f"Stripe refused the idempotency key: {error.user_message}")
    except stripe.APIConnectionError as error:
        intent_ = find(client, stripe_key)
        if intent_ is None:
            raise Answer("unknown", reason=f"Stripe's answer was lost; the charge may have happened: {error.user_message}")
        replayed_by_stripe = True
    except stripe.APIError as error:
        if error.http_status == 409:
            raise Answer("processing", reason="Stripe is executing a request with this key")
        # Stripe saves a 500 under the key and replays it for 24 h: only
        # Stripe's record of the charge tells whether it happened.
        intent_ = find(client, stripe_key)
        if intent_ is None:
            raise Answer("unknown", reason=f"Stripe answered {error.http_status} and has no charge under the key yet")
        replayed_by_stripe = True
    except stripe.StripeError as error:
        raise Answer("unknown", reason=f"Stripe answered {error.http_status}: {error.user_message}")
    finally:
        http.close()
    record(db, scoped, "succeeded", intent_.id)
    # Stripe replayed an answer to this very call (the SDK retried after a
    # lost answer): the charge is still this call's own.
    raise Answer("replayed" if replayed_by_stripe and not fresh else "created", intent_.id)


def find(client, stripe_key):
    """The payment intent charged under `stripe_key`, by Stripe's search, or None."""
    try:
        found = client.v1.payment_intents.search(params={"query": f"metadata['charge_key']:'{stripe_key}'"})
    except stripe.StripeError:
        return None
    return found.data[0] if found.data else None


server = MCPServer("mcp-python", log_level="WARNING")


# Declared idempotent in both modes: the naive one claims what it does not
# keep, as many MCP servers do, and chaos holds the hint to the ledger.
@server.tool(
    name=TOOL,
    description="Charge an invoice's card through Stripe. Calling it again for the same invoice and step does not charge twice.",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True),
)
def create_charge(
    invoice: str,
    amount_cents: int,
    ctx: Context,
    currency: str | None = None,
    recipient: str | None = None,
    message: str | None = None,
    memo: str | None = None,
    note: str | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    args = {
        "invoice": invoice,
        "amount_cents": amount_cents,
        "currency": currency,
        "recipient": recipient,
        "message": message,
        "memo": memo,
        "note": note,
    }
    try:
        charge(ctx, args, idempotency_key)
        answer = Answer("unknown", reason="no answer was decided")
    except Answer as decided:
        answer = decided
    except psycopg.Error as error:
        # The claim could not be read or written; nothing was sent.
        answer = Answer("failed", reason=f"the claims table failed: {error}")
    return answer.body()


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if MODE == "correct":
        create_table()
    server.run("streamable-http", host=LISTEN_HOST, port=LISTEN_PORT)
