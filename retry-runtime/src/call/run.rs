//! `Policy::run` and `run_with_key`, and the same with a classification
//! function: the retry loop driven for a closure.

use std::future::Future;
use std::sync::Arc;

use super::Call;
use super::key::key_of;
use super::run_loop::{NoKey, Run};
use super::run_or_else::RunOrElse;
use super::traits_of::TraitsOf;
use crate::classify::{Classify, ErrorClass};
use crate::error::{ClassifyWith, ErrorHandling, RunError};
use crate::errors::Error;
use crate::policy::Policy;
use crate::rejection::Rejection;
use crate::stop::Stopped;

impl Policy {
    /// Runs `op` (one call per attempt) under this policy.
    ///
    /// `op` is called only for an attempt the guards admitted (an open
    /// breaker's refusal never calls it), when that attempt starts.
    ///
    /// Returns the first success, or the last error an attempt produced, or
    /// a [`Rejection`] converted into `E` when no attempt
    /// could run or the deadline cut one short.
    ///
    /// The last error is kept while the call waits for its next attempt, so
    /// this future is `Send` when `op`'s futures and `E` are.
    ///
    /// With hedging ([`PolicyBuilder::hedge`](crate::PolicyBuilder::hedge)),
    /// `op` is called again for each hedge while the earlier attempts still
    /// run: their futures run side by side.
    ///
    /// `E` must be [`RunError`]: classified ([`Classify`]) and able to
    /// carry a [`Rejection`]. An error type that is not is one compile
    /// error here, saying the ways out.
    #[inline(always)]
    pub fn run<T, E, F, Fut>(&self, op: F) -> Run<'_, &Policy, NoKey, TraitsOf<E>, F, Fut, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        // `E`'s traits are taken here, as functions, so that the future
        // needs no bound on `E` (see `call::run_loop`). A policy with a
        // breaker per key, run without one, takes the empty key's as its
        // call starts (see `call::start`).
        Run::new(self, NoKey, TraitsOf::new(), op)
    }

    /// [`run`](Self::run), then `fallback` with the final error, if any:
    /// what it returns is the call's result (the attribute's `fallback = path`).
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{Policy, Rejection};
    /// let policy = Policy::builder().max_attempts(2).build().unwrap();
    /// let price = policy
    ///     .run_or_else(
    ///         || async { Err::<u32, std::io::Error>(std::io::ErrorKind::ConnectionReset.into()) },
    ///         |_error| async { Ok(100) }, // the cached price
    ///     )
    ///     .await;
    /// assert_eq!(price.unwrap(), 100);
    /// # }
    /// ```
    pub fn run_or_else<T, E, F, Fut, G, GFut>(&self, op: F, fallback: G) -> RunOrElse<'_, F, Fut, E, G, GFut>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
        G: FnOnce(E) -> GFut,
        GFut: Future<Output = Result<T, E>>,
    {
        RunOrElse::new(self, self.run(op), fallback)
    }

    /// [`run`](Self::run) with an idempotency key, which every attempt reads
    /// through [`idempotency_key()`](crate::idempotency_key).
    ///
    /// Read it in the future `op` returns: it answers there on every path.
    /// (`op` itself is called when its attempt starts, in the attempt's
    /// scope, so it sees the key too, except under a hedging policy, whose
    /// round calls it for each racer before that racer runs.)
    // Inlined: out of line, the future would be returned through memory
    // and copied into the caller's.
    #[inline(always)]
    pub fn run_with_key<K, T, E, F, Fut>(
        &self,
        key: K,
        op: F,
    ) -> Run<'_, &Policy, Option<Arc<str>>, TraitsOf<E>, F, Fut, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        Run::new(self, Some(key_of(&key)), TraitsOf::new(), op)
    }

    /// This policy with errors classified by `classify` instead of the
    /// [`Classify`] trait (the attribute's `classify = path`), for an error
    /// type that can carry a [`Rejection`] (`From<Rejection>`). An attempt
    /// timeout is transient whatever `classify` says of the error it
    /// becomes: the function is asked only of errors the attempts returned.
    ///
    /// ```
    /// # use stormproof_runtime as stormproof;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use stormproof::{ErrorClass, Policy, Rejection};
    ///
    /// #[derive(Debug)]
    /// enum DbError { Deadlock, Missing, Rejected(Rejection) }
    /// impl From<Rejection> for DbError {
    ///     fn from(r: Rejection) -> Self { DbError::Rejected(r) }
    /// }
    /// fn classify(e: &DbError) -> ErrorClass {
    ///     match e { DbError::Deadlock => ErrorClass::Conflict, _ => ErrorClass::Permanent }
    /// }
    ///
    /// let policy = Policy::builder().build().unwrap();
    /// let mut tries = 0;
    /// let result = policy.classify(classify).run(|| { tries += 1; async { Err::<(), _>(DbError::Missing) } }).await;
    /// assert!(matches!(result, Err(DbError::Missing)));
    /// assert_eq!(tries, 1, "permanent: not retried");
    /// # }
    /// ```
    pub fn classify<E: From<Rejection>>(
        &self,
        classify: fn(&E) -> ErrorClass,
    ) -> Classified<'_, ClassifyWith<E>> {
        Classified { policy: self, handling: ClassifyWith::new(classify, E::from as fn(Rejection) -> E) }
    }

    /// This policy for calls returning [`Error<X>`](crate::Error), with the
    /// attempt's `X` classified by `classify` (for a foreign `X` that is not
    /// [`Classify`]); a rejection is classified as it always is.
    pub fn classify_inner<X>(&self, classify: fn(&X) -> ErrorClass) -> Classified<'_, ClassifyInner<X>> {
        Classified { policy: self, handling: ClassifyInner { classify } }
    }

    /// One call of this policy: the state of its retry loop, driven with
    /// [`Call::attempt`]. `last` keeps the last error across waits (see
    /// [`LastError`](super::LastError)); `handling` classifies errors and
    /// makes rejections into them.
    #[doc(hidden)]
    pub fn call<S, H>(&self, key: Option<Arc<str>>, last: S, handling: H) -> Call<'_, S, H> {
        Call::new(self, key, last, handling)
    }
}

