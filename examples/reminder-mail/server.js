// reminder-mail: a small service that sends invoice reminders by mail with
// nodemailer over SMTP, behind an idempotency layer of its own. See README.md.
//
// Two APIs, one core:
//   POST /reminders            its own API: {invoice, recipient, message} and
//                              Idempotency-Key; answers {status, id}
//   POST /tools/send_reminder  chaos's target protocol: answers {outcome, receipt}
//
// Two modes (REMINDER_MODE):
//   correct  records the send before it starts; a send whose answer never came
//            (the connection dropped after DATA) stays "sending" for good, and
//            every retry is answered `unknown`: SMTP cannot be asked, and a
//            second send may be a second mail. A 4xx is a definite "not
//            accepted": the next retry sends again.
//   naive    the same, except that a send whose connection dropped is retried
//            at once, twice at most: the documented weakness. Under a lost 250
//            the mail goes out twice.

"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");
const nodemailer = require("nodemailer");

function env(name) {
  const value = process.env[name];
  if (value === undefined || value === "") {
    console.error(`failed to read ${name}: it is not set (the target file sets it)`);
    process.exit(2);
  }
  return value;
}

const MODE = env("REMINDER_MODE");
if (MODE !== "correct" && MODE !== "naive") {
  console.error(`unknown REMINDER_MODE '${MODE}'. Choose from: correct, naive`);
  process.exit(2);
}
const LISTEN_HOST = env("LISTEN_HOST");
const LISTEN_PORT = Number(env("LISTEN_PORT"));
const SMTP_HOST = env("SMTP_HOST");
const SMTP_PORT = Number(env("SMTP_PORT"));
const INTROSPECTION_URL = env("INTROSPECTION_URL");
const UPSTREAM_TIMEOUT_MS = Number(env("UPSTREAM_TIMEOUT_MS"));
const OUTBOX = path.join(env("STATE_DIR"), "outbox");
const TOOL = "send_reminder";
const SENDER = "billing@reminder-mail.example";
// How many extra sends the naive mode makes after a dropped connection.
const NAIVE_RESENDS = 2;

fs.mkdirSync(OUTBOX, { recursive: true });

// ---- the outbox: one durable JSON file per (tenant, Idempotency-Key) -------

function recordPath(tenant, key) {
  const id = crypto.createHash("sha256").update(`${tenant}\0${key}`).digest("hex");
  return path.join(OUTBOX, `${id}.json`);
}

function readRecord(file) {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (error) {
    if (error.code === "ENOENT") return null;
    throw error;
  }
}

// Written to a temporary file, fsynced, then renamed: a SIGKILL leaves the
// old record or the new one, never half of one.
function writeRecord(file, record) {
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(temporary, "w");
  try {
    fs.writeSync(fd, JSON.stringify(record));
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(temporary, file);
}

// Sends in flight in this process. A "sending" record that is not here was
// left by a send whose answer never came, or by a process that died.
const inFlight = new Set();

// Keys sorted, numbers by value: a retry with its keys reordered is the same
// operation, a changed recipient is not.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

// ---- upstream: the authority and the mail server ---------------------------

// RFC 7662 introspection, on every request: the caller comes from the
// authority, never from the arguments.
async function introspect(authorization) {
  if (!authorization || !authorization.startsWith("Bearer ")) return { active: false };
  const token = authorization.slice("Bearer ".length);
  let answer;
  try {
    answer = await fetch(INTROSPECTION_URL, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token }).toString(),
      signal: AbortSignal.timeout(UPSTREAM_TIMEOUT_MS),
    });
  } catch {
    return null;
  }
  if (answer.status !== 200) return null;
  try {
    return await answer.json();
  } catch {
    return null;
  }
}

// One SMTP transaction on a connection of its own. Resolves to
// {accepted, receipt}, {temporary, reply}, {permanent, reply}, or
// {dropped, why}: no reply to the message came, so it may have been accepted.
async function sendMail(args, messageId) {
  const transport = nodemailer.createTransport({
    host: SMTP_HOST,
    port: SMTP_PORT,
    secure: false,
    ignoreTLS: true,
    connectionTimeout: UPSTREAM_TIMEOUT_MS,
    greetingTimeout: UPSTREAM_TIMEOUT_MS,
    socketTimeout: UPSTREAM_TIMEOUT_MS,
  });
  try {
    const info = await transport.sendMail({
      from: SENDER,
      to: args.recipient,
      subject: `Reminder: invoice ${args.invoice} is overdue`,
      text: String(args.message ?? ""),
      messageId,
      headers: { "X-Invoice": String(args.invoice) },
    });
    // "250 2.0.0 Ok: queued as rcpt-3": the server's reference for the message.
    const queued = /queued as (\S+)/.exec(info.response || "");
    return { accepted: true, receipt: queued ? queued[1] : info.messageId };
  } catch (error) {
    const code = Number(error.responseCode);
    if (code >= 400 && code < 500) return { temporary: true, reply: error.response };
    if (code >= 500 && code < 600) return { permanent: true, reply: error.response };
    return { dropped: true, why: error.message };
  } finally {
    transport.close();
  }
}

// ---- the idempotency layer --------------------------------------------------

function answer(outcome, fields = {}) {
  return { outcome, ...fields };
}

