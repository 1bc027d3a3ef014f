"""sdk-agent: an agent written straight on the official model SDKs, no
framework: a loop that asks the model, runs the tool calls it emits, hands
their results back, and stops when the model answers with text. It is the
smallest agent runtime there is, and the one many services start as.

Its entry, as chaos's `[model]` driver calls it (docs/runtimes.md):

    POST /runs {"run_id": "...", "prompt": "..."}  ->  200 {"final": "..."}
    GET /healthz                                    ->  200

Its tools perform their effect at chaos's provider (its own HTTP protocol,
`POST {CHAOS_PROVIDER_URL}/effects/{tool}`) and return
`{"status": <chaos outcome>, "receipt": ...}` as text.

Configuration (the target files set it):

- `MODEL_API`: `openai-chat`, `openai-responses` or `anthropic`: which
  official SDK and wire format it speaks (`OPENAI_BASE_URL` /
  `ANTHROPIC_BASE_URL` point the SDK at chaos's scripted model);
- `MODEL_STREAM=1`: ask for a stream of events instead of one answer;
- `AGENT_MODE`:
  - `naive`: each tool call the model emits is executed as it comes, with
    no key: what every SDK's own tool-calling guide shows. A step the model
    decides again, or a run the user retries after a crash, charges again;
  - `keyed`: the effect is keyed by the run's structure (run id, tool, the
    business subject: the invoice), never by the model's tool-call id or
    its free text (except for a tool whose every decision is a new action
    by design, a note to oneself: keyed by the tool call), and claimed in a durable store (a file in
    CHAOS_STATE_DIR, written and synced before the call) before the
    provider is called. A completed claim answers `replayed` from the
    store; a claim a crashed run left re-sends under the same key, which
    the provider replays.
"""

import hashlib
import json
import os
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        sys.exit(f"sdk-agent: {name} is not set; the target file sets it (see README.md)")
    return value


API = env("MODEL_API", "openai-chat")
MODE = env("AGENT_MODE", "naive")
STREAM = env("MODEL_STREAM", "0") == "1"
if API not in ("openai-chat", "openai-responses", "anthropic"):
    sys.exit(f"sdk-agent: unknown MODEL_API '{API}'. Choose from: openai-chat, openai-responses, anthropic")
if MODE not in ("naive", "keyed"):
    sys.exit(f"sdk-agent: unknown AGENT_MODE '{MODE}'. Choose from: naive, keyed")
PROVIDER_URL = env("CHAOS_PROVIDER_URL").rstrip("/")
UPSTREAM_TIMEOUT = int(env("CHAOS_UPSTREAM_TIMEOUT_MS", "500")) / 1000
CLAIMS = os.path.join(env("CHAOS_STATE_DIR"), "claims")
os.makedirs(CLAIMS, exist_ok=True)

PROPERTIES = {
    "invoice": {"type": "string"},
    "amount_cents": {"type": "integer"},
    "recipient": {"type": "string"},
    "message": {"type": "string"},
    "memo": {"type": "string"},
    "note": {"type": "string"},
}
TOOLS = {
    "charge_card": "Charge the customer's card for an invoice.",
    "send_reminder": "Send the customer a payment reminder for an invoice.",
    "send_notification_to_self": "Send yourself a note about an invoice.",
}


def schema():
    return {"type": "object", "properties": PROPERTIES, "required": ["invoice"]}


# ---- the tools ---------------------------------------------------------------


