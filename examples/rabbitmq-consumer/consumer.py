"""A task worker on RabbitMQ that charges through an HTTP provider, then acks.

The shape of most real workers: take a message, do the effect downstream,
acknowledge. It runs in one of two modes (CONSUMER_MODE):

- naive: does the effect for every delivery it gets. When the broker hands
  the same message out again (the worker died after the provider committed
  and before its ack reached the broker; the ack deadline passed while it
  still worked), the effect happens twice.
- inbox: an inbox table on PostgreSQL keyed on the message's operation id
  (the Idempotency-Key header): a delivery whose operation is done is
  answered from the table and acked without a second effect; one that was
  claimed and never finished (the worker died in between) is done again
  with the same Idempotency-Key at the provider, which answers it from its
  own store instead of charging twice.

A provider error (a 5xx, which may come after the charge) gives the message
back to the broker (nack with requeue) to be tried again: the naive worker
then charges again, the inbox worker sends the same key.

Either way it answers on the message's reply_to with chaos's answer body
({"outcome": ..., "receipt": ...}), correlated by correlation_id, and tells
the provider which delivery of the message it acts on (X-Chaos-Delivery: 1
for the first; a quorum queue counts the others in x-delivery-count) and
which message it is (X-Chaos-Message: the message's x-attempt-id header),
which chaos shows in a duplicate-effect finding.

CONSUMER_ACKS=never makes it a worker that acts and then never settles the
message (no answer, no ack: a worker stuck after its effect), to show what
chaos reads of such a message on the broker (docs/brokers.md).

chaos starts it with CHAOS_BROKER_URL, CHAOS_BROKER_QUEUE and
CHAOS_PROVIDER_URL (docs/brokers.md).
"""

import json
import os
import sys
import urllib.error
import urllib.request

import pika

BROKER_URL = os.environ["CHAOS_BROKER_URL"]
QUEUE = os.environ["CHAOS_BROKER_QUEUE"]
PROVIDER_URL = os.environ["CHAOS_PROVIDER_URL"].rstrip("/")
MODE = os.environ.get("CONSUMER_MODE", "naive")
DATABASE_URL = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
TIMEOUT = int(os.environ.get("PROVIDER_TIMEOUT_MS", "5000")) / 1000
ACKS = os.environ.get("CONSUMER_ACKS", "always")

if MODE not in ("naive", "inbox"):
    sys.exit(f"CONSUMER_MODE={MODE!r}: choose naive or inbox")
if ACKS not in ("always", "never"):
    sys.exit(f"CONSUMER_ACKS={ACKS!r}: choose always or never")

db = None
if MODE == "inbox":
    import psycopg

    db = psycopg.connect(DATABASE_URL, autocommit=True)
    db.execute(
        """CREATE TABLE IF NOT EXISTS rabbitmq_consumer_inbox (
               operation_id text PRIMARY KEY,
               receipt text,
               done boolean NOT NULL DEFAULT false)"""
    )


def charge(tool, body, key, delivery, message):
    """One effect at the provider: (outcome, receipt)."""
    headers = {"Content-Type": "application/json", "X-Chaos-Delivery": str(delivery)}
    if message:
        headers["X-Chaos-Message"] = message
    if key is not None:
        headers["Idempotency-Key"] = key
    request = urllib.request.Request(
        f"{PROVIDER_URL}/effects/{tool}", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            receipt = json.loads(response.read()).get("receipt")
            replayed = response.headers.get("Idempotent-Replayed") == "true"
            return ("replayed" if replayed else "applied"), receipt
    except urllib.error.HTTPError as error:
        if error.code == 402:
            return "rejected", None
        if error.code >= 500:
            # The provider failed, maybe after it charged: give the message
            # back to try again (nack, requeue), as at-least-once workers do.
            return "requeue", None
        return "failed", None
    except OSError:
        # No answer: the provider may have charged.
        return "unknown", None


def handle(properties, body, redelivered):
    headers = properties.headers or {}
    tool = headers.get("X-Tool", "send_reminder")
    key = headers.get("Idempotency-Key")
    # A quorum queue counts the earlier deliveries; a classic queue only
    # says whether there was one.
    if "x-delivery-count" in headers:
        delivery = int(headers["x-delivery-count"]) + 1
    else:
        delivery = 2 if redelivered else 1
    # Which published message this is: two effects from two messages are the
    # producer's second publish, not the broker's redelivery.
    message = headers.get("x-attempt-id")
    if MODE == "naive":
        return charge(tool, body, key=None, delivery=delivery, message=message)
    if key is None:
        return "rejected", None
    row = db.execute(
        "INSERT INTO rabbitmq_consumer_inbox (operation_id) VALUES (%s) "
        "ON CONFLICT (operation_id) DO UPDATE SET operation_id = EXCLUDED.operation_id "
        "RETURNING done, receipt",
        (key,),
    ).fetchone()
    if row[0]:
        return "replayed", row[1]
    outcome, receipt = charge(tool, body, key=key, delivery=delivery, message=message)
    if outcome in ("applied", "replayed"):
        db.execute(
            "UPDATE rabbitmq_consumer_inbox SET done = true, receipt = %s WHERE operation_id = %s",
            (receipt, key),
        )
    return outcome, receipt


def malformed(body):
    """Why the message cannot be a charge, or None: it is validated before
    anything is done, as a worker fed by other services' messages must."""
    try:
        fields = json.loads(body)
    except ValueError:
        return "not JSON"
    if not isinstance(fields, dict):
        return "not a JSON object"
    amount = fields.get("amount_cents")
    if amount is not None and (isinstance(amount, bool) or not isinstance(amount, int)):
        return f"amount_cents is {amount!r}, not a whole number of cents"
    return None


def on_message(channel, method, properties, body):
    why = malformed(body)
    if why is not None:
        # Malformed: rejected without requeue (a dead-letter queue takes it,
        # if the queue has one), never retried, never answered as done;
        # requeued, it would come straight back and loop.
        print(f"rejected a malformed message: {why}", file=sys.stderr)
        channel.basic_reject(method.delivery_tag, requeue=False)
        return
    outcome, receipt = handle(properties, body, method.redelivered)
    if ACKS == "never":
        # Stuck after the effect: the message stays with this worker, unacked.
        return
    if outcome == "requeue":
        # Delivered again by the broker, to this worker or another.
        channel.basic_nack(method.delivery_tag, requeue=True)
        return
    if properties.reply_to:
        channel.basic_publish(
            exchange="",
            routing_key=properties.reply_to,
            properties=pika.BasicProperties(correlation_id=properties.correlation_id),
            body=json.dumps({"outcome": outcome, "receipt": receipt}),
        )
    channel.basic_ack(method.delivery_tag)


connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
channel = connection.channel()
channel.basic_qos(prefetch_count=1)
channel.basic_consume(QUEUE, on_message, auto_ack=False)
channel.start_consuming()
