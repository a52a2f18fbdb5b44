//! Which requests `ResilientLayer::cloning` may send more than once.

use std::sync::Arc;

use bytes::Bytes;

use crate::http::exchange::Plan;
use crate::http::rules;

/// A request [`ResilientLayer::cloning`](super::ResilientLayer::cloning)
/// serves: `Clone`, so that each attempt sends a copy, and sent more than
/// once only when it may be.
///
/// - An `http::Request<B>` (its body `Clone`) follows the HTTP rule, the
///   one [`ResilientLayer::new`](super::ResilientLayer::new) follows:
///   `GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT` and `DELETE` are retried;
///   `POST`, `PATCH` and other methods only when the request carries a
///   non-empty `Idempotency-Key` header (then the call's
///   [`idempotency_key()`](crate::idempotency_key)), and otherwise get one
///   attempt.
/// - Every other implementation says its requests may be sent again: the
///   plain types (`String`, `&'static str`, `Box<str>`, `Arc<str>`,
///   `Vec<u8>`, [`Bytes`], the integers, `bool`, `char`, `()`), and your
///   own request types, with one line each:
///
/// ```
/// # use stormproof_runtime as stormproof;
/// /// A stock lookup: reading, so safe to send twice.
/// #[derive(Clone)]
/// struct StockQuery { sku: String }
///
/// impl stormproof::http::tower::CloneRequest for StockQuery {}
/// ```
///
/// Why not every `Clone` request: an `http::Request` with a buffered body
/// is `Clone` too, and a `POST` without a key must get one attempt however
/// the layer was built. Without specialization, an implementation for
/// every `Clone` type cannot treat `http::Request` apart, so the types
/// whose requests may be sent again say so. (A request type of another
/// crate can be wrapped in a type of your own.)
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say whether `ResilientLayer::cloning` may send it more than once",
    label = "the requests this service takes",
    note = "if `{Self}` is `Clone` and safe to send twice, implement `stormproof::http::tower::CloneRequest` for it: `impl CloneRequest for {Self} {{}}`",
    note = "`http::Request<B>` implements it with the HTTP rule (idempotent methods, or an `Idempotency-Key`); a request type of another crate can be wrapped in a type of your own"
)]
pub trait CloneRequest: Clone {
    /// Whether this request may be sent more than once, and the call's
    /// idempotency key: yes, without a key, except for `http::Request`,
    /// which follows the HTTP rule. Not to be overridden: it is what makes
    /// the rule hold for every way the layer is built.
    #[doc(hidden)]
    #[inline]
    fn plan(&self) -> Plan {
        Plan { retry: true, key: None, priority: None }
    }

    /// The key of the request's guards per key: none (the empty key),
    /// except for `http::Request`, whose key is its
    /// [`GuardKey`](crate::http::GuardKey), else its host and port, as
    /// through `ResilientLayer::new`. Not to be overridden either.
    #[doc(hidden)]
    #[inline]
    fn guard_key(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("")
    }
}

/// The HTTP rule, the same function `ResilientLayer::new` and the
/// reqwest middleware ask.
impl<B: Clone> CloneRequest for http::Request<B> {
    #[inline]
    fn plan(&self) -> Plan {
        rules::plan(self.method(), self.headers())
    }

    fn guard_key(&self) -> std::borrow::Cow<'_, str> {
        rules::request_key(self)
    }
}

macro_rules! resendable {
    ($($ty:ty),* $(,)?) => {
        $(
            /// A plain value: sent again as it is.
            impl CloneRequest for $ty {}
        )*
    };
}

resendable!(
    String,
    &'static str,
    Box<str>,
    Arc<str>,
    Vec<u8>,
    Bytes,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    bool,
    char,
    (),
);

#[cfg(test)]
mod tests {
    use http::{Method, Request};

    use super::*;

    fn plan_of(method: Method, key: Option<&str>) -> Plan {
        let mut request = Request::builder().method(method);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        CloneRequest::plan(&request.body(String::new()).unwrap())
    }

    #[test]
    fn an_http_request_follows_the_http_rule_and_other_requests_are_resent() {
        assert_eq!(plan_of(Method::POST, None), Plan { retry: false, key: None, priority: None });
        assert_eq!(plan_of(Method::PATCH, None), Plan { retry: false, key: None, priority: None });
        assert_eq!(
            plan_of(Method::POST, Some("k-1")),
            Plan { retry: true, key: Some("k-1".into()), priority: None }
        );
        assert_eq!(plan_of(Method::GET, None), Plan { retry: true, key: None, priority: None });
        assert_eq!("A-1".to_owned().plan(), Plan { retry: true, key: None, priority: None });
        assert_eq!(7_u64.plan(), Plan { retry: true, key: None, priority: None });
    }
}
