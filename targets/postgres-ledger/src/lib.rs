//! `postgres-ledger`: the ledger's records in PostgreSQL.
//!
//! The ledger's logic is `target_ledger`'s; this crate is its [`RecordStore`]
//! on a table where each operation is one row:
//!
//! - the **claim** is an `INSERT ... ON CONFLICT DO NOTHING` on a table with a
//!   unique constraint on (tenant, tool, idempotency_key). When two workers,
//!   in one process or in ten, race on one key, the database arbitrates: one
//!   insert creates the row, every other one inserts nothing and reads the
//!   winner's row instead;
//! - a **transition** is one `UPDATE ... WHERE state IN ('pending', 'unknown')`
//!   that also names the claim (its `created_at_ms`), so a final state is
//!   written once and a late writer can never overwrite it.
//!
//! PostgreSQL runs every statement as a transaction of its own, and each of
//! these steps is one statement, so each is atomic without an explicit
//! `BEGIN`: nothing can happen between the check and the write, because there
//! is no gap between them.
//!
//! [`Weakness::CheckThenInsert`] is the deliberately broken variant: it reads
//! first and inserts when it found nothing, on a table *without* the unique
//! constraint. Two attempts that both read before either inserts both win the
//! claim and both dispatch; chaos catches it at `concurrent-attempts`.

use chaos_kit::clock::{millis, Clock, SystemClock};
use std::time::Duration;
use target_ledger::{Claim, Record, RecordState, RecordStore, Scope, StoreError};
use tokio_postgres::{Client, NoTls, Row, Statement};

/// The table with the unique constraint: the correct design.
const TABLE: &str = "chaos_ledger_records";
/// The same columns without the constraint, for [`Weakness::CheckThenInsert`].
const UNCONSTRAINED_TABLE: &str = "chaos_ledger_records_unconstrained";

/// A deliberately weakened mode, chosen with `--weak NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakness {
    /// `SELECT`, then `INSERT` if nothing was found, with no unique constraint.
    CheckThenInsert,
}

impl Weakness {
    pub const NAMES: [&'static str; 1] = ["check-then-insert"];

    pub fn parse(name: &str) -> Option<Weakness> {
        match name {
            "check-then-insert" => Some(Weakness::CheckThenInsert),
            _ => None,
        }
    }
}

/// The columns, in the order every query below returns them.
const COLUMNS: &str = "fingerprint, payload, downstream_key, created_at_ms, state, receipt, reason";

pub struct PgStore {
    client: Client,
    weakness: Option<Weakness>,
    claim: Statement,
    load: Statement,
    settle: Statement,
    forget: Statement,
}

fn schema(table: &str, constraint: bool) -> String {
    let unique = if constraint {
        format!(",\n    CONSTRAINT {table}_claim UNIQUE (tenant, tool, idempotency_key)")
    } else {
        String::new()
    };
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    tenant text NOT NULL,
    tool text NOT NULL,
    idempotency_key text NOT NULL,
    fingerprint text NOT NULL,
    payload text NOT NULL,
    downstream_key text NOT NULL,
    created_at_ms bigint NOT NULL,
    state text NOT NULL CHECK (state IN ('pending', 'unknown', 'succeeded', 'rejected')),
    receipt text,
    reason text{unique}
)"
    )
}