def provider(tool, arguments, key):
    request = urllib.request.Request(
        f"{PROVIDER_URL}/effects/{tool}",
        data=json.dumps(arguments).encode(),
        headers={"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as answer:
            body = json.loads(answer.read() or b"{}")
            replayed = answer.headers.get("Idempotent-Replayed") == "true"
            return {"status": "replayed" if replayed else "applied", "receipt": body.get("receipt")}
    except urllib.error.HTTPError as error:
        if error.code == 402:
            return {"status": "rejected", "receipt": None}
        if error.code == 422:
            return {"status": "conflict", "receipt": None}
        return {"status": "unknown", "receipt": None}
    except OSError:
        # No answer: the charge may or may not have happened.
        return {"status": "unknown", "receipt": None}


# Tools whose every decision is a new action by design (a note to oneself may
# be sent again): keyed by the model's tool call, so each decision acts once.
PER_DECISION = {"send_notification_to_self"}


def run_tool(run_id, tool, arguments, call_id):
    if MODE == "naive":
        return provider(tool, arguments, None)
    scope = call_id if tool in PER_DECISION else arguments.get("invoice")
    key = hashlib.sha256(f"{run_id}|{tool}|{scope}".encode()).hexdigest()
    path = os.path.join(CLAIMS, key)
    try:
        with open(path) as claim:
            done = json.load(claim)
        if done.get("status") in ("applied", "replayed"):
            return {"status": "replayed", "receipt": done.get("receipt")}
    except FileNotFoundError:
        # The claim, durable before the provider hears of it.
        with open(path + ".tmp", "w") as claim:
            json.dump({"status": "pending"}, claim)
            claim.flush()
            os.fsync(claim.fileno())
        os.replace(path + ".tmp", path)
    except ValueError:
        pass
    # The original body under the key: a re-plan's reworded free text must
    # not make the provider refuse the key as reused with another body.
    first = path + ".body"
    if os.path.exists(first):
        with open(first) as saved:
            arguments = json.load(saved)
    else:
        with open(first, "w") as saved:
            json.dump(arguments, saved)
            saved.flush()
            os.fsync(saved.fileno())
    result = provider(tool, arguments, key)
    if result["status"] in ("applied", "replayed"):
        with open(path + ".tmp", "w") as claim:
            json.dump(result, claim)
            claim.flush()
            os.fsync(claim.fileno())
        os.replace(path + ".tmp", path)
    return result


# ---- the loop, per SDK ---------------------------------------------------------


def run_openai_chat(run_id, prompt):
    import openai

    client = openai.OpenAI(max_retries=0)
    tools = [{"type": "function", "function": {"name": name, "description": text, "parameters": schema()}}
             for name, text in TOOLS.items()]
    messages = [{"role": "system", "content": "You are a billing agent."}, {"role": "user", "content": prompt}]
    for _ in range(40):
        if STREAM:
            calls, text = {}, ""
            for chunk in client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools, stream=True):
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                text += delta.content or ""
                for call in delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] = call.id or entry["id"]
                    if call.function:
                        entry["name"] = call.function.name or entry["name"]
                        entry["arguments"] += call.function.arguments or ""
            calls = [calls[index] for index in sorted(calls)]
        else:
            message = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
            text = message.content or ""
            calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in message.tool_calls or []]
        if not calls:
            return text
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]})
        for call in calls:
            result = run_tool(run_id, call["name"], json.loads(call["arguments"] or "{}"), call["id"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    return "gave up"


def run_openai_responses(run_id, prompt):
    import openai

    client = openai.OpenAI(max_retries=0)
    tools = [{"type": "function", "name": name, "description": text, "parameters": schema()} for name, text in TOOLS.items()]
    items = [{"role": "user", "content": prompt}]
    for _ in range(40):
        if STREAM:
            response = None
            for event in client.responses.create(model="gpt-4o", instructions="You are a billing agent.", input=items, tools=tools, stream=True):
                if event.type == "response.completed":
                    response = event.response
        else:
            response = client.responses.create(model="gpt-4o", instructions="You are a billing agent.", input=items, tools=tools)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response.output_text
        for call in calls:
            items.append({"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments})
            result = run_tool(run_id, call.name, json.loads(call.arguments or "{}"), call.call_id)
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": json.dumps(result)})
    return "gave up"


def run_anthropic(run_id, prompt):
    import anthropic

    client = anthropic.Anthropic(max_retries=0)
    tools = [{"name": name, "description": text, "input_schema": schema()} for name, text in TOOLS.items()]
    messages = [{"role": "user", "content": prompt}]
    for _ in range(40):
        if STREAM:
            with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024, system="You are a billing agent.",
                                        messages=messages, tools=tools) as stream:
                message = stream.get_final_message()
        else:
            message = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system="You are a billing agent.",
                                             messages=messages, tools=tools)
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in message.content if block.type == "text")
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input} for c in calls]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": json.dumps(run_tool(run_id, c.name, dict(c.input), c.id))}
            for c in calls]})
    return "gave up"


RUN = {"openai-chat": run_openai_chat, "openai-responses": run_openai_responses, "anthropic": run_anthropic}[API]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/healthz":
            self.answer(200, {"ok": True})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        if self.path != "/runs":
            return self.answer(404, {"error": "not found"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            run_id, prompt = str(body["run_id"]), str(body["prompt"])
        except (ValueError, KeyError, TypeError) as error:
            return self.answer(400, {"error": f"a run is {{\"run_id\", \"prompt\"}}: {error}"})
        try:
            self.answer(200, {"final": RUN(run_id, prompt)})
        except Exception as error:  # the run failed: the user may retry it
            self.answer(500, {"error": f"{type(error).__name__}: {error}"})

    def answer(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    host, port = env("CHAOS_LISTEN_ADDR").rsplit(":", 1)
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
