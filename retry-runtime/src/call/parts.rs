//! What makes a call when it is built ([`Parts`]): its key, the slot
//! that keeps its last error and its error handling, made only if the
//! call is built (a plain call's first attempt builds nothing).

use std::sync::Arc;

use super::Call;
use crate::guards::Shape;

/// What makes a call when it is built: its key, the slot that keeps its
/// last error (which only selects a type) and its error handling; and
/// whether it has a key at all, which makes a call never plain.
pub trait Parts<S, H> {
    /// Whether the call has a key.
    const KEYED: bool;
    /// The key, the slot and the handling.
    fn make(self) -> (Option<Arc<str>>, S, H);
}

/// The parts of a call without a key: a function making the slot and the
/// handling.
#[derive(Debug, Clone, Copy)]
pub struct Unkeyed<F>(pub F);

/// The parts of a call with a key: a function making the key, the slot
/// and the handling.
#[derive(Debug, Clone, Copy)]
pub struct Keyed<F>(pub F);

impl<S, H, F: FnOnce() -> (S, H)> Parts<S, H> for Unkeyed<F> {
    const KEYED: bool = false;

    #[inline(always)]
    fn make(self) -> (Option<Arc<str>>, S, H) {
        let (last, handling) = (self.0)();
        (None, last, handling)
    }
}

impl<S, H, F: FnOnce() -> (Option<Arc<str>>, S, H)> Parts<S, H> for Keyed<F> {
    const KEYED: bool = true;

    #[inline(always)]
    fn make(self) -> (Option<Arc<str>>, S, H) {
        (self.0)()
    }
}

impl<'p, S, H, V: Shape> Call<'p, S, H, V> {
    /// The parts of a call without a key: `make` makes the slot that keeps
    /// its last error and its error handling, when the call is built.
    #[inline(always)]
    pub fn unkeyed<F: FnOnce() -> (S, H)>(make: F) -> Unkeyed<F> {
        Unkeyed(make)
    }

    /// The parts of a call with a key: `make` makes the key, the slot and
    /// the handling, when the call is built.
    #[inline(always)]
    pub fn keyed<F: FnOnce() -> (Option<Arc<str>>, S, H)>(make: F) -> Keyed<F> {
        Keyed(make)
    }
}
