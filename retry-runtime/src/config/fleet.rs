//! A fleet's settings and why joining one can fail.

use std::time::Duration;

use super::ConfigError;

/// How a registry joins a fleet; every field but the guards has a default.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use std::time::Duration;
/// use stormproof::fleet::FleetConfig;
/// let config = FleetConfig {
///     url: "redis://10.0.0.5:6379/".into(),
///     prefix: "shop".into(),
///     breakers: vec!["payment".into()],
///     budgets: vec!["payment".into()],
///     ..Default::default()
/// };
/// assert_eq!((config.sync_every, config.store_timeout), (Duration::from_millis(100), Duration::from_millis(50)));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetConfig {
    /// The Redis server, as the `redis` crate reads it
    /// (`redis://[user:password@]host[:port][/db]`). Default
    /// `redis://127.0.0.1:6379/`. No TLS.
    pub url: String,
    /// The namespace of every key (`PREFIX:breaker:NAME`, ..., the guard's
    /// name with `%` and `:` escaped as `%25` and `%3A`): replicas that
    /// share a prefix share guards of the same name. Default `stormproof`.
    pub prefix: String,
    /// How often a replica reports and hears the fleet's verdicts: one
    /// round trip (one script) per period. Default 100 ms.
    pub sync_every: Duration,
    /// The longest a flush may take before the replica falls back to its
    /// local state. Default 50 ms.
    pub store_timeout: Duration,
    /// Retry tokens a replica asks for at once (it tops up when below half).
    /// Default 20.
    pub lease_size: u32,
    /// The breakers shared by the fleet: declared in the registry, with
    /// `success_threshold <= half_open_max_calls`, each named once. Default none.
    pub breakers: Vec<String>,
    /// The budgets shared by the fleet: declared ratio budgets, each named
    /// once. Default none.
    pub budgets: Vec<String>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            url: "redis://127.0.0.1:6379/".into(),
            prefix: "stormproof".into(),
            sync_every: Duration::from_millis(100),
            store_timeout: Duration::from_millis(50),
            lease_size: 20,
            breakers: Vec::new(),
            budgets: Vec::new(),
        }
    }
}

impl FleetConfig {
    /// Checks the settings that do not depend on the registry; the error
    /// names the field.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// use stormproof::fleet::FleetConfig;
    /// let err = FleetConfig { prefix: "my app".into(), ..Default::default() }.validate().unwrap_err();
    /// assert_eq!(err.field, "prefix");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every invalid setting, in the order of the fields (a configuration
    /// file reports them all at once).
    pub(crate) fn problems(&self) -> Vec<ConfigError> {
        let mut problems = Vec::new();
        if self.prefix.is_empty() || self.prefix.contains(|c: char| c.is_whitespace() || c.is_control()) {
            problems.push(ConfigError::new(
                "prefix",
                format!("must be a non-empty name without spaces, got {:?}", self.prefix),
            ));
        }
        if self.sync_every < Duration::from_millis(1) {
            problems.push(ConfigError::new("sync_every", "must be at least 1 ms"));
        }
        if self.store_timeout < Duration::from_millis(1) {
            problems.push(ConfigError::new("store_timeout", "must be at least 1 ms"));
        }
        if self.lease_size == 0 {
            problems.push(ConfigError::new("lease_size", "must be greater than zero"));
        }
        if let Some(problem) = url_problem(&self.url) {
            problems.push(ConfigError::new("url", format!("is not a Redis URL ({problem})")));
        }
        // Synced twice per flush under one record of the replica's, a
        // guard would count once but lease twice (the second request reads
        // as a repeat of the first) or lose the probe slots it was granted.
        for (field, names) in [("breakers", &self.breakers), ("budgets", &self.budgets)] {
            if let Some(name) =
                names.iter().enumerate().find_map(|(i, n)| names[..i].contains(n).then_some(n))
            {
                problems.push(ConfigError::new(field, format!("names `{name}` twice: list each guard once")));
            }
        }
        problems
    }
}

/// The schemes of a Redis URL without TLS, as the `redis` crate reads them.
const SCHEMES: [&str; 3] = ["redis://", "redis+unix://", "unix://"];