async function remind(headers, args) {
  const key = headers["idempotency-key"];
  if (!key) return answer("rejected", { reason: "an Idempotency-Key header is required" });
  if (!args || typeof args !== "object" || typeof args.invoice !== "string" || typeof args.recipient !== "string") {
    return answer("rejected", { reason: "invoice and recipient are required strings" });
  }
  const grant = await introspect(headers.authorization);
  if (grant === null) {
    return answer("failed", { reason: "the authority did not answer; nothing was done" });
  }
  if (!grant.active || !String(grant.scope || "").split(" ").includes(TOOL)) {
    return answer("denied", { reason: `the token is not active for ${TOOL}` });
  }
  const tenant = String(grant.tenant ?? "");
  const file = recordPath(tenant, key);
  const fingerprint = canonical(args);

  // Read and claim with no await between them: one process, one event loop,
  // so two concurrent attempts cannot both claim.
  let record = readRecord(file);
  if (record && record.fingerprint !== fingerprint) {
    return answer("conflict", { reason: "this Idempotency-Key was used with a different payload" });
  }
  if (record) {
    switch (record.state) {
      case "sent":
        return answer("replayed", { receipt: record.receipt });
      case "rejected":
        return answer("rejected", { reason: record.reason });
      case "sending":
        if (inFlight.has(file)) {
          return answer("pending", { reason: "another attempt of this operation is sending it" });
        }
        return answer("unknown", {
          reason: "the mail server's answer to this message never came; it may have been accepted, and SMTP cannot be asked, so it is not sent again",
        });
      case "retryable":
        break; // a 4xx: not accepted, send again below
      default:
        return answer("unknown", { reason: `unreadable outbox state '${record.state}'` });
    }
  }
  // A stable Message-ID per operation: mail servers do not deduplicate on
  // it, but a reader's client may thread or hide a duplicate.
  const messageId = `<${path.basename(file, ".json").slice(0, 32)}@reminder-mail.example>`;
  record = { fingerprint, state: "sending", messageId };
  writeRecord(file, record);
  inFlight.add(file);
  try {
    let sent = await sendMail(args, messageId);
    for (let resend = 0; MODE === "naive" && sent.dropped && resend < NAIVE_RESENDS; resend++) {
      sent = await sendMail(args, messageId);
    }
    if (sent.accepted) {
      writeRecord(file, { ...record, state: "sent", receipt: sent.receipt });
      return answer("applied", { receipt: sent.receipt });
    }
    if (sent.temporary) {
      writeRecord(file, { ...record, state: "retryable", reason: sent.reply });
      return answer("failed", { reason: `the mail server answered a temporary failure (${sent.reply}); nothing was accepted, safe to retry` });
    }
    if (sent.permanent) {
      writeRecord(file, { ...record, state: "rejected", reason: sent.reply });
      return answer("rejected", { reason: `the mail server refused the message (${sent.reply})` });
    }
    // Dropped: the record stays "sending", and so the outcome stays unknown.
    return answer("unknown", { reason: `no answer from the mail server (${sent.why}); the message may have been accepted` });
  } finally {
    inFlight.delete(file);
  }
}

// ---- HTTP ---------------------------------------------------------------------

// Chaos's protocol: the outcome in the body, with the statuses the protocol names.
const PROTOCOL_STATUS = {
  applied: 201, replayed: 200, pending: 409, unknown: 503, failed: 503,
  rejected: 400, conflict: 422, denied: 403,
};

// The service's own API, as a client of it would read it.
const API_STATUS = {
  applied: ["sent", 201], replayed: ["duplicate", 200], pending: ["in_flight", 409],
  unknown: ["unknown", 503], failed: ["retry", 503], rejected: ["rejected", 400],
  conflict: ["conflict", 422], denied: ["denied", 403],
};

function reply(response, status, body, replayed) {
  const headers = { "content-type": "application/json" };
  if (replayed) headers["idempotent-replayed"] = "true";
  response.writeHead(status, headers);
  response.end(JSON.stringify(body));
}

function readBody(request) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    request.on("data", (chunk) => {
      size += chunk.length;
      if (size > 1 << 20) {
        reject(new Error("body too large"));
        request.destroy();
      } else {
        chunks.push(chunk);
      }
    });
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

const server = http.createServer(async (request, response) => {
  try {
    if (request.method === "GET" && request.url === "/healthz") {
      return reply(response, 200, { ok: true });
    }
    const own = request.method === "POST" && request.url === "/reminders";
    const protocol = request.method === "POST" && request.url === `/tools/${TOOL}`;
    if (!own && !protocol) return reply(response, 404, { reason: "no such route" });
    let args;
    try {
      args = JSON.parse(await readBody(request));
    } catch {
      args = null;
    }
    const result = await remind(request.headers, args);
    const replayed = result.outcome === "replayed";
    if (protocol) {
      const body = { ...result };
      if (result.receipt) body.result = { tool: TOOL, status: "done", receipt: result.receipt };
      return reply(response, PROTOCOL_STATUS[result.outcome], body, replayed);
    }
    const [status, code] = API_STATUS[result.outcome];
    const body = { status };
    if (result.receipt) body.id = result.receipt;
    if (result.reason) body.message = result.reason;
    return reply(response, code, body, replayed);
  } catch (error) {
    console.error(error);
    if (!response.headersSent) reply(response, 500, { outcome: "unknown", reason: String(error) });
  }
});

server.listen(LISTEN_PORT, LISTEN_HOST, () => {
  console.error(`reminder-mail (${MODE}) on ${LISTEN_HOST}:${LISTEN_PORT}, mail via ${SMTP_HOST}:${SMTP_PORT}`);
});
