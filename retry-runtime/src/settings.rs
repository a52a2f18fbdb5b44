//! The retry settings of an operation, and the settings one call runs on.

use std::sync::Arc;
use std::time::Duration;

use crate::backoff::Backoff;

/// The retry settings of an operation: what the attribute's arguments (or
/// the builder) set, and what a configuration file's `[operations."..."]`
/// table may override.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The backoff curve.
    pub backoff: Backoff,
    /// The per-attempt timeout, if any.
    pub attempt_timeout: Option<Duration>,
    /// The overall deadline of a call, if any.
    pub deadline: Option<Duration>,
}

/// The settings one call runs on: the policy's own, or a registry's override.
#[derive(Debug)]
pub(crate) enum SettingsRef<'p> {
    Compiled(&'p Settings),
    Overridden(Arc<Settings>),
}

impl std::ops::Deref for SettingsRef<'_> {
    type Target = Settings;

    #[inline]
    fn deref(&self) -> &Settings {
        match self {
            SettingsRef::Compiled(settings) => settings,
            SettingsRef::Overridden(settings) => settings,
        }
    }
}
