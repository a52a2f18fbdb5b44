//! Checking a herd simulation's settings before it runs: every field in
//! range, and a herd whose attempts fit in memory (see
//! [`HerdConfig::MAX_CLIENTS`] and [`HerdConfig::MAX_ATTEMPTS_IN_ALL`]).

use std::time::Duration;

use super::config::{HerdConfig, Model};
use stormproof_runtime::ConfigError;

/// Rejects zero for a count that must be positive, as the library's own
/// settings do.
fn positive(field: &'static str, value: u64) -> Result<(), ConfigError> {
    if value == 0 { Err(ConfigError::new(field, "must be greater than zero")) } else { Ok(()) }
}

impl HerdConfig {
    /// Checks the settings; the error names the first invalid field.
    ///
    /// ```
    /// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_sim as sim; }
    /// use stormproof::sim::HerdConfig;
    /// let err = HerdConfig { clients: 0, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "clients");
    /// let err = HerdConfig { max_attempts: u32::MAX, ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "max_attempts");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        positive("clients", self.clients.into())?;
        if self.clients > Self::MAX_CLIENTS {
            let problem = format!("must be at most {} (`HerdConfig::MAX_CLIENTS`)", Self::MAX_CLIENTS);
            return Err(ConfigError::new("clients", problem));
        }
        positive("max_attempts", self.max_attempts.into())?;
        // Both are u32: their product fits in a u64.
        let in_all = u64::from(self.clients) * u64::from(self.max_attempts);
        if in_all > Self::MAX_ATTEMPTS_IN_ALL {
            let (clients, max) = (self.clients, Self::MAX_ATTEMPTS_IN_ALL);
            let problem = format!(
                "times `clients` ({clients}) must be at most {max} (`HerdConfig::MAX_ATTEMPTS_IN_ALL`), got {in_all}"
            );
            return Err(ConfigError::new("max_attempts", problem));
        }
        if self.base > self.cap {
            return Err(ConfigError::new(
                "base",
                format!("must not exceed `cap` ({:?}), got {:?}", self.cap, self.base),
            ));
        }
        if self.deadline.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::new("deadline", "must be greater than zero"));
        }
        positive("keys", self.keys.into())?;
        if self.keys > self.clients {
            let problem = format!("must be at most `clients` ({}), got {}", self.clients, self.keys);
            return Err(ConfigError::new("keys", problem));
        }
        if self.keys_down > self.keys {
            let problem = format!("must be at most `keys` ({}), got {}", self.keys, self.keys_down);
            return Err(ConfigError::new("keys_down", problem));
        }
        if self.bucket.is_zero() {
            return Err(ConfigError::new("bucket", "must be greater than zero"));
        }
        match self.model {
            Model::Contention => {}
            Model::Overload { capacity, tick } => {
                positive("capacity", capacity.into())?;
                nonzero("tick", tick)?;
            }
            Model::Brownout { capacity, service_time, timeout } => {
                positive("capacity", capacity.into())?;
                nonzero("service_time", service_time)?;
                nonzero("timeout", timeout)?;
            }
        }
        self.budget.validate().map_err(|e| ConfigError::new("budget", e.to_string()))?;
        self.breaker.validate().map_err(|e| ConfigError::new("breaker", e.to_string()))?;
        if let Some(throttle) = &self.throttle {
            throttle.validate().map_err(|e| ConfigError::new("throttle", e.to_string()))?;
        }
        self.bulkhead.validate().map_err(|e| ConfigError::new("bulkhead", e.to_string()))?;
        stormproof_runtime::backoff::Backoff::validate_factor(self.factor_milli)
            .map_err(|e| ConfigError::new("factor_milli", e.to_string()))?;
        if let Some(limit) = &self.rate_limit {
            limit.validate().map_err(|e| ConfigError::new("rate_limit", e.to_string()))?;
        }
        self.priorities.validate()
    }
}

fn nonzero(field: &'static str, value: Duration) -> Result<(), ConfigError> {
    if value.is_zero() { Err(ConfigError::new(field, "must be greater than zero")) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herd::{Strategy, simulate};

    /// A herd larger than the documented cap is refused by name before
    /// anything is allocated: `u32::MAX` clients would ask for hundreds of GiB.
    #[test]
    fn more_clients_than_the_cap_is_an_error_naming_clients() {
        let at_cap = HerdConfig { clients: HerdConfig::MAX_CLIENTS, ..Default::default() };
        assert_eq!(at_cap.validate(), Ok(()), "the cap itself is taken");
        for clients in [HerdConfig::MAX_CLIENTS + 1, u32::MAX] {
            let cfg = HerdConfig { clients, ..Default::default() };
            let error = cfg.validate().unwrap_err();
            assert_eq!(error.field, "clients", "{clients}");
            assert!(error.to_string().contains("100000"), "{error}");
            for strategy in Strategy::ALL {
                assert_eq!(simulate(&cfg, strategy).unwrap_err(), error, "{clients} {strategy}");
            }
        }
    }

    /// Every attempt's arrival is kept for the report, so a herd's memory
    /// grows with clients x max_attempts: past the cap, an error naming
    /// `max_attempts`, whatever the clients (each within its own cap).
    #[test]
    fn more_attempts_in_all_than_the_cap_is_an_error_naming_max_attempts() {
        for (clients, max_attempts) in [(100_000, 1_000), (1, 100_000_000)] {
            let cfg = HerdConfig { clients, max_attempts, ..Default::default() };
            assert_eq!(cfg.validate(), Ok(()), "{clients} x {max_attempts}: the cap itself is taken");
        }
        for (clients, max_attempts) in [(100_000, 1_001), (1, 100_000_001), (100, u32::MAX)] {
            let cfg = HerdConfig { clients, max_attempts, ..Default::default() };
            let error = cfg.validate().unwrap_err();
            assert_eq!(error.field, "max_attempts", "{clients} x {max_attempts}");
            assert!(error.to_string().contains("100000000"), "{error}");
            for strategy in Strategy::ALL {
                assert_eq!(simulate(&cfg, strategy).unwrap_err(), error, "{clients} x {max_attempts}");
            }
        }
    }
}
