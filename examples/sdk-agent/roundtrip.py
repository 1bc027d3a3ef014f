"""One run of sdk-agent's loop against a model at OPENAI_BASE_URL /
ANTHROPIC_BASE_URL, with the tool replaced by a stand-in that does nothing:
what chaos's wire-format tests run to capture what each official SDK really
sends and to check it reads what chaos answers. Prints what the loop saw as
one JSON line: the tool calls it was given and the final text.
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("CHAOS_PROVIDER_URL", "http://127.0.0.1:9")
os.environ.setdefault("CHAOS_STATE_DIR", tempfile.mkdtemp())
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import app  # noqa: E402

seen = []


def stand_in(run_id, tool, arguments, call_id):
    seen.append({"run_id": run_id, "tool": tool, "arguments": arguments})
    return {"status": "applied", "receipt": "rcpt-roundtrip"}


app.run_tool = stand_in
final = app.RUN("run-roundtrip", sys.argv[1])
print(json.dumps({"calls": seen, "final": final}))
