"""A Celery worker on RabbitMQ whose task charges through the official
`stripe` SDK, configured as Celery's docs recommend for at-least-once
delivery: `acks_late = True` (the message is acknowledged after the task
ran, not before), one message at a time (`worker_prefetch_multiplier = 1`).

Celery's docs say what that buys and what it costs: "the task may be
executed twice if the worker crashes mid execution", so the task must be
idempotent. Two forms of the same task (WORKER_MODE):

- naive: charges for every execution, as most tasks are first written. A
  worker killed after Stripe charged and before its late ack gets the same
  message again from RabbitMQ and charges again; a producer that called
  `apply_async` again after a lost confirm makes a second task, charged too.
- inbox: an inbox table on PostgreSQL keyed on the task's `idempotency_key`
  argument (the producer's operation id): an execution whose operation is
  done returns the stored charge; one claimed and never finished (the worker
  died in between) charges again under the same Stripe idempotency key,
  which Stripe answers from its own store instead of charging twice.

The result goes back through Celery's `rpc://` result backend, to the
message's reply_to. The task tells the provider which delivery of the
message it runs (X-Chaos-Delivery: 2 once RabbitMQ flags it redelivered)
and which message (X-Chaos-Message: the task id), which chaos names in a
duplicate-effect finding.

chaos creates the queue (a classic queue, deleted after the run) and starts
the worker with CHAOS_BROKER_URL and CHAOS_BROKER_QUEUE; STRIPE_API_BASE
points the SDK at chaos's Stripe-shaped provider (docs/brokers.md).
"""

import os
import sys

import stripe
from celery import Celery
from kombu import Exchange, Queue

BROKER_URL = os.environ["CHAOS_BROKER_URL"]
QUEUE = os.environ["CHAOS_BROKER_QUEUE"]
STRIPE_API_BASE = os.environ["STRIPE_API_BASE"]
STRIPE_API_KEY = os.environ.get("STRIPE_API_KEY", "sk_test_celery_worker")
MODE = os.environ.get("WORKER_MODE", "naive")
DATABASE_URL = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
TIMEOUT = int(os.environ.get("PROVIDER_TIMEOUT_MS", "5000")) / 1000

if MODE not in ("naive", "inbox"):
    sys.exit(f"WORKER_MODE={MODE!r}: choose naive or inbox")

app = Celery("tasks", broker=BROKER_URL, backend="rpc://")
app.conf.update(
    # At-least-once, as Celery's docs recommend for tasks that must not be
    # lost: ack after the task ran; take one message at a time.
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    # The queue chaos made for the run (a classic queue, as Celery's own
    # default is, with x-expires): consumed as it is, never declared again
    # with other arguments, and reached through the default exchange (a
    # retry is published there too).
    task_queues=[Queue(QUEUE, Exchange(""), routing_key=QUEUE, no_declare=True)],
    task_default_queue=QUEUE,
    task_default_exchange="",
    task_default_routing_key=QUEUE,
    # Nothing of the worker's own left on the broker: no remote-control
    # queue, no events.
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    broker_connection_retry_on_startup=True,
    accept_content=["json"],
    task_serializer="json",
    result_serializer="json",
)

_db = None


def db():
    """The inbox's connection, opened once per worker."""
    global _db
    if _db is None:
        import psycopg

        _db = psycopg.connect(DATABASE_URL, autocommit=True)
        _db.execute(
            """CREATE TABLE IF NOT EXISTS celery_worker_inbox (
                   operation_id text PRIMARY KEY,
                   receipt text,
                   done boolean NOT NULL DEFAULT false)"""
        )
    return _db


def stripe_client():
    """(client, its HTTP client): one per execution, closed after it."""
    http = stripe.RequestsClient(timeout=TIMEOUT)
    return stripe.StripeClient(
        STRIPE_API_KEY,
        base_addresses={"api": STRIPE_API_BASE},
        http_client=http,
        max_network_retries=0,
    ), http


