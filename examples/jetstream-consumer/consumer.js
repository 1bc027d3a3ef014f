// A task worker on a NATS JetStream pull consumer that charges at its
// provider over HTTP and then acks: the shape of most real workers, written
// for JetStream and never for chaos. It takes several messages at once (a
// pull of up to 8), each handled on its own, as a Node worker does.
//
// Two modes (CONSUMER_MODE):
// - naive: does the effect for every delivery. JetStream delivers a message
//   again when its AckWait passes without an ack (the worker died after the
//   provider committed; the provider answered slower than AckWait while the
//   worker still waited), and the effect happens twice.
// - inbox: an inbox table on PostgreSQL keyed on the message's operation id
//   (the Idempotency-Key header): a delivery whose operation is done is
//   answered from the table; one claimed and never finished is done again
//   with the same Idempotency-Key at the provider, which answers it from its
//   own store.
//
// A provider error (a 5xx, which may come after the charge) gives the
// message back (nak) to be delivered again: the naive worker then charges
// again, the inbox worker sends the same key.
//
// Either way it answers on the inbox its message names in the Reply-To
// header, with chaos's answer body, and tells the provider which delivery of
// the message it acts on (X-Chaos-Delivery: JetStream's delivery count) and
// which message it is (X-Chaos-Message: the message's x-attempt-id header).
//
// CONSUMER_ACKS=never makes it a worker that acts and then never settles the
// message (no answer, no ack: a worker stuck after its effect), to show what
// chaos reads of such a message on the broker (docs/brokers.md).
//
// chaos starts it with CHAOS_BROKER_URL, CHAOS_BROKER_QUEUE (the stream),
// CHAOS_BROKER_CONSUMER and CHAOS_PROVIDER_URL (docs/brokers.md).
"use strict";

const { connect, headers: natsHeaders, StringCodec } = require("nats");

const BROKER_URL = process.env.CHAOS_BROKER_URL;
const STREAM = process.env.CHAOS_BROKER_QUEUE;
const CONSUMER = process.env.CHAOS_BROKER_CONSUMER;
const PROVIDER_URL = process.env.CHAOS_PROVIDER_URL.replace(/\/$/, "");
const MODE = process.env.CONSUMER_MODE || "naive";
const DATABASE_URL = process.env.DATABASE_URL || "postgresql://postgres@127.0.0.1:5432/test";
const TIMEOUT_MS = Number(process.env.PROVIDER_TIMEOUT_MS || "5000");
const ACKS = process.env.CONSUMER_ACKS || "always";
const codec = StringCodec();

if (MODE !== "naive" && MODE !== "inbox") {
  console.error(`CONSUMER_MODE=${MODE}: choose naive or inbox`);
  process.exit(2);
}
if (ACKS !== "always" && ACKS !== "never") {
  console.error(`CONSUMER_ACKS=${ACKS}: choose always or never`);
  process.exit(2);
}

async function charge(tool, body, key, delivery, message) {
  const headers = { "Content-Type": "application/json", "X-Chaos-Delivery": String(delivery) };
  if (message) headers["X-Chaos-Message"] = message;
  if (key) headers["Idempotency-Key"] = key;
  try {
    const response = await fetch(`${PROVIDER_URL}/effects/${tool}`, {
      method: "POST",
      headers,
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    if (response.status === 402) return ["rejected", null];
    // The provider failed, maybe after it charged: give the message back to
    // try again (nak), as at-least-once workers do.
    if (response.status >= 500) return ["requeue", null];
    if (!response.ok) return ["failed", null];
    const receipt = (await response.json()).receipt;
    const replayed = response.headers.get("Idempotent-Replayed") === "true";
    return [replayed ? "replayed" : "applied", receipt];
  } catch {
    // No answer: the provider may have charged.
    return ["unknown", null];
  }
}

async function handle(db, m) {
  const tool = m.headers?.get("X-Tool") || "send_reminder";
  const key = m.headers?.get("Idempotency-Key") || null;
  const body = codec.decode(m.data);
  const delivery = m.info.deliveryCount;
  // Which published message this is: two effects from two messages are the
  // producer's second publish (past the stream's duplicate window), not
  // JetStream's redelivery.
  const message = m.headers?.get("x-attempt-id") || null;
  if (MODE === "naive") return charge(tool, body, null, delivery, message);
  if (!key) return ["rejected", null];
  const { rows } = await db.query(
    `INSERT INTO jetstream_consumer_inbox (operation_id) VALUES ($1)
     ON CONFLICT (operation_id) DO UPDATE SET operation_id = EXCLUDED.operation_id
     RETURNING done, receipt`,
    [key],
  );
  if (rows[0].done) return ["replayed", rows[0].receipt];
  const [outcome, receipt] = await charge(tool, body, key, delivery, message);
  if (outcome === "applied" || outcome === "replayed") {
    await db.query(
      "UPDATE jetstream_consumer_inbox SET done = true, receipt = $1 WHERE operation_id = $2",
      [receipt, key],
    );
  }
  return [outcome, receipt];
}

// Why the message cannot be a charge, or null: it is validated before
// anything is done, as a worker fed by other services' messages must.
function malformed(text) {
  let fields;
  try {
    fields = JSON.parse(text);
  } catch {
    return "not JSON";
  }
  if (fields === null || typeof fields !== "object" || Array.isArray(fields)) {
    return "not a JSON object";
  }
  // JSON.parse reads 4999.0 as 4999: the text itself must be a whole number.
  const amount = /"amount_cents"\s*:\s*([^,}\s]+)/.exec(text);
  if (amount && !/^-?[0-9]+$/.test(amount[1])) {
    return `amount_cents is ${amount[1]}, not a whole number of cents`;
  }
  return null;
}

async function main() {
  let db = null;
  if (MODE === "inbox") {
    const { Pool } = require("pg");
    db = new Pool({ connectionString: DATABASE_URL, max: 4 });
    await db.query(
      `CREATE TABLE IF NOT EXISTS jetstream_consumer_inbox (
         operation_id text PRIMARY KEY, receipt text, done boolean NOT NULL DEFAULT false)`,
    );
  }
  const nc = await connect({ servers: BROKER_URL });
  const consumer = await nc.jetstream().consumers.get(STREAM, CONSUMER);
  const messages = await consumer.consume({ max_messages: 8 });
  for await (const m of messages) {
    // Not awaited: the next message is taken while this one is worked on.
    (async () => {
      const why = malformed(codec.decode(m.data));
      if (why) {
        // Malformed: terminated (JetStream never delivers it again), never
        // answered as done; a nak would bring it straight back in a loop.
        console.error(`rejected a malformed message: ${why}`);
        m.term();
        return;
      }
      const [outcome, receipt] = await handle(db, m);
      // Stuck after the effect: the message stays unacked, and JetStream
      // delivers it again each AckWait.
      if (ACKS === "never") return;
      if (outcome === "requeue") {
        // JetStream delivers it again at once.
        m.nak();
        return;
      }
      const replyTo = m.headers?.get("Reply-To");
      if (replyTo) {
        const answer = natsHeaders();
        answer.set("Correlation-Id", m.headers.get("Correlation-Id") || "");
        nc.publish(replyTo, codec.encode(JSON.stringify({ outcome, receipt })), { headers: answer });
      }
      m.ack();
    })().catch((error) => console.error(error));
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
