"""What every library wrapper under libraries/ shares: chaos's side of the
target protocol (docs/target-protocol.md), standard library only.

The wrappers are small services a user would write around each library: they
authorize the caller at the authority, call the provider, and answer the way a
plain HTTP service does, by status code (201 created, 200 plus
`Idempotent-Replayed: true` for a replay, 409 in flight, 422 conflict, 402
declined, 403 denied, 503 outcome unknown), with the receipt in the JSON body.
They never name an `outcome` in the body: whatever the library replays is
then read exactly as the library replays it (its status and its replay
header), not as the wrapper's first answer said.
"""

import http.client
import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request


def env(name):
    value = os.environ.get(name)
    if value is None:
        sys.exit(f"failed to read {name}: it is not set (the target file sets it)")
    return value


PROVIDER_URL = env("CHAOS_PROVIDER_URL").rstrip("/")
AUTHORITY_URL = env("CHAOS_AUTHORITY_URL").rstrip("/")
UPSTREAM_TIMEOUT = int(env("CHAOS_UPSTREAM_TIMEOUT_MS")) / 1000.0


def call(method, url, body=None, headers=None):
    """One upstream call: (status, headers, body), or None when no answer came
    back (timeout, reset, refused): it may or may not have been acted on."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError,
            http.client.HTTPException, OSError):
        return None


class Unauthorized(Exception):
    """The caller may not call this tool now."""


class AuthorityDown(Exception):
    """The authority could not be asked: nothing is known about the caller."""


def authorize(headers, tool):
    """The caller's grant (`sub`, `tenant`, `scope`) for `tool`, asked of the
    authority on every request, as the protocol requires."""
    authorization = headers.get("Authorization") or headers.get("authorization") or ""
    if not authorization.startswith("Bearer "):
        raise Unauthorized("no bearer token")
    answer = call("POST", AUTHORITY_URL + "/introspect",
                  body=urllib.parse.urlencode({"token": authorization[len("Bearer "):]}).encode(),
                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    if answer is None or answer[0] != 200:
        raise AuthorityDown("the authority did not answer")
    try:
        grant = json.loads(answer[2])
    except ValueError as error:
        raise AuthorityDown("the authority's answer is not JSON") from error
    if not grant.get("active") or tool not in (grant.get("scope") or "").split():
        raise Unauthorized("the token is not active for this tool")
    return grant


class Declined(Exception):
    """The provider refused: nothing happened."""

    code = "declined"


class OutcomeUnknown(Exception):
    """The provider's answer was lost or unreadable: it may have happened."""

    code = "unknown"


def dispatch(tool, arguments, downstream_key):
    """POST the effect to the provider under `downstream_key`; the receipt, or
    Declined / OutcomeUnknown."""
    headers = {"Content-Type": "application/json"}
    if downstream_key:
        headers["Idempotency-Key"] = downstream_key
    answer = call("POST", f"{PROVIDER_URL}/effects/{tool}",
                  body=json.dumps(arguments).encode("utf-8"), headers=headers)
    if answer is None:
        raise OutcomeUnknown("the provider's answer was lost; the effect may have happened")
    status, _, body = answer
    if 200 <= status < 300:
        try:
            return json.loads(body)["receipt"]
        except (ValueError, KeyError, TypeError) as error:
            raise OutcomeUnknown("the provider's answer had no receipt") from error
    if 400 <= status < 500:
        raise Declined(f"the provider refused the effect with status {status}")
    raise OutcomeUnknown(f"the provider answered {status}; the effect may have happened")


def receipt_body(tool, receipt):
    return {"receipt": receipt, "result": {"tool": tool, "status": "done", "receipt": receipt}}
