//! What an attempt knows about the call it belongs to: the idempotency key,
//! and whether it is itself inside another resilient call.
//!
//! Both travel in a tokio task-local set around each attempt, so they reach
//! any code the attempt calls without being passed along, and stop at the
//! task's edge (a spawned task is a new call tree).

use std::sync::Arc;

#[derive(Clone, Default)]
pub(crate) struct CallContext {
    pub(crate) key: Option<Arc<str>>,
}

tokio::task_local! {
    static ATTEMPT: CallContext;
}

/// The idempotency key of the call whose attempt is running, if it has one.
///
/// The same value on every attempt of one call, so a server can recognise a
/// retry of a request it already carried out. A call without a key of its
/// own, made inside an attempt of a call with one, sees the outer key.
/// Outside any attempt, `None`.
///
/// ```
/// # use retry_runtime as resilient;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use resilient::{Policy, idempotency_key};
/// let policy = Policy::builder().build().unwrap();
/// let key = policy
///     .run_with_key("order-17", || async { Ok::<_, std::io::Error>(idempotency_key()) })
///     .await
///     .unwrap();
/// assert_eq!(key.as_deref(), Some("order-17"));
/// assert_eq!(idempotency_key(), None);
/// # }
/// ```
pub fn idempotency_key() -> Option<Arc<str>> {
    ATTEMPT.try_with(|ctx| ctx.key.clone()).ok().flatten()
}

/// The context of the attempt running on this task, if any.
pub(crate) fn current() -> Option<CallContext> {
    ATTEMPT.try_with(CallContext::clone).ok()
}

pub(crate) fn scope<F: std::future::Future>(
    ctx: CallContext,
    fut: F,
) -> tokio::task::futures::TaskLocalFuture<CallContext, F> {
    ATTEMPT.scope(ctx, fut)
}
