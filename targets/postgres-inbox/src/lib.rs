//! `postgres-inbox`: an idempotent `send_reminder` whose effect lives in the
//! same database as its deduplication record.
//!
//! Many tools never call a provider at all: they write a row (a reminder an
//! outbox relay delivers later, a ledger entry, a status change). For those,
//! the seed article's advice is exact: *place the business write and the
//! deduplication record in the same transaction*. Then there is no moment at
//! which one exists without the other, and no retry, race or crash can see
//! half of it. chaos counts this target's effects as rows, with the
//! `[effects]` query of its target file, and judges them like a provider's.
//!
//! The correct design, one transaction per call:
//!
//! ```text
//! BEGIN
//!   INSERT INTO requests (tenant, tool, key, fingerprint) ... ON CONFLICT DO NOTHING
//!   -- inserted: this call owns the operation
//!   INSERT INTO reminders (...) RETURNING id
//!   UPDATE requests SET reminder_id = id
//! COMMIT
//! ```
//!
//! A second attempt with the same key blocks on the first one's uncommitted
//! `requests` row (PostgreSQL's unique index waits for the other transaction
//! to end), then inserts nothing and reads the committed record: a replay.
//! If the first one rolled back, the second one owns the operation instead.
//! Nothing is ever half-written, so an error before `COMMIT` is `failed`
//! (nothing happened, safe to retry); only an error *at* `COMMIT` is
//! `unknown`, because the commit may have landed before the connection died.
//!
//! [`Weakness::TwoTransactions`] is the broken variant the advice warns
//! about: it checks for the record, writes the reminder in one transaction
//! and the record in another. Two attempts that both check before either
//! records both write a reminder, and a worker killed between the two
//! leaves a reminder with no record, which the retry writes again; chaos
//! catches it at `scenarios/database/database-concurrent-attempts.toml`
//! and `database-worker-restart.toml`.

use std::io;
use std::sync::Arc;

use chaos_kit::canonical::{canonicalize, fingerprint};
use chaos_kit::http::{self, Abort, Request, Response};
use chaos_kit::net::Listener;
use chaos_kit::protocol::{AnswerBody, Outcome, IDEMPOTENCY_KEY};
use chaos_kit::target;
use chaos_kit::upstream;
use chaos_kit::TargetEnv;
use tokio_postgres::{Client, NoTls};

/// Deduplication records: one per (tenant, tool, key), the claim's arbiter.
const REQUESTS: &str = "chaos_inbox_requests";
/// The business rows: the effects chaos counts.
const REMINDERS: &str = "chaos_inbox_reminders";
/// The time between a business write and the next step: the weak mode's
/// record, the correct mode's answer.
const GAP_BETWEEN_TRANSACTIONS: std::time::Duration = std::time::Duration::from_millis(40);

/// A deliberately weakened mode, chosen with `--weak NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakness {
    /// Check, write the reminder, then write the record: two transactions
    /// with a gap between them.
    TwoTransactions,
}

impl Weakness {
    pub const NAMES: [&'static str; 1] = ["two-transactions"];

    pub fn parse(name: &str) -> Option<Weakness> {
        match name {
            "two-transactions" => Some(Weakness::TwoTransactions),
            _ => None,
        }
    }
}

/// The database and the mode; each call opens its own connection, because a
/// transaction holds its connection and attempts of one key must be able to
/// run (and block each other) at the same time.
pub struct Inbox {
    url: String,
    weakness: Option<Weakness>,
}

impl Inbox {
    /// Connects once to create the tables.
    pub async fn open(url: &str, weakness: Option<Weakness>) -> Result<Inbox, io::Error> {
        let inbox = Inbox {
            url: url.to_owned(),
            weakness,
        };
        let mut client = inbox.connect().await.map_err(io::Error::other)?;
        // Targets of parallel trials start together: one creates the tables
        // at a time (CREATE TABLE IF NOT EXISTS itself races on the catalog).
        let schema = format!(
            "SELECT pg_advisory_xact_lock(7411);
             CREATE TABLE IF NOT EXISTS {REQUESTS} (
                 tenant text NOT NULL,
                 tool text NOT NULL,
                 idempotency_key text NOT NULL,
                 fingerprint text NOT NULL,
                 reminder_id bigint,
                 PRIMARY KEY (tenant, tool, idempotency_key)
             );
             CREATE TABLE IF NOT EXISTS {REMINDERS} (
                 id bigserial PRIMARY KEY,
                 tenant text NOT NULL,
                 tool text NOT NULL,
                 idempotency_key text NOT NULL,
                 payload jsonb NOT NULL,
                 committed_at timestamptz NOT NULL DEFAULT clock_timestamp()
             );"
        );
        let transaction = client.transaction().await.map_err(io::Error::other)?;
        transaction
            .batch_execute(&schema)
            .await
            .map_err(io::Error::other)?;
        transaction.commit().await.map_err(io::Error::other)?;
        Ok(inbox)
    }

