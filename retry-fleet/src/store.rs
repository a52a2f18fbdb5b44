//! The Redis connection: one script per flush, never longer than
//! `store_timeout`, reconnecting by itself.
//!
//! The `redis` crate's `ConnectionManager` reconnects after a lost
//! connection; it is made lazily (no round trip at start), so a replica
//! that starts while Redis is down starts on local state and joins the
//! fleet at the first flush that gets through. A flush that does not answer
//! within `store_timeout` is abandoned; since the script counts cumulative
//! totals, one that ran on the server all the same is not counted twice.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script, Value};

/// Why a flush did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StoreError {
    /// No answer within `store_timeout`.
    Timeout(Duration),
    /// The connection or the server said no.
    Failed(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Timeout(after) => write!(f, "no answer within {after:?}"),
            StoreError::Failed(why) => f.write_str(why),
        }
    }
}

pub(super) struct Store {
    client: Client,
    config: ConnectionManagerConfig,
    connection: Option<ConnectionManager>,
    script: Script,
    timeout: Duration,
    /// Failures in a row: after a few, the connection is made anew, so that
    /// a server that came back is found within a flush or two whatever the
    /// manager's own reconnection backoff has reached.
    failures: u32,
}

/// Failures in a row after which the connection is made anew.
const REMAKE_AFTER: u32 = 3;

impl Store {
    pub(super) fn new(url: &str, timeout: Duration, sync_every: Duration) -> Result<Self, String> {
        let client = Client::open(url).map_err(|e| e.to_string())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_min_delay(sync_every)
            .set_max_delay(sync_every.max(Duration::from_millis(500)))
            .set_number_of_retries(2);
        Ok(Store { client, config, connection: None, script: super::script::script(), timeout, failures: 0 })
    }

    /// Runs the flush script with `args`; its answer (as the server sent
    /// it: `script::answer` reads it), or why there is none (within
    /// `store_timeout`, connecting included).
    pub(super) async fn flush(&mut self, args: &[String]) -> Result<Value, StoreError> {
        let result = tokio::time::timeout(self.timeout, self.invoke(args)).await;
        let result = match result {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(error)) => Err(StoreError::Failed(error)),
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        };
        match &result {
            Ok(_) => self.failures = 0,
            Err(_) => {
                self.failures += 1;
                if self.failures >= REMAKE_AFTER {
                    self.connection = None;
                    self.failures = 0;
                }
            }
        }
        result
    }

    async fn invoke(&mut self, args: &[String]) -> Result<Value, String> {
        let connection = match &mut self.connection {
            Some(connection) => connection,
            None => {
                let made = ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
                    .map_err(|e| e.to_string())?;
                self.connection.insert(made)
            }
        };
        let mut invocation = self.script.prepare_invoke();
        for arg in args {
            invocation.arg(arg);
        }
        invocation.invoke_async(connection).await.map_err(|e| e.to_string())
    }
}
