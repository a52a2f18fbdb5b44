//! A gRPC service config's retries (feature `tonic`): the `retryPolicy` of
//! each `methodConfig` and the `retryThrottling`, as gRFC A6 defines them,
//! read from the JSON a gRPC service already has, so that it brings its
//! numbers instead of translating them.
//!
//! A `retryPolicy` becomes a [`PolicyBuilder`] (attempts, backoff and
//! multiplier, full jitter: gRPC waits `random(0, backoff)`) and a
//! classification by its `retryableStatusCodes`
//! ([`RetryPolicy::classify`]); `retryThrottling` becomes a
//! [`RetryThrottling`] budget ([`ServiceConfig::declare_throttling`]).
//!
//! ```
//! # use stormproof_runtime as stormproof;
//! use stormproof::{ErrorClass, Registry, grpc::ServiceConfig};
//! let config = ServiceConfig::from_json(r#"{
//!     "methodConfig": [{
//!         "name": [{ "service": "shop.Inventory" }],
//!         "retryPolicy": {
//!             "maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
//!             "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
//!         }
//!     }],
//!     "retryThrottling": { "maxTokens": 10, "tokenRatio": 0.1 }
//! }"#).unwrap();
//! let retry = config.retry_policy("shop.Inventory", "Reserve").expect("the service's policy");
//! let policy = retry.builder().name("inventory").budget("inventory").build().unwrap();
//! assert_eq!(policy.max_attempts(), 4);
//! assert_eq!(retry.classify(&tonic::Status::unavailable("down")), ErrorClass::Transient);
//! assert_eq!(retry.classify(&tonic::Status::internal("bug")), ErrorClass::Permanent);
//! let registry = Registry::new();
//! config.declare_throttling(&registry, "inventory").unwrap();
//! assert_eq!(registry.budget("inventory").unwrap().available(), 10);
//! ```

use std::time::Duration;

use serde_json::Value;
use tonic::Code;

use crate::backoff::Jitter;
use crate::budget::RetryThrottling;
use crate::classify::{Classify, ErrorClass};
use crate::config::ConfigError;
use crate::errors::tonic::{Pushback, pushback};
use crate::policy::{Policy, PolicyBuilder};
use crate::registry::{Registry, RegistryError};
use crate::rejection::Rejection;

/// The most attempts gRPC makes, whatever `maxAttempts` says (gRFC A6).
const MAX_ATTEMPTS: u32 = 5;

/// The retries of a gRPC service config; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceConfig {
    methods: Vec<MethodConfig>,
    throttling: Option<RetryThrottling>,
}

/// One `methodConfig`: the methods it names and their retry policy.
#[derive(Debug, Clone, PartialEq)]
struct MethodConfig {
    /// `(service, method)`; an empty service names every method of every
    /// service, no method every method of the service.
    names: Vec<(String, Option<String>)>,
    retry: Option<RetryPolicy>,
}

/// A `retryPolicy`, checked against gRFC A6.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included: 2 to 5 (more is read as 5, as
    /// gRPC reads it).
    pub max_attempts: u32,
    /// The first retry waits a random time up to this.
    pub initial_backoff: Duration,
    /// No retry waits longer than this.
    pub max_backoff: Duration,
    /// Each retry's bound is the last one's times this (at least 1 here:
    /// a shrinking backoff is refused).
    pub backoff_multiplier: f64,
    /// The codes that are retried; any other ends the call.
    pub retryable_status_codes: Vec<Code>,
}

