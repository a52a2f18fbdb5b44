//! The one error type for invalid configuration, and the settings a
//! registry keeps for the fleet it joined.
//!
//! A fleet's settings live here, at the bottom, rather than in `fleet`:
//! the registry holds the ones it joined with (a reload of the
//! configuration file checks against them), and `fleet` builds on the
//! registry, so the type must sit below both.

#[cfg(feature = "fleet")]
pub(crate) mod fleet;

/// A configuration value was rejected; `field` names it.
///
/// Returned by [`PolicyBuilder::build`](crate::PolicyBuilder::build) and by
/// every guard constructor, so a typo in a setting is an `Err` you can read,
/// never a panic or a silently clamped value.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::Policy;
/// let err = Policy::builder().max_attempts(0).build().unwrap_err();
/// assert_eq!(err.field, "max_attempts");
/// assert_eq!(err.to_string(), "invalid `max_attempts`: must be in 1..=100, got 0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The name of the rejected setting, as the builder or struct spells it.
    pub field: &'static str,
    /// What is wrong with it, in one plain sentence fragment.
    pub problem: String,
}

impl ConfigError {
    /// The error for `field`, saying `problem`: for code that checks
    /// settings of its own the way this library does (the simulator's).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// let error = stormproof::ConfigError::new("clients", "must be greater than zero");
    /// assert_eq!(error.to_string(), "invalid `clients`: must be greater than zero");
    /// ```
    pub fn new(field: &'static str, problem: impl Into<String>) -> Self {
        ConfigError { field, problem: problem.into() }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid `{}`: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// Rejects zero for a count that must be positive.
pub(crate) fn positive(field: &'static str, value: u64) -> Result<(), ConfigError> {
    if value == 0 { Err(ConfigError::new(field, "must be greater than zero")) } else { Ok(()) }
}