    async fn connect(&self) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) = tokio_postgres::connect(&self.url, NoTls).await?;
        tokio::spawn(connection);
        Ok(client)
    }
}

/// Serves tool calls on `listener` until `shutdown` completes.
pub async fn serve(
    listener: impl Listener,
    shutdown: impl std::future::Future<Output = ()>,
    env: TargetEnv,
    inbox: Inbox,
) -> io::Result<()> {
    let shared = Arc::new((env, inbox));
    http::serve(
        listener,
        shutdown,
        http::handler(move |request| {
            let shared = shared.clone();
            async move { handle(&shared.0, &shared.1, request).await }
        }),
    )
    .await
}

/// One operation's identity and content, as the call carries them.
struct Call<'a> {
    tenant: &'a str,
    tool: &'a str,
    key: &'a str,
    fingerprint: String,
    payload: &'a str,
}

async fn handle(env: &TargetEnv, inbox: &Inbox, request: Request) -> Result<Response, Abort> {
    if target::is_health_check(&request) {
        return Ok(Response::new(200));
    }
    let Some(tool) = target::tool_call(&request) else {
        return Ok(target::not_found());
    };
    // Authorization first, on every attempt, replays included: a caller
    // revoked since the first attempt gets no stored receipt either.
    let Some(token) = upstream::bearer_token(&request) else {
        return Ok(target::answer(AnswerBody::outcome(Outcome::Denied)));
    };
    let grant = match upstream::introspect(env, token).await {
        Some(grant) if grant.allows(tool) => grant,
        Some(_) => return Ok(target::answer(AnswerBody::outcome(Outcome::Denied))),
        // Nothing was written yet: not done, safe to retry.
        None => return Ok(target::answer(failed("the authority did not answer"))),
    };
    let tenant = grant.tenant.as_deref().unwrap_or("");
    let Some(key) = request.header_value(IDEMPOTENCY_KEY) else {
        return Ok(target::answer(
            AnswerBody::outcome(Outcome::Rejected).with_reason("no Idempotency-Key"),
        ));
    };
    let (Ok(payload), Some(canonical)) = (
        std::str::from_utf8(&request.body),
        canonicalize(&request.body),
    ) else {
        return Ok(target::answer(
            AnswerBody::outcome(Outcome::Rejected).with_reason("the arguments are not JSON"),
        ));
    };
    let call = Call {
        tenant,
        tool,
        key,
        fingerprint: fingerprint(&canonical),
        payload,
    };
    let mut client = match inbox.connect().await {
        Ok(client) => client,
        Err(error) => return Ok(target::answer(failed(&format!("database: {error}")))),
    };
    let answer = match inbox.weakness {
        None => one_transaction(&mut client, &call).await,
        Some(Weakness::TwoTransactions) => two_transactions(&client, &call).await,
    };
    Ok(target::answer(answer))
}

/// The correct design: the record and the reminder commit together or not at all.
async fn one_transaction(client: &mut Client, call: &Call<'_>) -> AnswerBody {
    let transaction = match client.transaction().await {
        Ok(transaction) => transaction,
        Err(error) => return failed(&format!("database: {error}")),
    };
    let claimed = transaction
        .execute(
            &format!(
                "INSERT INTO {REQUESTS} (tenant, tool, idempotency_key, fingerprint)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING"
            ),
            &[&call.tenant, &call.tool, &call.key, &call.fingerprint],
        )
        .await;
    let answer = match claimed {
        Err(error) => return failed(&format!("database: {error}")),
        // Another call owns the operation, and it has committed (the insert
        // waited for it): answer from its record.
        Ok(0) => match recorded(&transaction, call).await {
            Ok(Some(answer)) => answer,
            // The owner rolled back after all, between our insert and read.
            Ok(None) => return failed("the operation's owner rolled back; retry"),
            Err(error) => return failed(&format!("database: {error}")),
        },
        Ok(_) => {
            let written = async {
                let id: i64 = transaction
                    .query_one(
                        &format!(
                            "INSERT INTO {REMINDERS} (tenant, tool, idempotency_key, payload)
                             VALUES ($1, $2, $3, $4::text::jsonb) RETURNING id"
                        ),
                        &[&call.tenant, &call.tool, &call.key, &call.payload],
                    )
                    .await?
                    .get(0);
                transaction
                    .execute(
                        &format!(
                            "UPDATE {REQUESTS} SET reminder_id = $4
                             WHERE tenant = $1 AND tool = $2 AND idempotency_key = $3"
                        ),
                        &[&call.tenant, &call.tool, &call.key, &id],
                    )
                    .await?;
                Ok::<i64, tokio_postgres::Error>(id)
            }
            .await;
            match written {
                Ok(id) => applied(call.tool, id),
                // Rolled back when `transaction` drops: nothing happened.
                Err(error) => return failed(&format!("database: {error}")),
            }
        }
    };
    match transaction.commit().await {
        Ok(()) => {
            // What a handler does after its write (render the answer, log
            // it): the same window the weak mode has between its writes, so
            // a crash after the commit lands in this design too. Without it
            // the answer left before chaos saw the row, the crash never
            // happened, and the pass tested nothing (issue 22).
            tokio::time::sleep(GAP_BETWEEN_TRANSACTIONS).await;
            answer
        }
        // The commit may have landed before the connection broke.
        Err(error) => unknown(&format!("the commit's outcome is unknown: {error}")),
    }
}

