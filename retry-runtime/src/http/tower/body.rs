//! Which request bodies can be sent twice.

use std::borrow::Cow;

use bytes::Bytes;
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{Either, Empty, Full, StreamBody};

/// A request body that can be copied for another attempt, or that says it
/// cannot (a stream, read once).
///
/// [`ResilientLayer::new`](super::ResilientLayer::new) retries an
/// `http::Request<B>` only when `B::try_clone_body` returns a copy;
/// otherwise the request gets one attempt (the breaker, bulkhead and
/// timeouts still apply).
///
/// Buffered bodies copy: [`Full`], [`Empty`], [`Bytes`], `String`,
/// `Vec<u8>`, `&'static str`, `&'static [u8]`, `Cow<'static, str>`,
/// `Cow<'static, [u8]>`, `()`, and [`Either`] and `Box` of those. Streaming
/// bodies do not: [`BoxBody`], [`UnsyncBoxBody`], [`StreamBody`] (even when
/// its stream is `Clone`: a cloned stream need not replay what was sent).
///
/// Implement it for a body type of your own. A body type of another crate
/// that this crate does not know (hyper's `Incoming`, axum's `Body`) can be
/// boxed into a [`BoxBody`] or [`UnsyncBoxBody`] (`BodyExt::boxed`), which
/// get one attempt, or collected into a [`Full`] to be retried.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::http::tower::CloneBody;
///
/// /// A body that is either in memory or streamed from a file.
/// enum Upload { InMemory(bytes::Bytes), File(std::path::PathBuf) }
///
/// impl CloneBody for Upload {
///     fn try_clone_body(&self) -> Option<Self> {
///         match self {
///             Upload::InMemory(bytes) => Some(Upload::InMemory(bytes.clone())),
///             Upload::File(_) => None, // read once: one attempt
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a request body `ResilientLayer::new` knows how to copy for a retry",
    label = "the body of the requests this service takes",
    note = "implement `stormproof::http::tower::CloneBody` for `{Self}`: return `Some(copy)` for a buffered body, `None` for a stream (one attempt)",
    note = "a body type of another crate can be boxed (`http_body_util::BodyExt::boxed`: one attempt) or collected into `http_body_util::Full` (retried)"
)]
pub trait CloneBody: Sized {
    /// A copy of this body for another attempt, or `None` when it cannot
    /// be copied (the request then gets one attempt).
    fn try_clone_body(&self) -> Option<Self>;
}

/// Buffered bodies: a copy is a clone (a reference count for `Bytes`).
macro_rules! buffered {
    ($($ty:ty),* $(,)?) => {
        $(
            impl CloneBody for $ty {
                #[inline]
                fn try_clone_body(&self) -> Option<Self> {
                    Some(self.clone())
                }
            }
        )*
    };
}

buffered!(Bytes, String, Vec<u8>, &'static str, &'static [u8], Cow<'static, str>, Cow<'static, [u8]>, ());

impl<D: Clone> CloneBody for Full<D> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl<D> CloneBody for Empty<D> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        Some(Empty::new())
    }
}

impl<L: CloneBody, R: CloneBody> CloneBody for Either<L, R> {
    fn try_clone_body(&self) -> Option<Self> {
        match self {
            Either::Left(left) => left.try_clone_body().map(Either::Left),
            Either::Right(right) => right.try_clone_body().map(Either::Right),
        }
    }
}

impl<B: CloneBody> CloneBody for Box<B> {
    fn try_clone_body(&self) -> Option<Self> {
        (**self).try_clone_body().map(Box::new)
    }
}

/// Streaming bodies: read once, so one attempt.
impl<D, E> CloneBody for BoxBody<D, E> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

/// Streaming bodies: read once, so one attempt.
impl<D, E> CloneBody for UnsyncBoxBody<D, E> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

/// A stream is read once, even when it is `Clone`: one attempt.
impl<S> CloneBody for StreamBody<S> {
    #[inline]
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_bodies_copy_and_streams_do_not() {
        let full = Full::new(Bytes::from_static(b"abc"));
        assert!(full.try_clone_body().is_some());
        assert!(Empty::<Bytes>::new().try_clone_body().is_some());
        assert_eq!(String::from("x").try_clone_body().as_deref(), Some("x"));
        let either: Either<Full<Bytes>, String> = Either::Right("r".into());
        assert!(matches!(either.try_clone_body(), Some(Either::Right(r)) if r == "r"));
        let boxed = BoxBody::<Bytes, std::convert::Infallible>::new(Full::new(Bytes::new()));
        assert!(boxed.try_clone_body().is_none());
        let stream = StreamBody::new(());
        assert!(stream.try_clone_body().is_none());
    }
}