/// What is wrong with `url` as far as the core can tell without a Redis
/// client: its scheme and that it names a place. The fleet's store parses
/// the whole URL with the `redis` crate when it joins, and a URL it
/// refuses is the same `url` error there.
fn url_problem(url: &str) -> Option<String> {
    let Some(rest) = SCHEMES.iter().find_map(|scheme| url.strip_prefix(scheme)) else {
        return Some(format!("it must start with `redis://` or `unix://` (no TLS), got {url:?}"));
    };
    rest.trim_start_matches('/').is_empty().then(|| format!("it names no host or socket: {url:?}"))
}

/// Why a registry could not join a fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetError {
    /// A setting is invalid; the inner error names it.
    InvalidConfig(ConfigError),
    /// A guard the fleet should share is not declared in the registry.
    NotDeclared {
        /// `breaker` or `budget`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// A guard cannot be shared as it is configured.
    Unsupported {
        /// `breaker` or `budget`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// Why, and what to change.
        why: String,
    },
    /// The registry already belongs to a fleet (one background task per
    /// registry), or its `Fleet` was dropped and its task has not ended yet.
    AlreadyJoined,
    /// Not called inside a tokio runtime, which the background task needs.
    NoRuntime,
    /// Called inside a tokio runtime built without IO (no `enable_io()` nor
    /// `enable_all()`), on which the background task could not reach Redis.
    RuntimeWithoutIo,
    /// Called inside a tokio runtime built without timers (no
    /// `enable_time()` nor `enable_all()`), on which the background task
    /// could not tick.
    RuntimeWithoutTime,
}

impl std::fmt::Display for FleetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FleetError::InvalidConfig(error) => write!(f, "cannot join the fleet: {error}"),
            FleetError::NotDeclared { kind, name } => write!(
                f,
                "cannot share {kind} `{name}`: it is not declared in this registry (declare it before joining the fleet)"
            ),
            FleetError::Unsupported { kind, name, why } => write!(f, "cannot share {kind} `{name}`: {why}"),
            FleetError::AlreadyJoined => {
                f.write_str(
                "this registry already belongs to a fleet: leave it first with `Fleet::leave().await` (a dropped `Fleet` leaves in the background, after its last flush)",
            )
            }
            FleetError::NoRuntime => {
                f.write_str("joining a fleet starts a background task: call it inside a tokio runtime")
            }
            FleetError::RuntimeWithoutIo => f.write_str(
                "joining a fleet connects to Redis from the current tokio runtime, which has IO disabled: build it with `enable_io()` or `enable_all()` (as `#[tokio::main]` does)",
            ),
            FleetError::RuntimeWithoutTime => f.write_str(
                "joining a fleet runs a background task on the current tokio runtime's timers, which are disabled: build it with `enable_time()` or `enable_all()` (as `#[tokio::main]` does)",
            ),
        }
    }
}

impl std::error::Error for FleetError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_name_their_field() {
        for (config, field) in [
            (FleetConfig { prefix: String::new(), ..Default::default() }, "prefix"),
            (FleetConfig { sync_every: Duration::ZERO, ..Default::default() }, "sync_every"),
            (FleetConfig { store_timeout: Duration::from_micros(10), ..Default::default() }, "store_timeout"),
            (FleetConfig { lease_size: 0, ..Default::default() }, "lease_size"),
            (FleetConfig { url: "http://example.invalid".into(), ..Default::default() }, "url"),
            (FleetConfig { url: "rediss://example.invalid".into(), ..Default::default() }, "url"),
            (FleetConfig { url: "redis://".into(), ..Default::default() }, "url"),
        ] {
            assert_eq!(config.validate().unwrap_err().field, field);
        }
    }

    /// A guard listed twice would be synced twice per flush under one
    /// record of the replica's: the second lease request of a budget reads
    /// as a repeat of the first and is answered the same tokens again (the
    /// replica holds twice what the fleet counts), and the second verdict
    /// of a breaker takes back the probe slots the first granted.
    #[test]
    fn a_guard_listed_twice_is_an_error_naming_the_list() {
        let twice = || vec!["dep".to_owned(), "other".to_owned(), "dep".to_owned()];
        for (config, field) in [
            (FleetConfig { breakers: twice(), ..Default::default() }, "breakers"),
            (FleetConfig { budgets: twice(), ..Default::default() }, "budgets"),
        ] {
            let error = config.validate().unwrap_err();
            assert_eq!(error.field, field);
            assert!(error.problem.contains("`dep` twice"), "{error}");
        }
        let both =
            FleetConfig { breakers: vec!["dep".into()], budgets: vec!["dep".into()], ..Default::default() };
        assert!(both.validate().is_ok(), "a breaker and a budget may share a name");
    }
}