def find(client, stripe_key):
    """The payment intent charged under `stripe_key`, by Stripe's search, or None."""
    try:
        found = client.v1.payment_intents.search(
            params={"query": f"metadata['charge_key']:'{stripe_key}'"}
        )
    except stripe.StripeError:
        return None
    return found.data[0] if found.data else None


class StripeUnavailable(Exception):
    """Stripe answered 5xx: a transient error, which the task retries."""


def create_intent(invoice, amount_cents, recipient, message, stripe_key, headers):
    """One charge at Stripe: (outcome, payment intent id)."""
    params = {
        "amount": int(amount_cents),
        "currency": "usd",
        "confirm": True,
        "payment_method": "pm_card_visa",
        "metadata": {"invoice": invoice},
    }
    if stripe_key is not None:
        # The key in the metadata too: a search finds this very charge when
        # Stripe's answer does not tell (a 500, which Stripe saves under the
        # key and answers every retry with).
        params["metadata"]["charge_key"] = stripe_key
    if isinstance(recipient, str):
        params["receipt_email"] = recipient
    if isinstance(message, str):
        params["description"] = message
    options = {"headers": headers}
    if stripe_key is not None:
        options["idempotency_key"] = stripe_key
    client, http = stripe_client()
    try:
        intent = client.v1.payment_intents.create(params=params, options=options)
    except stripe.CardError:
        return "rejected", None
    except stripe.APIError as error:
        if error.http_status == 409:
            # Stripe is executing a request with this key: another delivery
            # of the same operation is at it now.
            return "pending", None
        if (error.http_status or 0) >= 500:
            # Stripe failed, maybe after it charged: under a key, Stripe's
            # record says; else Celery retries the task.
            found = find(client, stripe_key) if stripe_key is not None else None
            if found is not None:
                return "replayed", found.id
            raise StripeUnavailable(f"Stripe answered {error.http_status}") from error
        return "unknown", None
    except stripe.StripeError:
        # No answer, or an error after it may have charged.
        return "unknown", None
    finally:
        http.close()
    replayed = (intent.last_response.headers.get("Idempotent-Replayed") or "") == "true"
    return ("replayed" if replayed else "applied"), intent.id


# A transient error is retried, as Celery's docs show (autoretry_for): the
# task is published again under its own id, at once.
@app.task(
    bind=True,
    acks_late=True,
    name="tasks.charge",
    autoretry_for=(StripeUnavailable,),
    max_retries=3,
    default_retry_delay=0,
)
def charge(self, invoice, amount_cents, recipient=None, message=None, idempotency_key=None):
    # The broker's view: RabbitMQ flags a message it delivers again, and a
    # retry is the same task (its id) once more; the task id names the
    # message (a second apply_async is a second task).
    redelivered = (self.request.delivery_info or {}).get("redelivered")
    delivery = 1 + (self.request.retries or 0) + (1 if redelivered else 0)
    headers = {"X-Chaos-Delivery": str(delivery), "X-Chaos-Message": self.request.id}
    if MODE == "naive":
        outcome, receipt = create_intent(invoice, amount_cents, recipient, message, None, headers)
        return {"outcome": outcome, "receipt": receipt}
    if not idempotency_key:
        return {"outcome": "rejected", "receipt": None}
    row = db().execute(
        "INSERT INTO celery_worker_inbox (operation_id) VALUES (%s) "
        "ON CONFLICT (operation_id) DO UPDATE SET operation_id = EXCLUDED.operation_id "
        "RETURNING done, receipt",
        (idempotency_key,),
    ).fetchone()
    if row[0]:
        return {"outcome": "replayed", "receipt": row[1]}
    outcome, receipt = create_intent(
        invoice, amount_cents, recipient, message, f"celery-{idempotency_key}", headers
    )
    if outcome in ("applied", "replayed"):
        db().execute(
            "UPDATE celery_worker_inbox SET done = true, receipt = %s WHERE operation_id = %s",
            (receipt, idempotency_key),
        )
    return {"outcome": outcome, "receipt": receipt}
