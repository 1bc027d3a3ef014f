#!/usr/bin/env python3
"""The logic of chaos's GitHub Action (action.yml), with the standard library only.

action.yml is the wiring (install, cache, upload, publish); every decision is
here, where harness/tests/action.rs runs it with fake GITHUB_* files and a
real chaos binary:

    run.py key     the cache key and install folder of this chaos's build
    run.py run     builds the chaos command line from the inputs, runs it,
                   writes the step's outputs, the job summary and the
                   pull-request comment
    run.py gate    fails the step unless chaos's exit code is allowed
    run.py inputs  the inputs this script reads, and their variables (JSON)

Inputs arrive as environment variables (INPUT_SCENARIOS, ...), never spliced
into a shell line: action.yml maps each `${{ inputs.x }}` in a step's `env:`,
and the command is run as an argument list, so a scenario path with spaces or
`$(...)` in it is one argument, read by nobody but chaos.
"""

import glob
import hashlib
import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
import uuid

# Every input the script reads, by the variable action.yml sets from it. The
# tests check that action.yml declares each and maps it to this variable.
INPUTS = {
    "scenarios": "INPUT_SCENARIOS",
    "targets": "INPUT_TARGETS",
    "seeds": "INPUT_SEEDS",
    "partition": "INPUT_PARTITION",
    "merge": "INPUT_MERGE",
    "emit": "INPUT_EMIT",
    "deny-warnings": "INPUT_DENY_WARNINGS",
    "out": "INPUT_OUT",
    "working-directory": "INPUT_WORKING_DIRECTORY",
    "args": "INPUT_ARGS",
    "comment": "INPUT_COMMENT",
    "comment-tag": "INPUT_COMMENT_TAG",
    "artifact-name": "INPUT_ARTIFACT_NAME",
    "allowed-exit-codes": "INPUT_ALLOWED_EXIT_CODES",
    "github-token": "INPUT_GITHUB_TOKEN",
}

# What chaos's exit codes mean (harness/src/exit.rs), for the log and the comment.
EXIT_MEANING = {
    0: "every invariant held",
    1: "an invariant was violated",
    2: "bad input or usage",
    3: "a verdict could not be reached",
    4: "the run finished, but its reports could not be written",
    130: "interrupted",
}

BAD_INPUT = 2
# GitHub refuses a comment longer than this many characters.
COMMENT_LIMIT = 65536
# ... and a job summary larger than 1 MiB.
SUMMARY_LIMIT = 1024 * 1024
# The files that make the binary: a change to any of them is a new build.
BUILD_INPUTS = ["Cargo.toml", "Cargo.lock", "harness", "targets", "scenarios"]


class InputError(Exception):
    """An input the action cannot use; the message says how to fix it."""


def get(name):
    return os.environ.get(INPUTS[name], "").strip()


