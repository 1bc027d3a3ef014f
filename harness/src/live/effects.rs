//! Effects that are rows in the target's own database (`[effects]` in its
//! target file), read back after the run.
//!
//! For a target whose side effect is a database mutation (a reminder row an
//! outbox relay sends later, a balance update), the provider never hears of
//! it: the ground truth is the table. The target file names a query that
//! lists an operation's rows by subject; after the trial, each row becomes a
//! dispatch and its effect in the ledger, numbered after the provider's, so
//! every checker judges it as it judges a provider's commit. `committed_at`
//! is the row's own time (PostgreSQL's `clock_timestamp()` at the insert),
//! so "was it written before this attempt was sent?" is answered from the
//! database, not from when chaos looked.

use std::collections::BTreeSet;
use std::time::SystemTime;

use chaos_kit::canonical::{payload_fingerprint, value_fingerprint};
use tokio_postgres::NoTls;

use crate::history::{Dispatch, Disposition, Effect, Ledger, Ms};
use crate::plan::Trial;
use crate::target_file::EffectsQuery;

/// The columns the query must return; `key` is optional.
pub(crate) const COLUMNS: &str =
    "receipt (text), committed_at (timestamptz), payload (text, the row's JSON) and optionally key (text, the Idempotency-Key it was written under)";

/// One row the query returned.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) subject: String,
    pub(crate) receipt: String,
    pub(crate) committed_at: SystemTime,
    pub(crate) payload: String,
    pub(crate) key: Option<String>,
}

/// A connection to the target's database with its query prepared, for
/// the subjects of one trial.
pub(crate) struct Effects {
    client: tokio_postgres::Client,
    connection: tokio::task::JoinHandle<()>,
    statement: tokio_postgres::Statement,
    subjects: Vec<String>,
    /// How many rows [`Effects::new_rows`] has reported so far.
    seen: u32,
}

impl Effects {
    pub(crate) async fn open(query: &EffectsQuery, trial: &Trial<'_>) -> Result<Effects, String> {
        let (client, connection) = tokio_postgres::connect(&query.database, NoTls)
            .await
            .map_err(|error| {
                format!(
                    "failed to connect to the effects database {}: {error}",
                    query.database
                )
            })?;
        let connection = tokio::spawn(async move {
            let _ = connection.await;
        });
        let statement = client.prepare(&query.query).await.map_err(|error| {
            format!(
                "the effects query does not prepare ({error}); it must take $1, the operation's subject, and return {COLUMNS}"
            )
        })?;
        let subjects: BTreeSet<&str> = trial
            .operations
            .iter()
            .map(|operation| operation.subject.as_str())
            .collect();
        Ok(Effects {
            client,
            connection,
            statement,
            subjects: subjects.into_iter().map(str::to_owned).collect(),
            seen: 0,
        })
    }

    /// Every operation's rows (each distinct subject once).
    pub(crate) async fn read(&self) -> Result<Vec<Row>, String> {
        let mut rows = Vec::new();
        for subject in &self.subjects {
            for row in self.query(subject).await? {
                rows.push(decode(subject, &row)?);
            }
        }
        Ok(rows)
    }

    /// The numbers (1-based, in the order seen) of the rows written since
    /// the last call: what the live driver shows the nemesis as commits, so
    /// a crash after the Nth commit lands right after the Nth row.
    pub(crate) async fn new_rows(&mut self) -> Result<std::ops::RangeInclusive<u32>, String> {
        let mut total = 0u32;
        for subject in &self.subjects {
            total += self.query(subject).await?.len() as u32;
        }
        let new = self.seen + 1..=total;
        self.seen = self.seen.max(total);
        Ok(new)
    }

    async fn query(&self, subject: &str) -> Result<Vec<tokio_postgres::Row>, String> {
        self.client
            .query(&self.statement, &[&subject])
            .await
            .map_err(|error| format!("the effects query failed for subject '{subject}': {error}"))
    }
}

impl Drop for Effects {
    fn drop(&mut self) {
        self.connection.abort();
    }
}

