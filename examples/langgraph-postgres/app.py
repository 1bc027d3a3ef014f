"""langgraph-postgres: a LangGraph agent (a StateGraph of a ChatAnthropic
model node and a prebuilt ToolNode) checkpointed in PostgreSQL by
`langgraph-checkpoint-postgres`, with three tools, charge_card,
send_reminder and send_notification_to_self, whose effect is a request to the provider (chaos's provider
protocol: POST {PROVIDER_URL}/effects/{tool}).

Its API:

    GET  /healthz                         200 once it listens (the model is not asked)
    POST /runs {"run_id": "r-1", "prompt": "..."}
         200 {"final": "<the agent's final text>"} | 500 {"error": "..."}

One request is one run on the thread `thread_id = run_id`. The same run_id
again is the user retrying: as LangGraph's persistence docs tell, a thread
with a pending checkpoint (`graph.get_state(config).next` non-empty: the
process died mid-run) is resumed with `graph.invoke(None, config)`, which
re-runs the interrupted node from its last checkpoint; otherwise the prompt
starts (or continues) the thread.

Forms (`AGENT_MODE`):

- `naive`: the tool as LangGraph's docs show one: it posts the effect every
  time it runs, with no key. A resumed thread re-runs the whole `tools` node
  (its result was never checkpointed), and a re-plan (the model calls the
  tool again, a new tool_use id) runs it again: each is a new effect;
- `keyed`: the effect keyed by the run's structure, sha256(thread, tool,
  invoice), claimed in PostgreSQL before the call (langgraph_agent_effects):
  a completed claim answers its stored result as `replayed`; a claim left by
  a killed process is re-sent with the same `Idempotency-Key` and its first
  arguments, so the provider replays. Free text (memo, message) is not in
  the key: a re-plan rewords it. A note to oneself is its own action each
  time the model decides it: it is keyed by the tool call's id
  (InjectedToolCallId) instead.

Environment (the target files fill it in): LISTEN_HOST, LISTEN_PORT,
ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, ANTHROPIC_MODEL, PROVIDER_URL,
DATABASE_URL, AGENT_MODE, UPSTREAM_TIMEOUT_SECONDS.
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
from typing import Annotated, TypedDict

import psycopg
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"langgraph-postgres: {name} is not set; the target file sets it (see README.md)")
    return value


MODES = ("naive", "keyed")
MODE = env("AGENT_MODE", "naive")
if MODE not in MODES:
    sys.exit(f"langgraph-postgres: unknown AGENT_MODE '{MODE}'. Choose from: {', '.join(MODES)}")
LISTEN = (env("LISTEN_HOST", "127.0.0.1"), int(env("LISTEN_PORT")))
ANTHROPIC_BASE_URL = env("ANTHROPIC_BASE_URL")
ANTHROPIC_API_KEY = env("ANTHROPIC_API_KEY", "chaos")
ANTHROPIC_MODEL = env("ANTHROPIC_MODEL", "claude-sonnet-4-5")
PROVIDER_URL = env("PROVIDER_URL").rstrip("/")
DATABASE_URL = env("DATABASE_URL")
UPSTREAM_TIMEOUT = float(env("UPSTREAM_TIMEOUT_SECONDS", "10"))
TABLE = "langgraph_agent_effects"
# Tells this process's claims from a dead one's (a restart after a crash).
BOOT = uuid.uuid4().hex


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
    # ToolNode runs one turn's tool calls in threads at once: the second
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
        result = send(args, f"langgraph-{key}")
        # An outcome not learned (unknown) leaves the claim pending: the
        # next call re-sends under the same key and learns it.
        if result["status"] not in ("unknown", "pending"):
            db.execute(
                f"UPDATE {TABLE} SET state = 'done', result = %s WHERE key = %s",
                (json.dumps(result), key),
            )
        return result


def perform(config, args, tool_call_id=None):
    run_id = config["configurable"]["thread_id"]
    if MODE == "keyed":
        result = keyed(run_id, args, provider_send, decision=tool_call_id)
    else:
        result = provider_send(args)
    print(f"langgraph-postgres: {run_id} {args['tool']} {args['invoice']}: {result['status']}", flush=True)
    return json.dumps(result)


# ---- the tools, as LangChain's docs show them --------------------------------


@tool
def charge_card(
    invoice: str,
    amount_cents: int,
    recipient: str,
    message: str,
    config: RunnableConfig,
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
    return perform(config, args)


@tool
def send_reminder(invoice: str, amount_cents: int, recipient: str, message: str, config: RunnableConfig) -> str:
    """Send the customer a payment reminder for an invoice.

    Args:
        invoice: The invoice to remind about.
        amount_cents: The amount due, in cents.
        recipient: The customer's billing email.
        message: The reminder's text.
    """
    args = {"tool": "send_reminder", "invoice": invoice, "amount_cents": amount_cents,
            "recipient": recipient, "message": message}
    return perform(config, args)


@tool
def send_notification_to_self(
    invoice: str,
    amount_cents: int,
    recipient: str,
    message: str,
    note: str,
    config: RunnableConfig,
    tool_call_id: Annotated[str, InjectedToolCallId],
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
    return perform(config, args, tool_call_id)


TOOLS = [charge_card, send_reminder, send_notification_to_self]


class State(TypedDict):
    messages: Annotated[list, add_messages]


def build_graph():
    model = ChatAnthropic(
        model=ANTHROPIC_MODEL,
        base_url=ANTHROPIC_BASE_URL,
        api_key=ANTHROPIC_API_KEY,
        max_tokens=1024,
    ).bind_tools(TOOLS)

    def agent(state: State):
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(TOOLS))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    # The checkpointer's own set-up, per its README: a pool of autocommit
    # connections with dict rows, and .setup() to create its tables.
    pool = ConnectionPool(
        DATABASE_URL,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=True,
    )
    checkpointer = PostgresSaver(pool)
    with connect() as db:
        # Parallel trials start several processes at once; the migrations
        # are not safe to run concurrently.
        db.execute("SELECT pg_advisory_lock(hashtext('langgraph-checkpoint-setup'))")
        try:
            checkpointer.setup()
        finally:
            db.execute("SELECT pg_advisory_unlock(hashtext('langgraph-checkpoint-setup'))")
    return builder.compile(checkpointer=checkpointer)


GRAPH = None


def final_text(message):
    if isinstance(message.content, str):
        return message.content
    return "".join(block.get("text", "") for block in message.content if isinstance(block, dict))


def run(run_id, prompt):
    config = {"configurable": {"thread_id": run_id}}
    if GRAPH.get_state(config).next:
        # A pending checkpoint: the process died mid-run. Resume it.
        print(f"langgraph-postgres: {run_id} resumes at {GRAPH.get_state(config).next}", flush=True)
        state = GRAPH.invoke(None, config)
    else:
        state = GRAPH.invoke({"messages": [HumanMessage(prompt)]}, config)
    last = state["messages"][-1]
    if not isinstance(last, AIMessage):
        raise RuntimeError(f"the run ended on a {type(last).__name__}, not the model's answer")
    return final_text(last)


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
        except Exception as error:  # the agent's failure is the run's answer
            print(f"langgraph-postgres: run {run_id} failed: {error!r}", flush=True)
            return self.send(500, {"error": f"{type(error).__name__}: {error}"})
        self.send(200, {"final": final})


if __name__ == "__main__":
    if MODE == "keyed":
        create_table()
    GRAPH = build_graph()
    server = ThreadingHTTPServer(LISTEN, Handler)
    server.daemon_threads = True
    print(f"langgraph-postgres: {MODE}, listening on {LISTEN[0]}:{LISTEN[1]}", flush=True)
    server.serve_forever()