def lines(name):
    """A multi-line input: one item per line, blank lines and `#` comments skipped."""
    return [
        line.strip()
        for line in os.environ.get(INPUTS[name], "").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def flag(name, default):
    value = get(name).lower() or default
    if value not in ("true", "false"):
        raise InputError(f"input '{name}' is '{get(name)}'; write true or false")
    return value == "true"


def expand(pattern, cwd):
    """A path or a glob, expanded as a shell would (without running one).

    A path that exists is itself even when it holds glob characters; a glob
    that matches nothing is passed on as written, so chaos names it.
    """
    if os.path.exists(os.path.join(cwd, pattern)) or not glob.has_magic(pattern):
        return [pattern]
    matches = sorted(glob.glob(pattern, root_dir=cwd, recursive=True))
    return matches or [pattern]


def command(cwd):
    """The chaos arguments the inputs ask for (without the binary)."""
    merge = [path for pattern in lines("merge") for path in expand(pattern, cwd)]
    if merge:
        clashing = [
            name
            for name in ("scenarios", "targets", "seeds", "partition")
            if get(name)
        ]
        if flag("deny-warnings", "false"):
            clashing.append("deny-warnings")
        if clashing:
            raise InputError(
                "input 'merge' combines shard reports, which carry their run's "
                f"scenarios, targets, seeds and --deny; remove {', '.join(clashing)} "
                "from this step (give them to the shards' steps)"
            )
        argv = ["merge", *merge]
    else:
        argv = ["run"]
        argv += [path for pattern in lines("scenarios") for path in expand(pattern, cwd)]
        for target in lines("targets"):
            argv += ["--target", target]
        if get("seeds"):
            argv += ["--seeds", get("seeds")]
        if get("partition"):
            argv += ["--partition", get("partition")]
        if flag("deny-warnings", "false"):
            argv += ["--deny", "warnings"]
    emit = [part.strip() for part in get("emit").split(",") if part.strip()]
    emit = emit or ["json", "junit", "markdown", "html", "sarif"]
    # The job summary and the comment are summary.md.
    if "markdown" not in emit:
        emit.append("markdown")
    argv += ["--out", out_dir(), "--emit", ",".join(emit)]
    try:
        argv += shlex.split(os.environ.get(INPUTS["args"], ""), comments=True)
    except ValueError as error:
        raise InputError(
            f"input 'args' is not a list of shell words ({error}); quote as a shell would"
        ) from error
    return argv


def out_dir():
    return get("out") or "chaos-report"


def shard_name():
    """'K-of-N' for a shard of a partitioned run, None for a whole run."""
    partition = get("partition")
    if not partition or lines("merge"):
        return None
    return partition.replace("/", "-of-").replace(" ", "")


def write_output(values):
    """Appends name/value pairs to $GITHUB_OUTPUT, each value in a heredoc
    with a fresh delimiter, so no value (a hostile path) can forge another."""
    path = os.environ.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as file:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            file.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_summary(text):
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    if len(text.encode("utf-8")) > SUMMARY_LIMIT:
        text = truncate(text, SUMMARY_LIMIT - 200, "the job summary")
    with open(path, "a", encoding="utf-8") as file:
        file.write(text if text.endswith("\n") else text + "\n")


def truncate(text, limit, where):
    cut = text.encode("utf-8")[:limit].decode("utf-8", "ignore")
    cut = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
    return cut + f"\n\n_(cut to fit {where}: the whole summary.md is in the report artifact)_\n"


def run_url():
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    repository = os.environ.get("GITHUB_REPOSITORY")
    run_id = os.environ.get("GITHUB_RUN_ID")
    if repository and run_id:
        return f"{server}/{repository}/actions/runs/{run_id}"
    return None


def marker():
    """The hidden line that finds this action's own earlier comment."""
    tag = get("comment-tag") or "chaos"
    return f"<!-- chaos-action: {tag} -->"


def comment_body(summary, code):
    head = marker() + "\n"
    url = run_url()
    tail = f"\n\n[The run, its log and its reports]({url})\n" if url else "\n"
    if summary is None:
        body = (
            f"**chaos exited {code}** ({EXIT_MEANING.get(code, 'unexpected exit')}) "
            "without a summary; its log says why."
        )
    else:
        body = summary.rstrip("\n")
    if len(head) + len(body) + len(tail) > COMMENT_LIMIT:
        body = truncate(body, COMMENT_LIMIT - len(head) - len(tail) - 200, "a comment")
    return head + body + tail


def pull_request_number():
    if os.environ.get("GITHUB_EVENT_NAME") not in ("pull_request", "pull_request_target"):
        return None
    path = os.environ.get("GITHUB_EVENT_PATH")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            event = json.load(file)
        return int(event["pull_request"]["number"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def api(method, url, token, body=None):
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Accept", "application/vnd.github+json")
    request.add_header("X-GitHub-Api-Version", "2022-11-28")
    request.add_header("User-Agent", "chaos-action")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode("utf-8")
        return json.loads(text) if text else None


def post_comment(number, body):
    """Creates the comment, or updates this action's earlier one on the PR, so
    a pull request carries one chaos comment however often it is pushed to.
    Returns what it did; a failure (a fork's read-only token) is a warning."""
    base = os.environ.get("GITHUB_API_URL", "https://api.github.com").rstrip("/")
    repository = os.environ.get("GITHUB_REPOSITORY", "")
    token = get("github-token")
    comments = f"{base}/repos/{repository}/issues/{number}/comments"
    try:
        existing = None
        for page in range(1, 51):
            listed = api("GET", f"{comments}?per_page=100&page={page}", token) or []
            existing = next(
                (c for c in listed if marker() in (c.get("body") or "")), None
            )
            if existing is not None or len(listed) < 100:
                break
        if existing is not None:
            api("PATCH", f"{base}/repos/{repository}/issues/comments/{existing['id']}", token, {"body": body})
            return f"updated comment {existing['id']}"
        created = api("POST", comments, token, {"body": body}) or {}
        return f"created comment {created.get('id')}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        print(
            f"::warning::chaos could not comment on pull request #{number} ({error}); "
            "the job needs `permissions: pull-requests: write` (a fork's token is read-only)"
        )
        return None


def read(path):
    try:
        with open(path, encoding="utf-8") as file:
            return file.read()
    except OSError:
        return None


def do_run():
    cwd = os.path.abspath(get("working-directory") or ".")
    report_dir = os.path.join(cwd, out_dir())
    shard = shard_name()
    outputs = {
        "report-dir": report_dir,
        "artifact-name": get("artifact-name")
        or (f"chaos-shard-{shard}" if shard else "chaos-report"),
        "whole": "false" if shard else "true",
    }
    try:
        if not os.path.isdir(cwd):
            raise InputError(f"input 'working-directory' is '{cwd}', which is not a folder")
        flag("comment", "true")
        argv = command(cwd)
    except InputError as error:
        print(f"::error::{error}")
        write_output({**outputs, "exit-code": str(BAD_INPUT), "command": ""})
        append_summary(f"**chaos did not run**: {error}")
        return
    chaos = os.environ.get("CHAOS_BIN") or "chaos"
    shown = shlex.join(["chaos", *argv])
    outputs["command"] = shown
    print(f"$ {shown}", flush=True)
    try:
        code = subprocess.run([chaos, *argv], cwd=cwd, check=False).returncode
    except OSError as error:
        print(f"::error::could not start chaos ({chaos}): {error}")
        code = 3
    if code < 0:
        # Killed by a signal: report it the way a shell would.
        code = 128 - code
    print(f"chaos exited {code}: {EXIT_MEANING.get(code, 'unexpected exit')}", flush=True)
    outputs["exit-code"] = str(code)
    for name, file in (("summary", "summary.md"), ("junit", "junit.xml"), ("sarif", "report.sarif")):
        path = os.path.join(report_dir, file)
        outputs[name] = path if os.path.isfile(path) else ""
    write_output(outputs)

    summary = read(outputs["summary"]) if outputs["summary"] else None
    if summary is not None:
        title = f"### chaos, shard {get('partition')}\n\n" if shard else ""
        append_summary(title + summary)
    else:
        append_summary(
            f"**chaos exited {code}** ({EXIT_MEANING.get(code, 'unexpected exit')}) without a summary; the step's log says why."
        )

    number = pull_request_number()
    if number is not None and flag("comment", "true"):
        if shard:
            print("a shard's summary is a part of the run; the merge step comments the whole")
        else:
            done = post_comment(number, comment_body(summary, code))
            if done:
                print(f"pull request #{number}: {done}")


def do_gate():
    code = int(os.environ.get("CHAOS_EXIT_CODE") or BAD_INPUT)
    text = get("allowed-exit-codes") or "0"
    try:
        allowed = {int(part) for part in text.replace(" ", "").split(",") if part}
    except ValueError:
        print(f"::error::input 'allowed-exit-codes' is '{text}'; write codes like 0,1")
        return 1
    if code in allowed:
        return 0
    print(f"::error::chaos exited {code}: {EXIT_MEANING.get(code, 'unexpected exit')}")
    return 1


def do_key():
    """A cache key from the chaos version and a hash of every file that goes
    into the binary: a tag, a branch or a commit all key by content, so a
    moved branch rebuilds and two refs of one commit share a build."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for entry in BUILD_INPUTS:
        path = os.path.join(root, entry)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(folder, name)
            for folder, dirs, names in os.walk(path)
            if not os.path.relpath(folder, root).split(os.sep)[0] == "target"
            for name in names
        )
        for file in files:
            digest.update(os.path.relpath(file, root).encode("utf-8") + b"\0")
            with open(file, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
    version = "unknown"
    for line in (read(os.path.join(root, "Cargo.toml")) or "").splitlines():
        if line.startswith("version"):
            version = line.split("=", 1)[1].strip().strip('"')
            break
    system = os.environ.get("RUNNER_OS", sys.platform)
    arch = os.environ.get("RUNNER_ARCH", os.uname().machine)
    key = f"chaos-{version}-{system}-{arch}-{digest.hexdigest()[:32]}"
    cache = os.environ.get("RUNNER_TOOL_CACHE") or os.path.join(os.path.expanduser("~"), ".cache")
    write_output({"key": key, "root": os.path.join(cache, "chaos-action", key)})
    print(key)


def main(argv):
    verbs = {"run": do_run, "gate": do_gate, "key": do_key}
    if len(argv) == 2 and argv[1] == "inputs":
        print(json.dumps(INPUTS))
        return 0
    if len(argv) != 2 or argv[1] not in verbs:
        print(f"usage: {argv[0]} run|gate|key|inputs", file=sys.stderr)
        return BAD_INPUT
    return verbs[argv[1]]() or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