fn decode(subject: &str, row: &tokio_postgres::Row) -> Result<Row, String> {
    let column = |name: &str| {
        format!("the effects query must return a column '{name}'; it must return {COLUMNS}")
    };
    let has = |name: &str| row.columns().iter().any(|column| column.name() == name);
    for name in ["receipt", "committed_at", "payload"] {
        if !has(name) {
            return Err(column(name));
        }
    }
    let typed = |name: &str, error: tokio_postgres::Error| {
        format!("the effects query's column '{name}' has the wrong type ({error}); it must return {COLUMNS}")
    };
    Ok(Row {
        subject: subject.to_owned(),
        receipt: row
            .try_get("receipt")
            .map_err(|error| typed("receipt", error))?,
        committed_at: row
            .try_get("committed_at")
            .map_err(|error| typed("committed_at", error))?,
        payload: row
            .try_get("payload")
            .map_err(|error| typed("payload", error))?,
        key: if has("key") {
            row.try_get("key").map_err(|error| typed("key", error))?
        } else {
            None
        },
    })
}

/// Adds `rows` to `ledger` as committed dispatches and their effects, in
/// commit order, numbered after the provider's dispatches. `started` is the
/// wall-clock instant of the run's time 0.
pub(crate) fn record(ledger: &mut Ledger, mut rows: Vec<Row>, tool: &str, started: SystemTime) {
    rows.sort_by(|a, b| (a.committed_at, &a.receipt).cmp(&(b.committed_at, &b.receipt)));
    for row in rows {
        let at: Ms = row
            .committed_at
            .duration_since(started)
            .map(|elapsed| elapsed.as_millis() as Ms)
            .unwrap_or(0);
        let fingerprint = match serde_json::from_str::<serde_json::Value>(&row.payload) {
            Ok(value) => value_fingerprint(&value),
            Err(_) => payload_fingerprint(row.payload.as_bytes()),
        };
        let number = ledger.dispatches.len() as u32 + 1;
        ledger.dispatches.push(Dispatch {
            number,
            at,
            tool: tool.to_owned(),
            subject: Some(row.subject.clone()),
            key: row.key,
            payload_fingerprint: fingerprint.clone(),
            intent_fingerprint: None,
            provider_shaped: false,
            delivery: None,
            message: None,
            disposition: Disposition::Committed {
                receipt: row.receipt.clone(),
            },
        });
        ledger.effects.push(Effect {
            at,
            dispatch: number,
            subject: Some(row.subject),
            receipt: row.receipt,
            payload_fingerprint: fingerprint,
            wall_clock_ms: row
                .committed_at
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|since| since.as_millis() as u64)
                .unwrap_or(0),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn row(receipt: &str, after_ms: u64, started: SystemTime) -> Row {
        Row {
            subject: "inv-a".into(),
            receipt: receipt.into(),
            committed_at: started + Duration::from_millis(after_ms),
            payload: r#"{"invoice":"inv-a","message":"hi"}"#.into(),
            key: Some("k-1".into()),
        }
    }

    #[test]
    fn rows_become_committed_dispatches_in_commit_order_after_the_providers() {
        let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut ledger = Ledger::default();
        ledger.dispatches.push(Dispatch {
            number: 1,
            at: 1,
            tool: "send_reminder".into(),
            subject: None,
            key: None,
            payload_fingerprint: "x".into(),
            intent_fingerprint: None,
            provider_shaped: false,
            delivery: None,
            message: None,
            disposition: Disposition::Dropped,
        });
        record(
            &mut ledger,
            vec![row("rem-2", 40, started), row("rem-1", 12, started)],
            "send_reminder",
            started,
        );
        let numbers: Vec<(u32, Ms, &str)> = ledger
            .effects
            .iter()
            .map(|effect| (effect.dispatch, effect.at, effect.receipt.as_str()))
            .collect();
        assert_eq!(numbers, [(2, 12, "rem-1"), (3, 40, "rem-2")]);
        assert_eq!(ledger.dispatches[1].key.as_deref(), Some("k-1"));
        // The same JSON, whatever its spacing, is the same payload.
        let spaced = r#"{ "message": "hi", "invoice": "inv-a" }"#;
        let value: serde_json::Value = serde_json::from_str(spaced).unwrap();
        assert_eq!(
            ledger.effects[0].payload_fingerprint,
            value_fingerprint(&value)
        );
    }

    #[test]
    fn a_row_written_before_the_run_started_is_at_time_zero() {
        let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut ledger = Ledger::default();
        let mut early = row("rem-0", 0, started);
        early.committed_at = started - Duration::from_secs(5);
        record(&mut ledger, vec![early], "send_reminder", started);
        assert_eq!(ledger.effects[0].at, 0);
    }
}