/// A [`Policy`] with a classification function; made by
/// [`Policy::classify`] or [`Policy::classify_inner`].
#[derive(Debug, Clone, Copy)]
pub struct Classified<'p, H> {
    policy: &'p Policy,
    handling: H,
}

impl<'p, H> Classified<'p, H> {
    /// The policy.
    pub(super) fn policy(&self) -> &'p Policy {
        self.policy
    }

    /// Its classification.
    pub(super) fn handling(&self) -> H
    where
        H: Copy,
    {
        self.handling
    }

    /// [`Policy::run`], classified by the function.
    pub fn run<T, E, F, Fut>(&self, op: F) -> Run<'_, &Policy, NoKey, H, F, Fut, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E> + Copy,
    {
        Run::new(self.policy, NoKey, self.handling, op)
    }

    /// [`Policy::run_with_key`], classified by the function.
    pub fn run_with_key<K, T, E, F, Fut>(
        &self,
        key: K,
        op: F,
    ) -> Run<'_, &Policy, Option<Arc<str>>, H, F, Fut, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E> + Copy,
    {
        Run::new(self.policy, Some(key_of(&key)), self.handling, op)
    }
}

/// Classifies the `X` of an [`Error<X>`] with a function.
pub struct ClassifyInner<X> {
    classify: fn(&X) -> ErrorClass,
}

impl<X> Clone for ClassifyInner<X> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<X> Copy for ClassifyInner<X> {}

impl<X> std::fmt::Debug for ClassifyInner<X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassifyInner").finish_non_exhaustive()
    }
}

impl<X> ErrorHandling<Error<X>> for ClassifyInner<X> {
    fn class(&self, error: &Error<X>) -> ErrorClass {
        match error {
            Error::Inner(inner) | Error::Stopped(inner, _) => (self.classify)(inner),
            Error::Rejected(rejection) => rejection.classify(),
        }
    }

    fn reject(&self, rejection: Rejection) -> Error<X> {
        Error::Rejected(rejection)
    }

    fn stopped(&self, error: Error<X>, stopped: Stopped) -> Error<X> {
        error.mark_stopped(stopped)
    }
}
