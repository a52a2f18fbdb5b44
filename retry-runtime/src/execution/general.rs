//! The general path's attempt, for what the direct path does not run (see
//! the module's docs): admitted, run and settled, one step of the loop.

use std::future::Future;

use tokio::time::{Instant, sleep};

use super::{Execution, LastError, Step};
use crate::error::ErrorHandling;

impl<S, H> Execution<'_, S, H> {
    /// [`attempt`](Self::attempt), creating the attempt's future only once
    /// the breaker and the bulkhead have admitted it.
    pub async fn attempt_with<T, E, Fut>(&mut self, make_attempt: impl FnOnce() -> Fut) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        self.attempt_measured(make_attempt, None).await
    }

    /// [`attempt_with`](Self::attempt_with) for an attempt that does work
    /// of the client's own before its request goes out (the HTTP layers
    /// read the failed response before it, and hold the request until its
    /// wait ends: see `middleware::call`), and sets `sent` when the request
    /// goes out. An adaptive bulkhead's latency
    /// sample starts then rather than at the admission: the time before is
    /// not the dependency's. The attempt's timeout and the deadline still
    /// cover it all. Always the general path (an adaptive bulkhead's attempts
    /// take it anyway).
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) async fn attempt_sent_at<T, E, Fut>(
        &mut self,
        sent: &std::sync::OnceLock<Instant>,
        attempt: Fut,
    ) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        self.attempt_measured(|| attempt, Some(sent)).await
    }

    /// The general path's attempt: admitted, run, settled. An adaptive
    /// bulkhead's latency sample runs from the admission, or from `sent`
    /// when the attempt set it.
    #[inline]
    async fn attempt_measured<T, E, Fut>(
        &mut self,
        make_attempt: impl FnOnce() -> Fut,
        sent: Option<&std::sync::OnceLock<Instant>>,
    ) -> Step<T, E>
    where
        Fut: Future<Output = Result<T, E>>,
        H: ErrorHandling<E>,
        S: LastError<E>,
    {
        // A wait a plain first attempt's failure planned (see `plain`).
        if let Some(wait) = self.more.as_mut().and_then(|more| more.pending_wait.take()) {
            sleep(wait).await;
        }
        // A handle of our own, so the permits below borrow it and not `self`.
        let guards = self.guards();
        // Most attempts are admitted at once; only a wait builds a future.
        let admitted = match self.admit_now(&guards) {
            Ok(Ok(admitted)) => Ok(admitted),
            Ok(Err(wait)) => self.admit_after(&guards, wait).await,
            Err(refusal) => Err(refusal),
        };
        let mut admitted = match admitted {
            Ok(admitted) => admitted,
            Err(refusal) => return Step::Done(Err(self.cannot_run(refusal))),
        };
        self.begin_attempt(&guards);
        let guarded = self.run(make_attempt()).await;
        if let (Some(permit), Some(sent)) = (admitted.bulkhead.as_mut(), sent.and_then(|sent| sent.get())) {
            permit.measure_from(*sent);
        }
        let wait = match self.settle(admitted, &guards, guarded) {
            Ok(wait) => wait,
            Err(done) => return done,
        };
        // A zero wait is no wait: `sleep(ZERO)` would still arm a timer, and
        // in real time last until the timer's next tick (~1 ms).
        if !wait.is_zero() {
            sleep(wait).await;
        }
        Step::Retry
    }
}
