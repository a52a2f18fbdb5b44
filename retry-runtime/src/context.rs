//! What an attempt knows about the call it belongs to: the idempotency key,
//! and whether it is itself inside another resilient call.
//!
//! Both travel in a task-local set around each attempt, so they reach any
//! code the attempt calls without being passed along, and stop at the
//! task's edge (a spawned task is a new call tree).
//!
//! The task-local is built the way tokio's `task_local!` is: a thread-local
//! that holds the attempt's context only while the attempt is polled (or
//! dropped), swapped in before and out after. Doing it here rather than
//! with `task_local!` lets the swap inline into the retry loop, enter the
//! call's span in the same step (one wrapper per attempt instead of two),
//! and swap the call's own key in place, without cloning it per attempt.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Which task an attempt belongs to: tokio's id of the task polling it
/// (`None` under `block_on`, which is not a task).
type TaskMark = Option<tokio::task::Id>;

/// The attempt being polled on this thread, if any: on which task, and
/// whether its call has a key. `Copy` and destructor-free, so that its
/// thread-local is the fast kind (no lazy registration to check): entering
/// and leaving an attempt without a key touches only this. Two words
/// without padding, so saving, setting and restoring it are two moves each.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Mark {
    /// The attempt's task (meaningless outside attempts). A task polled
    /// from inside an attempt (a `LocalSet` driven by the attempt) is not
    /// the attempt's task: it starts a call tree of its own.
    task: TaskMark,
    place: Place,
}

/// Where the thread is: outside attempts, or polling one (whose call has a key or not).
#[derive(Clone, Copy, PartialEq, Eq)]
// A full word: a smaller field would leave padding in `Mark`, copied byte by byte.
#[repr(u64)]
enum Place {
    Outside,
    Attempt,
    /// An attempt whose call has a key, held in `KEY`.
    KeyedAttempt,
}

const OUTSIDE: Mark = Mark { task: None, place: Place::Outside };

thread_local! {
    static ATTEMPT: Cell<Mark> = const { Cell::new(OUTSIDE) };
    /// The key of the attempt being polled, read only while the mark says
    /// `KeyedAttempt` (an outer attempt's, while a keyless one is polled
    /// inside it). Read and written only when a key is involved.
    static KEY: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

impl Mark {
    /// Whether an attempt of some call is running on this very task.
    #[inline]
    fn here(self) -> bool {
        self.place != Place::Outside && self.task == tokio::task::try_id()
    }
}

/// The idempotency key of the call whose attempt is running, if it has one.
///
/// The same value on every attempt of one call, so a server can recognise a
/// retry of a request it already carried out. A call without a key of its
/// own, made inside an attempt of a call with one, sees the outer key.
/// Outside any attempt, `None`.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use stormproof::{Policy, idempotency_key};
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
    let mark = ATTEMPT.get();
    if !(mark.place == Place::KeyedAttempt && mark.here()) {
        return None;
    }
    // Nothing holds a borrow across user code, so `borrow` cannot fail; a
    // thread being torn down has no attempt running on it.
    KEY.try_with(|key| key.borrow().clone()).ok().flatten()
}

/// Whether an attempt of another call is running on this task, and the key
/// a new call uses: its own, else the one of the call it is nested in.
#[inline(always)]
pub(crate) fn inherit(key: Option<Arc<str>>) -> (bool, Option<Arc<str>>) {
    let mark = ATTEMPT.get();
    if mark.place == Place::Outside {
        return (false, key);
    }
    let nested = mark.here();
    match key {
        None if nested => (true, idempotency_key()),
        key => (nested, key),
    }
}

/// Whether an attempt of another call is running on this task: a call
/// made now is nested in it.
#[inline]
pub(crate) fn nested() -> bool {
    ATTEMPT.get().here()
}

/// Whether no attempt of any call is being polled on this thread: a call
/// made now is not nested and inherits no key.
#[inline(always)]
pub(crate) fn outside_attempts() -> bool {
    ATTEMPT.get().place == Place::Outside
}

