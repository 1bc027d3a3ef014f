//! Everything a target is handed when it starts, in the simulator or as a process.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::Clock;
use crate::disk::Disk;
use crate::http::Client;
use crate::net::Network;
use crate::protocol::ProviderContract;

#[derive(Clone)]
pub struct TargetEnv {
    /// `host:port` of the provider (the side-effect service).
    pub provider: String,
    /// `host:port` of the authority (token introspection).
    pub authority: String,
    /// The provider's idempotency contract, which decides how an ambiguous
    /// dispatch can be reconciled.
    pub provider_contract: ProviderContract,
    /// How long the target should wait for one upstream call. The harness holds
    /// "lost" responses well past this, so the target always notices the loss.
    pub upstream_timeout: Duration,
    /// Upstream calls go through this pooled client (see [`Client`]).
    pub http: Client,
    pub clock: Arc<dyn Clock>,
    pub disk: Arc<dyn Disk>,
}

impl TargetEnv {
    pub fn new(
        provider: String,
        authority: String,
        provider_contract: ProviderContract,
        upstream_timeout: Duration,
        network: Arc<dyn Network>,
        clock: Arc<dyn Clock>,
        disk: Arc<dyn Disk>,
    ) -> TargetEnv {
        TargetEnv {
            provider,
            authority,
            provider_contract,
            upstream_timeout,
            http: Client::new(network),
            clock,
            disk,
        }
    }
}

impl std::fmt::Debug for TargetEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetEnv")
            .field("provider", &self.provider)
            .field("authority", &self.authority)
            .field("provider_contract", &self.provider_contract)
            .field("upstream_timeout", &self.upstream_timeout)
            .finish_non_exhaustive()
    }
}
