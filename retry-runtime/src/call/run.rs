//! `Policy::run` and `run_with_key`, and the same with a classification
//! function: the retry loop driven for a closure.

use std::future::Future;
use std::sync::Arc;

use super::key::key_of;
use super::made_on_poll::MadeOnPoll;
use super::{Call, CallTarget, Kept, KeyedGuards, Step, Target, Unkeyed};
use crate::classify::{Classify, ErrorClass};
use crate::error::{ByTraits, ClassifyWith, ErrorHandling, RunError};
use crate::errors::Error;
use crate::guards::{AnyShape, Named, Unnamed};
use crate::policy::{LoopGuards, Policy};
use crate::rejection::Rejection;

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
    pub async fn run<T, E, F, Fut>(&self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        // A policy with a breaker per key, run without one, takes the
        // empty key's as its call starts (see `call::start`).
        drive(self, ByTraits, op).await
    }

    /// [`run`](Self::run) with `key` choosing the circuit breaker, for a
    /// policy with a breaker per key
    /// ([`PolicyBuilder::breaker_per`](crate::PolicyBuilder::breaker_per)):
    /// a tenant, a host, a shard. The key's breaker is found once, as the
    /// call starts (one lock and one hash lookup). A policy without a
    /// breaker per key ignores it.
    pub async fn run_per<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        let keyed = KeyedGuards::of_display(self, &key);
        drive(Target::per_key(self, &keyed), ByTraits, op).await
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
    pub async fn run_or_else<T, E, F, Fut, G, GFut>(&self, op: F, fallback: G) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
        G: FnOnce(E) -> GFut,
        GFut: Future<Output = Result<T, E>>,
    {
        match self.run(op).await {
            Err(error) => {
                crate::observe::fallback(self.operation());
                fallback(error).await
            }
            done => done,
        }
    }

    /// [`run`](Self::run) with an idempotency key, which every attempt reads
    /// through [`idempotency_key()`](crate::idempotency_key).
    ///
    /// Read it in the future `op` returns: it answers there on every path.
    /// (`op` itself is called when its attempt starts, in the attempt's
    /// scope, so it sees the key too, except under a hedging policy, whose
    /// round calls it for each racer before that racer runs.)
    pub async fn run_with_key<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        drive_keyed(self, key_of(&key), ByTraits, op).await
    }

    /// [`run_per`](Self::run_per) with an idempotency key as well: `per`
    /// chooses the breaker, `key` is what every attempt reads through
    /// [`idempotency_key()`](crate::idempotency_key) (the attribute's `per
    /// = tenant, key = order_id`).
    pub async fn run_per_with_key<P, K, T, E, F, Fut>(&self, per: P, key: K, op: F) -> Result<T, E>
    where
        P: std::fmt::Display,
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: RunError,
    {
        let keyed = KeyedGuards::of_display(self, &per);
        drive_keyed(Target::per_key(self, &keyed), key_of(&key), ByTraits, op).await
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

impl<H> Classified<'_, H> {
    /// [`Policy::run`], classified by the function.
    pub async fn run<T, E, F, Fut>(&self, op: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E> + Copy,
    {
        drive(self.policy, self.handling, op).await
    }

    /// [`Policy::run_per`], classified by the function.
    pub async fn run_per<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E> + Copy,
    {
        let keyed = KeyedGuards::of_display(self.policy, &key);
        drive(Target::per_key(self.policy, &keyed), self.handling, op).await
    }

    /// [`Policy::run_with_key`], classified by the function.
    pub async fn run_with_key<K, T, E, F, Fut>(&self, key: K, op: F) -> Result<T, E>
    where
        K: std::fmt::Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E> + Copy,
    {
        drive_keyed(self.policy, key_of(&key), self.handling, op).await
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

    fn stopped(&self, error: Error<X>, stopped: crate::stop::Stopped) -> Error<X> {
        error.mark_stopped(stopped)
    }
}

/// The call's state is made here, in the future's running state, and not
/// by the caller: before its first poll the future holds only the
/// arguments, and is that much cheaper to move into place.
///
/// Each attempt is made on its first poll, once admitted (see
/// `made_on_poll`): `op` is never called for an attempt the guards refuse.
async fn drive<'p, T, E, H, F, Fut>(target: impl CallTarget<'p>, handling: H, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    H: ErrorHandling<E> + Copy,
{
    let policy = target.policy();
    // The call, built when it needs to be: a plain call's first attempt runs without it.
    let mut call: Option<Call<'_, Kept<E>, H>> = None;
    loop {
        let parts = Unkeyed(|| (Kept::default(), handling));
        // A closure of its own around `op`: `&mut op` would go through the
        // standard library's `FnOnce for &mut F` shim, which LLVM stops
        // inlining once the attempt's poll grows.
        #[allow(clippy::redundant_closure)]
        let step = 'step: {
            if policy.compiled_settings().hedge.is_some() {
                // Boxed: the round would make every call's future larger (and
                // costlier to move) for a path few policies take.
                break 'step Box::pin(Call::next_hedged(&mut call, target, parts, || op())).await;
            }
            let attempt = MadeOnPoll::new(|| op());
            // A plain first attempt, seeing the guards as the attribute
            // would when they are at most a breaker and a budget.
            macro_rules! plain_as {
                ($shape:ty) => {
                    if let Some(plain) = Call::plain_as::<_, $shape>(&call, target, &parts) {
                        break 'step match plain.attempt(attempt).await {
                            Ok(value) => return Ok(value),
                            Err(failure) => Call::after_plain(&mut call, target, parts, failure),
                        };
                    }
                };
            }
            match policy.loop_guards() {
                LoopGuards::Unguarded => plain_as!((Unnamed, Unnamed, Unnamed, Unnamed, Unnamed)),
                LoopGuards::Breaker => plain_as!((Unnamed, Named, Unnamed, Unnamed, Unnamed)),
                LoopGuards::Budget => plain_as!((Unnamed, Unnamed, Unnamed, Unnamed, Named)),
                LoopGuards::BreakerBudget => plain_as!((Unnamed, Named, Unnamed, Unnamed, Named)),
                LoopGuards::Other => plain_as!(AnyShape),
                // Its plain first attempt raced with the timer of its attempt
                // timeout and deadline, every slot looked at, and polled out
                // of line: inlined (or once per shape), it grew the loop's
                // poll past what LLVM inlines into the caller's, which every
                // call of `run` paid for.
                LoopGuards::Timed => {
                    if let Some(plain) = Call::plain_timed_as::<_, AnyShape>(&call, target, &parts) {
                        break 'step match (OutOfLine { future: plain.attempt(attempt) }).await {
                            Ok(value) => return Ok(value),
                            Err(failure) => Call::after_plain(&mut call, target, parts, failure),
                        };
                    }
                }
            }
            Call::next(&mut call, target, parts, attempt).await
        };
        if let Step::Done(result) = step {
            return result;
        }
    }
}

pin_project_lite::pin_project! {
    /// A future polled through a function of its own, never inlined.
    struct OutOfLine<F> {
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for OutOfLine<F> {
    type Output = F::Output;

    #[inline(never)]
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

/// [`drive`] for a call with a key, which is never plain: its call is
/// built at its first attempt.
async fn drive_keyed<'p, T, E, H, F, Fut>(
    target: impl CallTarget<'p>,
    key: Arc<str>,
    handling: H,
    mut op: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    H: ErrorHandling<E> + Copy,
{
    let policy = target.policy();
    let mut call = Call::new(policy, Some(key), Kept::default(), handling).with_target(target);
    loop {
        #[allow(clippy::redundant_closure)] // see `drive`
        let step = if policy.compiled_settings().hedge.is_some() {
            Box::pin(call.attempt_hedged(|| op())).await
        } else {
            call.attempt(MadeOnPoll::new(|| op())).await
        };
        if let Step::Done(result) = step {
            return result;
        }
    }
}