impl ServiceConfig {
    /// Reads the retries of a service config; an invalid one is an error
    /// naming the field (and the `methodConfig` it is in), as gRPC would
    /// refuse it.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::grpc::ServiceConfig;
    /// let json = r#"{ "methodConfig": [{ "name": [{}], "retryPolicy": { "maxAttempts": 1 } }] }"#;
    /// let err = ServiceConfig::from_json(json).unwrap_err();
    /// assert_eq!(err.field, "maxAttempts");
    /// assert!(err.problem.contains("methodConfig[0]"), "{err}");
    /// ```
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        let root: Value = serde_json::from_str(json)
            .map_err(|e| ConfigError::new("serviceConfig", format!("is not JSON: {e}")))?;
        let root =
            root.as_object().ok_or_else(|| ConfigError::new("serviceConfig", "must be a JSON object"))?;
        let methods = match root.get("methodConfig") {
            None => Vec::new(),
            Some(Value::Array(list)) => {
                list.iter().enumerate().map(|(i, m)| method_config(i, m)).collect::<Result<_, _>>()?
            }
            Some(_) => return Err(ConfigError::new("methodConfig", "must be a list")),
        };
        let throttling = root.get("retryThrottling").map(retry_throttling).transpose()?;
        Ok(ServiceConfig { methods, throttling })
    }

    /// The retry policy of `service`'s `method`, as gRPC picks it: the
    /// config naming that method, else the one naming its service, else the
    /// default (an empty name); `None` when none applies or the one that
    /// does has no `retryPolicy` (no retries).
    pub fn retry_policy(&self, service: &str, method: &str) -> Option<&RetryPolicy> {
        // How closely a name matches: 0 the method, 1 its service, 2 the default.
        let rank = |(s, m): &(String, Option<String>)| match m {
            Some(m) if s == service && m == method => Some(0),
            None if s == service => Some(1),
            None if s.is_empty() => Some(2),
            _ => None,
        };
        let best = |config: &MethodConfig| config.names.iter().filter_map(rank).min();
        let chosen = self
            .methods
            .iter()
            .filter_map(|config| best(config).map(|r| (r, config)))
            .min_by_key(|(r, _)| *r);
        chosen.and_then(|(_, config)| config.retry.as_ref())
    }

    /// The `retryThrottling`, if the config has one.
    pub fn retry_throttling(&self) -> Option<RetryThrottling> {
        self.throttling
    }

    /// Declares the `retryThrottling` as the budget `name` in `registry`
    /// (the budget the service's policies name); nothing without one.
    pub fn declare_throttling(&self, registry: &Registry, name: &str) -> Result<(), RegistryError> {
        match self.throttling {
            Some(throttling) => registry.declare_budget(name, throttling),
            None => Ok(()),
        }
    }
}

impl RetryPolicy {
    /// A policy builder with these attempts and this backoff, full jitter
    /// (gRPC waits `random(0, bound)`); name it, and give it the budget the
    /// `retryThrottling` is declared as.
    pub fn builder(&self) -> PolicyBuilder {
        Policy::builder()
            .max_attempts(self.max_attempts)
            .base(self.initial_backoff)
            .cap(self.max_backoff)
            .factor(self.backoff_multiplier)
            .jitter(Jitter::Full)
    }

    /// The class of `status` under this policy: a code it retries is
    /// transient (a conflict for `ABORTED`), unless the server's pushback
    /// says when to come back (throttled) or not to (permanent); any other
    /// code is permanent. A status carrying the loop's own rejection keeps
    /// that rejection's class. For `classify = path` in the attribute, or
    /// `Policy::classify`, with the config kept where the function finds it.
    pub fn classify(&self, status: &tonic::Status) -> ErrorClass {
        if let Some(rejection) = std::error::Error::source(status).and_then(|e| e.downcast_ref::<Rejection>())
        {
            return rejection.classify();
        }
        if !self.retryable_status_codes.contains(&status.code()) {
            return ErrorClass::Permanent;
        }
        match (pushback(status), status.code()) {
            (Pushback::DoNotRetry, _) => ErrorClass::Permanent,
            (Pushback::After(Some(after)), _) => ErrorClass::Throttled { retry_after: Some(after) },
            (Pushback::After(None), Code::Aborted) => ErrorClass::Conflict,
            (Pushback::After(None), Code::ResourceExhausted) => ErrorClass::Throttled { retry_after: None },
            (Pushback::After(None), _) => ErrorClass::Transient,
        }
    }
}

fn method_config(index: usize, value: &Value) -> Result<MethodConfig, ConfigError> {
    let at = |field: &'static str, problem: String| {
        ConfigError::new(field, format!("in methodConfig[{index}]: {problem}"))
    };
    let object = value.as_object().ok_or_else(|| at("methodConfig", "must be an object".into()))?;
    let mut names = Vec::new();
    for name in object.get("name").and_then(Value::as_array).into_iter().flatten() {
        let text = |key: &str| name.get(key).and_then(Value::as_str).map(str::to_owned);
        let service = text("service").unwrap_or_default();
        let method = text("method").filter(|m| !m.is_empty());
        if service.is_empty() && method.is_some() {
            return Err(at("name", "a method needs its service".into()));
        }
        names.push((service, method));
    }
    let retry = match object.get("retryPolicy") {
        None => None,
        Some(policy) => Some(retry_policy(policy).map_err(|e| at(e.field, e.problem))?),
    };
    Ok(MethodConfig { names, retry })
}

