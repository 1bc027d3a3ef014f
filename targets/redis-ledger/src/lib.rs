//! `redis-ledger`: the ledger's records in Redis.
//!
//! The ledger's logic is `target_ledger`'s; this crate is its [`RecordStore`]
//! on Redis, one string key per operation holding the record as JSON:
//!
//! - the **claim** is `SET key record NX PX retention`: Redis executes commands
//!   one at a time, so of all the attempts racing on one key exactly one sets
//!   it, and the expiry is the target's declared retention, enforced by Redis;
//! - a **transition** is a Lua script, which Redis runs atomically: it reads
//!   the record, checks that it is the same claim and still open, and only then
//!   writes the new state (keeping the expiry). A final state is written once.
//!
//! [`Weakness::ProviderTtl`] is the deliberately broken variant: the claim
//! expires with the *provider's* key retention ("we keep keys as long as the
//! payment provider does") instead of the retention the target declares. Past
//! the provider's window and inside the declared one, a retry finds no claim,
//! dispatches again, and the provider no longer deduplicates it; chaos catches
//! it at `expired-history`.

use std::time::Duration;

use chaos_kit::clock::millis;
use redis::aio::MultiplexedConnection;
use redis::Script;
use target_ledger::{Claim, Record, RecordStore, Scope, StoreError};

/// A deliberately weakened mode, chosen with `--weak NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weakness {
    /// The claim's expiry is the provider's retention, not the declared one.
    ProviderTtl,
}

impl Weakness {
    pub const NAMES: [&'static str; 1] = ["provider-ttl"];

    pub fn parse(name: &str) -> Option<Weakness> {
        match name {
            "provider-ttl" => Some(Weakness::ProviderTtl),
            _ => None,
        }
    }
}

/// Moves an open record to its new state, atomically.
/// KEYS[1]: the record; ARGV[1]: the claim's created_at_ms; ARGV[2]: the new record.
const SETTLE: &str = r#"
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
local record = cjson.decode(stored)
if record.created_at_ms ~= tonumber(ARGV[1]) then return 0 end
local state = record.state.state
if state ~= 'pending' and state ~= 'unknown' then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
"#;

/// Deletes a record only if it is still the given claim.
/// KEYS[1]: the record; ARGV[1]: the claim's created_at_ms.
const FORGET: &str = r#"
local stored = redis.call('GET', KEYS[1])
if not stored then return 0 end
if cjson.decode(stored).created_at_ms ~= tonumber(ARGV[1]) then return 0 end
return redis.call('DEL', KEYS[1])
"#;

pub struct RedisStore {
    connection: MultiplexedConnection,
    /// How long Redis keeps a claim.
    expiry: Duration,
    settle: Script,
    forget: Script,
}

impl RedisStore {
    /// Connects to `url`. Claims expire after `retention`, or after
    /// `provider_retention` under [`Weakness::ProviderTtl`].
    pub async fn connect(
        url: &str,
        weakness: Option<Weakness>,
        retention: Duration,
        provider_retention: Option<Duration>,
    ) -> Result<RedisStore, StoreError> {
        let failed = |error: redis::RedisError| {
            StoreError(format!("failed to connect to Redis at {url}: {error}"))
        };
        let client = redis::Client::open(url).map_err(failed)?;
        let connection = client
            .get_multiplexed_async_connection()
            .await
            .map_err(failed)?;
        let expiry = match weakness {
            // THE WEAKNESS: the claim outlives the provider's memory of the key
            // by nothing, while the target promises to remember far longer.
            Some(Weakness::ProviderTtl) => provider_retention.unwrap_or(retention),
            None => retention,
        };
        Ok(RedisStore {
            connection,
            expiry,
            settle: Script::new(SETTLE),
            forget: Script::new(FORGET),
        })
    }

    fn key(scope: &Scope) -> String {
        format!("chaos-ledger:{scope}")
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let mut connection = self.connection.clone();
        let stored: Option<Vec<u8>> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut connection)
            .await
            .map_err(redis_error)?;
        stored
            .map(|bytes| {
                Record::decode(&bytes)
                    .ok_or_else(|| StoreError(format!("the record under {key} is corrupt")))
            })
            .transpose()
    }
}

impl RecordStore for RedisStore {
    async fn claim(&self, scope: &Scope, record: &Record) -> Result<Claim, StoreError> {
        let key = RedisStore::key(scope);
        // The key can expire between a lost SET NX and the GET; then the claim
        // is simply tried again.
        for _ in 0..3 {
            let mut connection = self.connection.clone();
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(record.encode())
                .arg("NX")
                .arg("PX")
                .arg(millis(self.expiry).max(1))
                .query_async(&mut connection)
                .await
                .map_err(redis_error)?;
            if set.is_some() {
                return Ok(Claim::Won);
            }
            if let Some(existing) = self.get(&key).await? {
                return Ok(Claim::Taken(existing));
            }
        }
        Err(StoreError(format!(
            "the record under {key} kept vanishing during the claim"
        )))
    }

    async fn load(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        self.get(&RedisStore::key(scope)).await
    }

    async fn settle(&self, scope: &Scope, record: &Record) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let updated: i64 = self
            .settle
            .key(RedisStore::key(scope))
            .arg(record.created_at_ms)
            .arg(record.encode())
            .invoke_async(&mut connection)
            .await
            .map_err(redis_error)?;
        Ok(updated == 1)
    }

    async fn forget(&self, scope: &Scope, created_at_ms: u64) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        let _: i64 = self
            .forget
            .key(RedisStore::key(scope))
            .arg(created_at_ms)
            .invoke_async(&mut connection)
            .await
            .map_err(redis_error)?;
        Ok(())
    }
}

fn redis_error(error: redis::RedisError) -> StoreError {
    StoreError(format!("Redis: {error}"))
}
