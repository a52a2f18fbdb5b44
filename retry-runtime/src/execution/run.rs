//! `Policy::run` and `run_with_key`: the retry loop driven for a closure.

use std::future::Future;
use std::sync::Arc;

use super::{Execution, Kept, Step};
use crate::error::ResilientError;
use crate::policy::Policy;

impl Policy {
    /// Runs `op` (one call per attempt) under this policy.
    ///
    /// Returns the first success, or the last error an attempt produced, or
    /// a [`Rejection`](crate::Rejection) converted into `E` when no attempt
    /// could run or the deadline cut one short.
    ///
    /// The last error is kept while the call waits for its next attempt, so
    /// this future is `Send` when `op`'s futures and `E` are.
    pub async fn run<T, E, F, Fut>(&self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: ResilientError,
    {
        drive(self.execution(None, Kept::default()), op).await
    }

    /// [`run`](Self::run) with an idempotency key, which every attempt reads
    /// through [`idempotency_key()`](crate::idempotency_key).
    pub async fn run_with_key<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: ResilientError,
    {
        drive(self.execution(Some(key_of(&key)), Kept::default()), op).await
    }

    /// Starts one call: the state of its retry loop. `last` keeps the last
    /// error across waits (see [`LastError`](super::LastError)).
    #[doc(hidden)]
    #[inline(always)]
    pub fn execution<S>(&self, key: Option<Arc<str>>, last: S) -> Execution<'_, S> {
        Execution::new(self, key, last)
    }
}

async fn drive<T, E, F, Fut>(mut execution: Execution<'_, Kept<E>>, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: ResilientError,
{
    loop {
        if let Step::Done(result) = execution.attempt_with(&mut op).await {
            return result;
        }
    }
}

/// Formats an idempotency key once per call.
pub(crate) fn key_of(value: &(impl std::fmt::Display + ?Sized)) -> Arc<str> {
    Arc::from(value.to_string())
}
