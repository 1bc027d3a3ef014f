"""stripe-charges: a small payments service that charges invoices through the
official `stripe` SDK, behind an idempotency table of its own in PostgreSQL.

Its own API:

    POST /api/charges
    Authorization: Bearer <token>          (introspected, RFC 7662, every request)
    Idempotency-Key: <the caller's key>
    {"invoice": "INV-1", "amount_cents": 4999, "currency": "usd", "recipient": "a@b.example"}

answers 201 {"status": "created", "payment_intent": "pi_..."}, 200 +
`Idempotent-Replayed: true` {"status": "replayed", ...}, 409 "processing",
422 "key_reused", 402 "declined", 401/403 "forbidden", 503 "unknown" (the
charge may have happened) or "failed" (nothing was started). The same
handler also speaks chaos's target protocol at `POST /tools/{tool}`
(docs/target-protocol.md), for `protocol.target.toml`.

Modes (`CHARGES_MODE`):

- `correct`: the Stripe idempotency key is minted once per operation, stored
  with the claim, and re-sent on every retry, so Stripe replays what it did;
- `fresh-key`, the documented weakness: a new Stripe idempotency key per
  request the service receives. Within the request the key holds (the SDK's
  own retry reuses it, the search after a 500 finds the charge by it); a
  retry from outside the request (the caller's, after a restart) charges
  again.

Configuration, all from the environment (the target files fill it in):
LISTEN_HOST, LISTEN_PORT, STRIPE_API_BASE, STRIPE_API_KEY,
INTROSPECTION_URL, DATABASE_URL, UPSTREAM_TIMEOUT_SECONDS, CHARGES_MODE,
REQUIRED_SCOPE (the scopes that let a caller use /api/charges,
space-separated, any one of them; default charge_card).
"""

import hashlib
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import stripe


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"stripe-charges: {name} is not set; the target file sets it (see README.md)")
    return value


MODES = ("correct", "fresh-key")
MODE = env("CHARGES_MODE", "correct")
if MODE not in MODES:
    sys.exit(f"stripe-charges: unknown CHARGES_MODE '{MODE}'. Choose from: {', '.join(MODES)}")
LISTEN = (env("LISTEN_HOST"), int(env("LISTEN_PORT")))
STRIPE_API_BASE = env("STRIPE_API_BASE").rstrip("/")
STRIPE_API_KEY = env("STRIPE_API_KEY", "sk_test_stripe_charges")
INTROSPECTION_URL = env("INTROSPECTION_URL")
DATABASE_URL = env("DATABASE_URL")
UPSTREAM_TIMEOUT = float(env("UPSTREAM_TIMEOUT_SECONDS", "0.5"))
REQUIRED_SCOPE = env("REQUIRED_SCOPE", "charge_card")
# Notes a caller may reword without changing what the charge is (the
# message is part of the charge: it becomes its description).
FREE_TEXT = {"note", "memo"}
TABLE = "stripe_charges_idempotency"
# Tells this process's claims from a dead one's (a restart after a crash).
BOOT = uuid.uuid4().hex
# Keys this process is working on now: a claim it holds without an attempt
# in flight was left by an attempt that answered "unknown".
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
                key text NOT NULL,
                fingerprint text NOT NULL,
                stripe_key text NOT NULL,
                state text NOT NULL,
                owner text NOT NULL,
                payment_intent text,
                created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
                PRIMARY KEY (tenant, key))"""
        )
        db.execute("SELECT pg_advisory_unlock(hashtext(%s))", (TABLE,))


class Answer(Exception):
    """How a request ends: a kind (created, replayed, processing, ...), the
    payment intent when there is one, and a reason."""

    def __init__(self, kind, payment_intent=None, reason=None):
        super().__init__(kind)
        self.kind, self.payment_intent, self.reason = kind, payment_intent, reason


def introspect(token, scope):
    """The caller's tenant, asked of the authority on every request."""
    body = urllib.parse.urlencode({"token": token}).encode()
    request = urllib.request.Request(INTROSPECTION_URL, data=body, method="POST")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
            grant = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError) as error:
        # Nothing is known about the caller: do nothing, not even a replay.
        raise Answer("failed", reason=f"the authority did not answer: {error}")
    granted = (grant.get("scope") or "").split()
    if not grant.get("active") or not any(wanted in granted for wanted in scope.split()):
        raise Answer("forbidden", reason=f"the token does not grant {scope}")
    return grant.get("tenant") or grant.get("sub") or ""