/// THE BUG: check, write, record, as three statements, each its own
/// transaction. Between the check and the record, another attempt of the
/// same key finds nothing and writes a second reminder.
async fn two_transactions(client: &Client, call: &Call<'_>) -> AnswerBody {
    match recorded(client, call).await {
        Ok(Some(answer)) => return answer,
        Ok(None) => {}
        Err(error) => return failed(&format!("database: {error}")),
    }
    let id: i64 = match client
        .query_one(
            &format!(
                "INSERT INTO {REMINDERS} (tenant, tool, idempotency_key, payload)
                 VALUES ($1, $2, $3, $4::text::jsonb) RETURNING id"
            ),
            &[&call.tenant, &call.tool, &call.key, &call.payload],
        )
        .await
    {
        Ok(row) => row.get(0),
        Err(error) => return failed(&format!("database: {error}")),
    };
    // What a handler does between its two writes (render the reminder, log
    // it, a second round trip): the gap a crash can land in. It exists at
    // any width; this one is wide enough for chaos to hit it every time.
    tokio::time::sleep(GAP_BETWEEN_TRANSACTIONS).await;
    let recorded = client
        .execute(
            &format!(
                "INSERT INTO {REQUESTS} (tenant, tool, idempotency_key, fingerprint, reminder_id)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
            ),
            &[&call.tenant, &call.tool, &call.key, &call.fingerprint, &id],
        )
        .await;
    match recorded {
        Ok(_) => applied(call.tool, id),
        // The reminder is written; only its record is missing.
        Err(error) => unknown(&format!("reminder written, record not: {error}")),
    }
}

/// The answer the stored record gives a retry: a replay of the same
/// arguments, a conflict for others; `None` when there is no record.
async fn recorded(
    client: &impl tokio_postgres::GenericClient,
    call: &Call<'_>,
) -> Result<Option<AnswerBody>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            &format!(
                "SELECT fingerprint, reminder_id FROM {REQUESTS}
                 WHERE tenant = $1 AND tool = $2 AND idempotency_key = $3"
            ),
            &[&call.tenant, &call.tool, &call.key],
        )
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let stored: String = row.get(0);
    let reminder: Option<i64> = row.get(1);
    Ok(Some(match reminder {
        _ if stored != call.fingerprint => AnswerBody::outcome(Outcome::Conflict)
            .with_reason("this key was used with other arguments"),
        Some(id) => {
            let receipt = receipt(id);
            AnswerBody::outcome(Outcome::Replayed)
                .with_result(target::tool_result(call.tool, &receipt))
                .with_receipt(receipt)
        }
        // Neither mode lets a record be seen without its reminder (both
        // write the id with or after the row); if one ever is, say so.
        None => unknown("a record without its reminder"),
    }))
}

fn receipt(id: i64) -> String {
    format!("rem-{id}")
}

fn applied(tool: &str, id: i64) -> AnswerBody {
    let receipt = receipt(id);
    AnswerBody::outcome(Outcome::Applied)
        .with_result(target::tool_result(tool, &receipt))
        .with_receipt(receipt)
}

fn failed(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Failed).with_reason(reason)
}

fn unknown(reason: &str) -> AnswerBody {
    AnswerBody::outcome(Outcome::Unknown).with_reason(reason)
}