impl PgStore {
    /// Connects, creates the table if it is missing (from nothing: a fresh
    /// database is enough) and prunes rows older than any retention.
    pub async fn connect(
        url: &str,
        weakness: Option<Weakness>,
        retention: Duration,
    ) -> Result<PgStore, StoreError> {
        let (mut client, connection) =
            tokio_postgres::connect(url, NoTls).await.map_err(|error| {
                StoreError(format!("failed to connect to PostgreSQL at {url}: {error}"))
            })?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("postgres-ledger: the PostgreSQL connection failed: {error}");
            }
        });

        // Two targets starting at once would race on CREATE TABLE IF NOT EXISTS
        // (it is not atomic in PostgreSQL); a transaction-scoped advisory lock
        // lets one create while the other waits.
        let setup = client.transaction().await.map_err(pg_error)?;
        setup
            .execute("SELECT pg_advisory_xact_lock(727274)", &[])
            .await
            .map_err(pg_error)?;
        setup
            .batch_execute(&format!(
                "{};\n{};",
                schema(TABLE, true),
                schema(UNCONSTRAINED_TABLE, false)
            ))
            .await
            .map_err(pg_error)?;
        setup.commit().await.map_err(pg_error)?;

        let table = match weakness {
            None => TABLE,
            Some(Weakness::CheckThenInsert) => UNCONSTRAINED_TABLE,
        };
        // Past the retention a record means nothing; without this, rows of old
        // runs would pile up forever. The table is shared with every other
        // process using it, some of which may keep the full declared period
        // while this one was given seconds: prune by the longer of the two.
        let horizon = SystemClock
            .now_ms()
            .saturating_sub(millis(retention.max(target_ledger::RETENTION)));
        client
            .execute(
                &format!("DELETE FROM {table} WHERE created_at_ms < $1"),
                &[&(horizon as i64)],
            )
            .await
            .map_err(pg_error)?;

        let insert_columns = "tenant, tool, idempotency_key, fingerprint, payload, downstream_key, created_at_ms, state";
        let claim = match weakness {
            None => format!(
                "INSERT INTO {table} ({insert_columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending')
                 ON CONFLICT ON CONSTRAINT {table}_claim DO NOTHING"
            ),
            Some(Weakness::CheckThenInsert) => format!(
                "INSERT INTO {table} ({insert_columns}) VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending')"
            ),
        };
        let scope = "tenant = $1 AND tool = $2 AND idempotency_key = $3";
        let statements = [
            claim,
            format!("SELECT {COLUMNS} FROM {table} WHERE {scope} ORDER BY created_at_ms LIMIT 1"),
            format!(
                "UPDATE {table} SET state = $5, receipt = $6, reason = $7
                 WHERE {scope} AND created_at_ms = $4 AND state IN ('pending', 'unknown')"
            ),
            format!("DELETE FROM {table} WHERE {scope} AND created_at_ms = $4"),
        ];
        let mut prepared = Vec::with_capacity(statements.len());
        for statement in &statements {
            prepared.push(client.prepare(statement).await.map_err(pg_error)?);
        }
        let [claim, load, settle, forget]: [Statement; 4] = prepared
            .try_into()
            .map_err(|_| StoreError("failed to prepare the statements".into()))?;
        Ok(PgStore {
            client,
            weakness,
            claim,
            load,
            settle,
            forget,
        })
    }

    async fn insert(&self, scope: &Scope, record: &Record) -> Result<bool, StoreError> {
        let inserted = self
            .client
            .execute(
                &self.claim,
                &[
                    &scope.tenant,
                    &scope.tool,
                    &scope.key,
                    &record.fingerprint,
                    &record.payload,
                    &record.downstream_key,
                    &(record.created_at_ms as i64),
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(inserted == 1)
    }
}

impl RecordStore for PgStore {
    async fn claim(&self, scope: &Scope, record: &Record) -> Result<Claim, StoreError> {
        if self.weakness == Some(Weakness::CheckThenInsert) {
            // THE WEAKNESS: between this read and the insert below, another
            // attempt can read "nothing" too; with no constraint, both inserts
            // succeed and both attempts believe they own the operation.
            if let Some(existing) = self.load(scope).await? {
                return Ok(Claim::Taken(existing));
            }
            self.insert(scope, record).await?;
            return Ok(Claim::Won);
        }
        // The row can vanish between a lost insert and the read (an expired
        // record forgotten by another attempt); then the claim is tried again.
        for _ in 0..3 {
            if self.insert(scope, record).await? {
                return Ok(Claim::Won);
            }
            if let Some(existing) = self.load(scope).await? {
                return Ok(Claim::Taken(existing));
            }
        }
        Err(StoreError(format!(
            "the record of {scope} kept vanishing during the claim"
        )))
    }

    async fn load(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        let row = self
            .client
            .query_opt(&self.load, &[&scope.tenant, &scope.tool, &scope.key])
            .await
            .map_err(pg_error)?;
        row.map(|row| record_of(&row)).transpose()
    }

    async fn settle(&self, scope: &Scope, record: &Record) -> Result<bool, StoreError> {
        let (state, receipt, reason): (&str, Option<&str>, Option<&str>) = match &record.state {
            RecordState::Pending => ("pending", None, None),
            RecordState::Unknown => ("unknown", None, None),
            RecordState::Succeeded { receipt } => ("succeeded", Some(receipt), None),
            RecordState::Rejected { reason } => ("rejected", None, Some(reason)),
        };
        let updated = self
            .client
            .execute(
                &self.settle,
                &[
                    &scope.tenant,
                    &scope.tool,
                    &scope.key,
                    &(record.created_at_ms as i64),
                    &state,
                    &receipt,
                    &reason,
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(updated > 0)
    }

    async fn forget(&self, scope: &Scope, created_at_ms: u64) -> Result<(), StoreError> {
        self.client
            .execute(
                &self.forget,
                &[
                    &scope.tenant,
                    &scope.tool,
                    &scope.key,
                    &(created_at_ms as i64),
                ],
            )
            .await
            .map_err(pg_error)?;
        Ok(())
    }
}

fn record_of(row: &Row) -> Result<Record, StoreError> {
    let state: String = row.get("state");
    let receipt: Option<String> = row.get("receipt");
    let reason: Option<String> = row.get("reason");
    let state = match (state.as_str(), receipt, reason) {
        ("pending", _, _) => RecordState::Pending,
        ("unknown", _, _) => RecordState::Unknown,
        ("succeeded", Some(receipt), _) => RecordState::Succeeded { receipt },
        ("rejected", _, reason) => RecordState::Rejected {
            reason: reason.unwrap_or_default(),
        },
        (other, _, _) => {
            return Err(StoreError(format!(
                "a row holds the unreadable state '{other}'"
            )))
        }
    };
    let created_at_ms: i64 = row.get("created_at_ms");
    Ok(Record {
        fingerprint: row.get("fingerprint"),
        payload: row.get("payload"),
        downstream_key: row.get("downstream_key"),
        created_at_ms: created_at_ms as u64,
        // Not a column: the ledger bounds it from the claim's time.
        dispatch_ended_at_ms: None,
        resent_at_ms: None,
        // Not a column: only the simulator's refuses-replans keeps it.
        tool_use_id: None,
        state,
    })
}

fn pg_error(error: tokio_postgres::Error) -> StoreError {
    StoreError(format!("PostgreSQL: {error}"))
}