def intent(value):
    """The charge as an intent: numbers by value, free text left out."""
    if isinstance(value, dict):
        return {key: intent(item) for key, item in value.items() if key not in FREE_TEXT}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [intent(item) for item in value]
    return value


def fingerprint(args):
    canonical = json.dumps(intent(args), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def claim(db, tenant, key, print_):
    """(row, fresh): the operation's record, and whether this request created it."""
    stripe_key = f"stripe-charges-{uuid.uuid4().hex}"
    row = db.execute(
        f"""INSERT INTO {TABLE} (tenant, key, fingerprint, stripe_key, state, owner)
            VALUES (%s, %s, %s, %s, 'pending', %s)
            ON CONFLICT (tenant, key) DO NOTHING
            RETURNING fingerprint, stripe_key, state, owner, payment_intent""",
        (tenant, key, print_, stripe_key, BOOT),
    ).fetchone()
    if row:
        return row, True
    row = db.execute(
        f"SELECT fingerprint, stripe_key, state, owner, payment_intent FROM {TABLE} WHERE tenant = %s AND key = %s",
        (tenant, key),
    ).fetchone()
    return row, False


def charge(headers, args, scope):
    """One request to charge: raises the Answer it ends with."""
    token = (headers.get("Authorization") or "").removeprefix("Bearer ").strip()
    key = headers.get("Idempotency-Key")
    if not key:
        raise Answer("invalid", reason="an Idempotency-Key header is required")
    tenant = introspect(token, scope)
    if not isinstance(args, dict) or not isinstance(args.get("invoice"), str):
        raise Answer("invalid", reason="the body must be a JSON object with an invoice")
    amount = args.get("amount_cents", 4999)
    # A request template may carry the amount as text.
    if isinstance(amount, str) and amount.isdigit():
        amount = int(amount)
    if not isinstance(amount, (int, float)) or amount != int(amount) or amount <= 0:
        raise Answer("invalid", reason="amount_cents must be a positive whole number")

    print_ = fingerprint(args)
    scoped = (tenant, key)
    with IN_FLIGHT_LOCK:
        if scoped in IN_FLIGHT:
            raise Answer("processing", reason="another attempt of this operation is in flight")
        IN_FLIGHT.add(scoped)
    try:
        with connect() as db:
            (stored, stripe_key, state, owner, payment_intent), fresh = claim(db, tenant, key, print_)
            if stored != print_:
                raise Answer("key_reused", reason="this Idempotency-Key was used with a different charge")
            if state == "succeeded":
                raise Answer("replayed", payment_intent)
            if state == "declined":
                raise Answer("declined", reason="the card was declined (answered before)")
            # Pending: new, or left by an attempt that could not learn the
            # outcome (here or in a process that died): send again.
            if not fresh:
                db.execute(
                    f"UPDATE {TABLE} SET owner = %s WHERE tenant = %s AND key = %s",
                    (BOOT, tenant, key),
                )
            if MODE == "fresh-key":
                stripe_key = f"stripe-charges-{uuid.uuid4().hex}"
            return dispatch(db, tenant, key, args, int(amount), stripe_key, fresh)
    finally:
        with IN_FLIGHT_LOCK:
            IN_FLIGHT.discard(scoped)


def stripe_client():
    """(client, its HTTP client): one per request, closed after it, since one
    trial's provider is gone by the next and a pooled connection to it would
    only cost a retry."""
    http = stripe.RequestsClient(timeout=UPSTREAM_TIMEOUT)
    return stripe.StripeClient(
        STRIPE_API_KEY,
        base_addresses={"api": STRIPE_API_BASE},
        http_client=http,
        # The SDK re-sends under the same idempotency key, as Stripe
        # recommends. One retry: its backoff is at least 0.5 s, and the
        # caller gives a request about 2.5 s; the default StripeClient makes
        # none, the module-level default (2) would outlast the caller.
        max_network_retries=1,
    ), http


def dispatch(db, tenant, key, args, amount, stripe_key, fresh):
    params = {
        "amount": amount,
        "currency": args.get("currency", "usd"),
        "confirm": True,
        "payment_method": "pm_card_visa",
        # The Stripe key in the metadata too: a search finds this very
        # charge when Stripe's answer does not tell (a saved 500).
        "metadata": {"invoice": args["invoice"], "charge_key": stripe_key},
    }
    if isinstance(args.get("recipient"), str):
        params["receipt_email"] = args["recipient"]
    if isinstance(args.get("message"), str):
        params["description"] = args["message"]
    client, http = stripe_client()
    try:
        intent = client.v1.payment_intents.create(params=params, options={"idempotency_key": stripe_key})
        replayed_by_stripe = (intent.last_response.headers.get("Idempotent-Replayed") or "") == "true"
    except stripe.CardError:
        db.execute(f"UPDATE {TABLE} SET state = 'declined' WHERE tenant = %s AND key = %s", (tenant, key))
        raise Answer("declined", reason="the card was declined")
    except stripe.IdempotencyError as error:
        raise Answer("unknown", reason=f"Stripe refused the idempotency key: {error.user_message}")
    except stripe.APIConnectionError as error:
        intent = find(client, stripe_key)
        if intent is None:
            raise Answer("unknown", reason=f"Stripe's answer was lost; the charge may have happened: {error.user_message}")
        replayed_by_stripe = True
    except stripe.APIError as error:
        if error.http_status == 409:
            raise Answer("processing", reason="Stripe is executing a request with this key")
        # Stripe saves a 500 under the key and replays it for 24 h: only
        # Stripe's record of the charge tells whether it happened.
        intent = find(client, stripe_key)
        if intent is None:
            raise Answer("unknown", reason=f"Stripe answered {error.http_status} and has no charge under the key yet; it may still appear")
        replayed_by_stripe = True
    except stripe.StripeError as error:
        raise Answer("unknown", reason=f"Stripe answered {error.http_status}: {error.user_message}")
    finally:
        http.close()
    db.execute(
        f"UPDATE {TABLE} SET state = 'succeeded', payment_intent = %s WHERE tenant = %s AND key = %s",
        (intent.id, tenant, key),
    )
    # Stripe replayed an answer to this very request (the SDK retried after
    # a lost answer), or the search found what this request charged: the
    # charge is still this request's own.
    raise Answer("replayed" if replayed_by_stripe and not fresh else "created", intent.id)


def find(client, stripe_key):
    """The payment intent charged under `stripe_key`, by Stripe's search, or None."""
    try:
        found = client.v1.payment_intents.search(params={"query": f"metadata['charge_key']:'{stripe_key}'"})
    except stripe.StripeError:
        return None
    return found.data[0] if found.data else None


# kind -> (status, chaos outcome)
ANSWERS = {
    "created": (201, "applied"),
    "replayed": (200, "replayed"),
    "processing": (409, "pending"),
    "key_reused": (422, "conflict"),
    "declined": (402, "rejected"),
    "forbidden": (403, "denied"),
    "invalid": (400, "rejected"),
    "failed": (503, "failed"),
    "unknown": (503, "unknown"),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, replayed=False):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/healthz":
            self.send(200, {"status": "ok", "mode": MODE})
        else:
            self.send(404, {"status": "not_found"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/api/charges":
            scope, protocol = REQUIRED_SCOPE, False
        elif self.path.startswith("/tools/"):
            scope, protocol = self.path[len("/tools/"):], True
        else:
            return self.send(404, {"status": "not_found"})
        try:
            args = json.loads(raw or b"null")
            charge(self.headers, args, scope)
            answer = Answer("unknown", reason="no answer was decided")
        except Answer as decided:
            answer = decided
        except ValueError:
            answer = Answer("invalid", reason="the body is not JSON")
        except psycopg.Error as error:
            # The claim could not be read or written; nothing was sent.
            answer = Answer("failed", reason=f"the idempotency table failed: {error}")
        status, outcome = ANSWERS[answer.kind]
        if protocol:
            body = {"outcome": outcome}
            if answer.payment_intent:
                body["receipt"] = answer.payment_intent
        else:
            body = {"status": answer.kind}
            if answer.payment_intent:
                body["payment_intent"] = answer.payment_intent
        if answer.reason:
            body["reason"] = answer.reason
        self.send(status, body, replayed=answer.kind == "replayed")


if __name__ == "__main__":
    create_table()
    server = ThreadingHTTPServer(LISTEN, Handler)
    server.daemon_threads = True
    server.serve_forever()
