"""A FastAPI service behind asgi-idempotency-header 0.2.0, wired as the
library's README says: `IdempotencyHeaderMiddleware` with a `RedisBackend`
on the app, the endpoints themselves written as if the middleware were not
there. The endpoint is what a user writes: authorize the caller, call the
provider, answer by status code (see ../chaos_protocol.py).

Started by chaos from target.toml (uvicorn reads UVICORN_HOST and
UVICORN_PORT, which the target file fills in from the run's facts).
"""

import os
import sys

from fastapi import FastAPI, Request
from fastapi.middleware import Middleware
from fastapi.responses import JSONResponse
from idempotency_header_middleware import IdempotencyHeaderMiddleware
from idempotency_header_middleware.backends import RedisBackend
from redis.asyncio import from_url
from starlette.concurrency import run_in_threadpool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import chaos_protocol as chaos  # noqa: E402

redis = from_url(os.environ["REDIS_URL"])
# The README's configuration example passes `expiry` to the middleware; 0.2.0's
# middleware takes no such argument (a TypeError): the backend holds it.
backend = RedisBackend(redis=redis, expiry=int(os.environ["IDEMPOTENCY_EXPIRY_SECONDS"]))

app = FastAPI(middleware=[Middleware(IdempotencyHeaderMiddleware, backend=backend)])


@app.get("/healthz")
async def healthz():
    await redis.ping()
    return {"ok": True}


@app.post("/tools/{tool}")
async def tool_call(tool: str, request: Request):
    try:
        arguments = await request.json()
    except ValueError:
        return JSONResponse({"reason": "arguments are not JSON"}, 400)
    try:
        grant = await run_in_threadpool(chaos.authorize, request.headers, tool)
    except chaos.Unauthorized as error:
        return JSONResponse({"reason": str(error)}, 403)
    except chaos.AuthorityDown as error:
        return JSONResponse({"reason": f"{error}; nothing was done"}, 503)
    # The provider dedupes too, under the caller's key scoped by tenant: the
    # usual advice for a Stripe-like downstream.
    key = request.headers.get("idempotency-key")
    downstream = f"{grant.get('tenant', '')}:{key}" if key else None
    try:
        receipt = await run_in_threadpool(chaos.dispatch, tool, arguments, downstream)
    except chaos.Declined as error:
        return JSONResponse({"reason": str(error)}, 402)
    except chaos.OutcomeUnknown as error:
        return JSONResponse({"reason": str(error)}, 503)
    return JSONResponse(chaos.receipt_body(tool, receipt), 201)