fn retry_policy(value: &Value) -> Result<RetryPolicy, ConfigError> {
    let max_attempts = value.get("maxAttempts").and_then(Value::as_u64).filter(|n| *n >= 2);
    let max_attempts =
        max_attempts.ok_or_else(|| ConfigError::new("maxAttempts", "must be an integer of 2 or more"))?;
    let initial_backoff = duration(value, "initialBackoff")?;
    let max_backoff = duration(value, "maxBackoff")?;
    let multiplier =
        value.get("backoffMultiplier").and_then(Value::as_f64).filter(|m| m.is_finite() && *m >= 1.0);
    let backoff_multiplier =
        multiplier.ok_or_else(|| ConfigError::new("backoffMultiplier", "must be a number of at least 1"))?;
    let codes = value.get("retryableStatusCodes").and_then(Value::as_array);
    let codes = codes.filter(|codes| !codes.is_empty()).ok_or_else(|| {
        ConfigError::new("retryableStatusCodes", "must list at least one code, like [\"UNAVAILABLE\"]")
    })?;
    let retryable_status_codes = codes.iter().map(code).collect::<Result<_, _>>()?;
    Ok(RetryPolicy {
        max_attempts: u32::try_from(max_attempts).unwrap_or(MAX_ATTEMPTS).min(MAX_ATTEMPTS),
        initial_backoff,
        max_backoff,
        backoff_multiplier,
        retryable_status_codes,
    })
}

fn retry_throttling(value: &Value) -> Result<RetryThrottling, ConfigError> {
    let max_tokens = value.get("maxTokens").and_then(Value::as_u64);
    let max_tokens =
        max_tokens.ok_or_else(|| ConfigError::new("maxTokens", "must be an integer in 1..=1000"))?;
    let token_ratio = value.get("tokenRatio").and_then(Value::as_f64);
    let token_ratio =
        token_ratio.ok_or_else(|| ConfigError::new("tokenRatio", "must be a number of at least 0.001"))?;
    let throttling =
        RetryThrottling { max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX), token_ratio };
    throttling.validate().map_err(|e| match e.field {
        "max_tokens" => ConfigError::new("maxTokens", e.problem),
        _ => ConfigError::new("tokenRatio", e.problem),
    })?;
    Ok(throttling)
}

/// A protobuf JSON duration: decimal seconds and an `s`, like `"0.1s"`;
/// above zero.
fn duration(value: &Value, field: &'static str) -> Result<Duration, ConfigError> {
    let text = value.get(field).and_then(Value::as_str).unwrap_or_default();
    let seconds = text.strip_suffix('s').and_then(|s| s.parse::<f64>().ok());
    seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| {
            ConfigError::new(field, format!("must be a duration above zero, like \"0.1s\", got {text:?}"))
        })
}

/// A status code by its name (`"UNAVAILABLE"`) or number (`14`).
fn code(value: &Value) -> Result<Code, ConfigError> {
    let unknown = || ConfigError::new("retryableStatusCodes", format!("{value} is not a gRPC status code"));
    if let Some(n) = value.as_i64() {
        let n = i32::try_from(n).map_err(|_| unknown())?;
        let code = Code::from_i32(n);
        return if code == Code::Unknown && n != 2 { Err(unknown()) } else { Ok(code) };
    }
    let name = value.as_str().ok_or_else(unknown)?;
    (0..=16).map(Code::from_i32).find(|code| screaming(*code) == name).ok_or_else(unknown)
}

/// A code's name as a service config spells it: `DEADLINE_EXCEEDED`.
fn screaming(code: Code) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_service_config_name() {
        assert_eq!(screaming(Code::Ok), "OK");
        assert_eq!(screaming(Code::DeadlineExceeded), "DEADLINE_EXCEEDED");
        assert_eq!(screaming(Code::ResourceExhausted), "RESOURCE_EXHAUSTED");
        assert_eq!(code(&Value::from("UNAVAILABLE")).unwrap(), Code::Unavailable);
        assert_eq!(code(&Value::from(14)).unwrap(), Code::Unavailable);
        assert_eq!(code(&Value::from(2)).unwrap(), Code::Unknown);
        assert!(code(&Value::from(99)).is_err());
        assert!(code(&Value::from("UNAVAILABLE_SOMETIMES")).is_err());
    }
}
