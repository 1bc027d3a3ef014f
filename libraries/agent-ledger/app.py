"""An HTTP tool service around agent-ledger 0.2.1, wired as the library's
README says for production: an `EffectLedger` over a `PostgresStore` on a
psycopg `AsyncConnectionPool` (the table made with `SCHEMA_SQL` at start),
every tool call made through `ledger.run(ToolCall(workflow_id, tool, args),
handler)`, the `workflow_id` scoped by tenant as its FAQ tells multi-tenant
systems to ("tenant-123:order-456") and the handler passing `effect.idem_key`
downstream ("passing down effect.idem_key would ensure exactly-once
execution"). The rest is what a user writes: authorize the caller, answer by
status code (see ../chaos_protocol.py).

Started by chaos from target.toml (uvicorn reads UVICORN_HOST and
UVICORN_PORT, which the target file fills in from the run's facts).
"""

import contextlib
import os
import sys

from agent_ledger import (
    ConcurrencyOptions,
    EffectDeniedError,
    EffectFailedError,
    EffectLedger,
    EffectLedgerOptions,
    EffectTimeoutError,
    LedgerDefaults,
    RunOptions,
    ToolCall,
)
from agent_ledger.stores.postgres import SCHEMA_SQL, PostgresStore
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import chaos_protocol as chaos  # noqa: E402

pool = AsyncConnectionPool(conninfo=os.environ["DATABASE_URL"], open=False)
store = PostgresStore(pool=pool)
# effect_timeout_s: the README's default is 30 s, longer than the agent waits
# for one answer (2.5 s live); a service in front of a client sets it below
# the client's timeout. Stale takeover stays at its default (disabled), as
# does everything else.
ledger = EffectLedger(
    EffectLedgerOptions(
        store=store,
        defaults=LedgerDefaults(
            run=RunOptions(
                concurrency=ConcurrencyOptions(
                    effect_timeout_s=float(os.environ.get("LEDGER_EFFECT_TIMEOUT_S", "1.0"))
                )
            )
        ),
    )
)


async def healthz(request):
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
    return JSONResponse({"ok": True})


async def tool_call(request: Request):
    tool = request.path_params["tool"]
    try:
        arguments = await request.json()
    except ValueError:
        return JSONResponse({"reason": "arguments are not JSON"}, 400)
    if not isinstance(arguments, dict):
        return JSONResponse({"reason": "arguments must be a JSON object"}, 400)
    try:
        grant = await run_in_threadpool(chaos.authorize, request.headers, tool)
    except chaos.Unauthorized as error:
        return JSONResponse({"reason": str(error)}, 403)
    except chaos.AuthorityDown as error:
        return JSONResponse({"reason": f"{error}; nothing was done"}, 503)

    ran = []

    async def handler(effect):
        ran.append(effect.idem_key)
        receipt = await run_in_threadpool(chaos.dispatch, tool, arguments, effect.idem_key)
        return chaos.receipt_body(tool, receipt)

    call = ToolCall(
        workflow_id=f"{grant.get('tenant', '')}:{request.headers.get('x-run-id', '')}",
        tool=tool,
        args=arguments,
    )
    try:
        result = await ledger.run(call, handler=handler)
    except EffectTimeoutError as error:
        return JSONResponse({"reason": str(error)}, 409)
    except EffectDeniedError as error:
        return JSONResponse({"reason": str(error)}, 403)
    except EffectFailedError as error:
        # A replayed failure: the error the handler raised the first time.
        declined = error.code == chaos.Declined.code
        return JSONResponse({"reason": str(error)}, 402 if declined else 503)
    except chaos.Declined as error:
        return JSONResponse({"reason": str(error)}, 402)
    except chaos.OutcomeUnknown as error:
        return JSONResponse({"reason": str(error)}, 503)
    if ran:
        return JSONResponse(result, 201)
    return JSONResponse(result, 200, headers={"Idempotent-Replayed": "true"})


@contextlib.asynccontextmanager
async def lifespan(app):
    await pool.open()
    async with pool.connection() as conn:
        await conn.execute(SCHEMA_SQL)
    yield
    await pool.close()


app = Starlette(
    routes=[Route("/healthz", healthz), Route("/tools/{tool}", tool_call, methods=["POST"])],
    lifespan=lifespan,
)