/// Polls `attempt` in its context, with `span` (if any) entered.
///
/// `key` is the attempt's key; for the poll it is swapped with the one in
/// effect (so `key` holds the caller's meanwhile) and swapped back after.
/// A finished attempt is dropped right away, still in its context.
// Always inline: it is the attempt's poll on every path, and out of line
// its arguments and result go through memory.
#[inline(always)]
pub(crate) fn poll_in<F: Future>(
    key: &mut Option<Arc<str>>,
    span: Option<&tracing::Span>,
    attempt: Pin<&mut Option<F>>,
    make: Option<impl FnOnce() -> F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let _entered = span.map(tracing::Span::enter);
    let _in = In::enter(key);
    poll_to_its_end(attempt, make, cx)
}

/// Polls a keyless attempt without a span in its context: [`poll_in`]
/// with no key and no span, as the plain first attempt polls. With no key
/// to swap and no span to enter, entering is setting the mark and leaving
/// is putting the outer one back.
#[inline(always)]
pub(crate) fn poll_keyless<F: Future>(
    attempt: Pin<&mut Option<F>>,
    make: Option<impl FnOnce() -> F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let _in = Keyless::enter();
    poll_to_its_end(attempt, make, cx)
}

/// Polls `attempt` in the context the caller entered, and drops it there
/// as soon as it is done. An attempt not made yet is made by `make` (the
/// first poll of one made once admitted, `Policy::run`'s), in the same
/// context: what its maker does before its future is polled sees the
/// attempt's key and span.
#[inline(always)]
fn poll_to_its_end<F: Future>(
    mut attempt: Pin<&mut Option<F>>,
    make: Option<impl FnOnce() -> F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    if let Some(make) = make
        && attempt.is_none()
    {
        attempt.set(Some(make()));
    }
    let Some(running) = attempt.as_mut().as_pin_mut() else {
        panic!("an attempt polled after it finished");
    };
    let poll = running.poll(cx);
    if poll.is_ready() {
        attempt.set(None);
    }
    poll
}

/// Drops an attempt that has not finished (it was cancelled) in its context.
#[inline]
pub(crate) fn drop_in<F>(
    key: &mut Option<Arc<str>>,
    span: Option<&tracing::Span>,
    mut attempt: Pin<&mut Option<F>>,
) {
    if attempt.is_some() {
        let _entered = span.map(tracing::Span::enter);
        let _in = In::enter(key);
        attempt.set(None);
    }
}

/// The attempt's context in effect for as long as it lives (a panic included).
struct In<'a> {
    /// The attempt's key, exchanged with the one in `KEY`, when it has one.
    /// An attempt without a key leaves `KEY` alone (the common case): its
    /// mark says `Attempt`, so `KEY` is not read while it is polled, and an
    /// outer attempt's key there is still in place when the outer mark is
    /// put back.
    swapped: Option<&'a mut Option<Arc<str>>>,
    outer: Mark,
}

impl<'a> In<'a> {
    /// The context of an attempt with `key` (which holds the key it displaced meanwhile).
    #[inline(always)]
    fn enter(key: &'a mut Option<Arc<str>>) -> Self {
        if key.is_none() {
            return In { swapped: None, outer: mark(Place::Attempt) };
        }
        KEY.with(|current| std::mem::swap(&mut *current.borrow_mut(), key));
        In { swapped: Some(key), outer: mark(Place::KeyedAttempt) }
    }
}

/// Marks this thread as polling an attempt of this task, at `place`: the outer mark.
#[inline(always)]
fn mark(place: Place) -> Mark {
    let task = tokio::task::try_id();
    // One access through `with`: `LocalKey::set` goes through the lazy
    // initialization path, which a `const` thread local never needs.
    ATTEMPT.with(|mark| mark.replace(Mark { task, place }))
}

/// Puts the outer mark back as an attempt's poll is left.
#[inline(always)]
fn unmark(outer: Mark) {
    ATTEMPT.with(|mark| mark.set(outer));
}

/// [`In`] for an attempt known to have no key: only the mark, and no
/// key slot to test when it is left.
struct Keyless {
    outer: Mark,
}

impl Keyless {
    #[inline(always)]
    fn enter() -> Self {
        Keyless { outer: mark(Place::Attempt) }
    }
}

impl Drop for Keyless {
    #[inline(always)]
    fn drop(&mut self) {
        unmark(self.outer);
    }
}

impl Drop for In<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(key) = &mut self.swapped {
            KEY.with(|current| std::mem::swap(&mut *current.borrow_mut(), key));
        }
        unmark(self.outer);
    }
}
