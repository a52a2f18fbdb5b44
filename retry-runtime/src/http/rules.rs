//! The HTTP rules the tower layer and the reqwest middleware share, written
//! once: which requests may be sent twice, and how a response is classified.
//!
//! - **Idempotency by method** mirrors the attribute's compile-time rule
//!   (`idempotent = false` needs a `key`): the methods RFC 9110 defines as
//!   idempotent (`GET`, `HEAD`, `OPTIONS`, `TRACE`, `PUT`, `DELETE`) are
//!   retried; any other (`POST`, `PATCH`, extension methods) only when the
//!   request carries a non-empty `Idempotency-Key` header, whose value is
//!   then the call's idempotency key; else it gets one attempt.
//! - **A response** with a status below 400 is a success; any other is
//!   classified by [`ErrorClass::from_http`] with its `Retry-After` (two
//!   lines of it read as one, joined with a comma, as a proxy merges them).

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
use std::borrow::Cow;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
use std::sync::Arc;

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
use http::{HeaderName, Method};

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
use super::exchange::Plan;
use crate::classify::{ErrorClass, retry_after_lines};

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
/// The header that makes a non-idempotent request retryable.
pub(crate) const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
/// Whether RFC 9110 (section 9.2.2) defines `method` as idempotent.
pub(crate) fn idempotent_method(method: &Method) -> bool {
    matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE")
}

#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
/// The request's `Idempotency-Key`, if it carries a non-empty one (bytes
/// that are not UTF-8 are replaced, as the key only has to be the same on
/// every attempt).
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Option<Arc<str>> {
    let value = headers.get(IDEMPOTENCY_KEY)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    let text = text.trim();
    (!text.is_empty()).then(|| Arc::from(text))
}

/// The key of an `http::Request`'s guards per key through the tower
/// layer: the [`GuardKey`](crate::http::GuardKey) in its extensions, else
/// its host and port (see [`breaker_key`]).
#[cfg(feature = "tower")]
pub(crate) fn request_key<B>(request: &http::Request<B>) -> Cow<'_, str> {
    if let Some(key) = request.extensions().get::<crate::http::GuardKey>() {
        return Cow::Borrowed(key.as_str());
    }
    let host = || request.headers().get(http::header::HOST).and_then(|host| host.to_str().ok());
    breaker_key(request.uri().authority().map(http::uri::Authority::as_str).or_else(host))
}

/// The key of a breaker per key for a request to `authority` (its URI's,
/// else its `Host` header's), or the empty key for one with neither: the
/// host and port as written, without user information, in lower case (a
/// host name is not case-sensitive), so that `API.example` and
/// `api.example` share a breaker and `host:8080` and `host:9090` do not.
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) fn breaker_key(authority: Option<&str>) -> Cow<'_, str> {
    let Some(authority) = authority else {
        return Cow::Borrowed("");
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    if host.bytes().any(|byte| byte.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// The plan for a request with this method and these headers.
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) fn plan(method: &Method, headers: &HeaderMap) -> Plan {
    let key = idempotency_key(headers);
    Plan { retry: idempotent_method(method) || key.is_some(), key, priority: priority(headers) }
}

/// The header a request says its priority with (see `crate::priority`).
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) const PRIORITY: HeaderName = HeaderName::from_static("x-priority");

/// A request's priority: its `x-priority` header, `critical`, `default` or
/// `sheddable` (any case, spaces around ignored). A value that is none of
/// them is ignored, as a header the layer does not know would be: the
/// operation's priority applies.
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) fn priority(headers: &HeaderMap) -> Option<crate::Priority> {
    let value = headers.get(PRIORITY)?.to_str().ok()?.trim();
    crate::Priority::NAMES.iter().find(|name| value.eq_ignore_ascii_case(name))?.parse().ok()
}

/// The class of a response: `None` for a success (a status below 400),
/// else the status's class with the response's `Retry-After`.
pub(crate) fn response_class(status: StatusCode, headers: &HeaderMap) -> Option<ErrorClass> {
    if status.as_u16() < 400 {
        return None;
    }
    let lines = headers.get_all(RETRY_AFTER).into_iter().map(|value| value.to_str().ok());
    Some(ErrorClass::from_http(status.as_u16(), retry_after_lines(lines).as_deref()))
}

// The method rule is the layers'; the classification of a response is
// tested through it and through `classify_response`'s own tests.
#[cfg(all(test, any(feature = "tower", feature = "reqwest-middleware")))]
mod tests {
    use std::time::Duration;

    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn idempotent_methods_are_retried_and_the_others_only_with_a_key() {
        for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE, Method::PUT, Method::DELETE]
        {
            assert_eq!(
                plan(&method, &HeaderMap::new()),
                Plan { retry: true, key: None, priority: None },
                "{method}"
            );
        }
        let extension = Method::from_bytes(b"PURGE").unwrap();
        for method in [Method::POST, Method::PATCH, Method::CONNECT, extension] {
            assert_eq!(
                plan(&method, &HeaderMap::new()),
                Plan { retry: false, key: None, priority: None },
                "{method}"
            );
            let keyed = plan(&method, &headers(&[("Idempotency-Key", b"order-7")]));
            assert_eq!(keyed, Plan { retry: true, key: Some("order-7".into()), priority: None }, "{method}");
        }
    }

    #[test]
    fn an_empty_key_is_no_key_and_any_bytes_make_a_key() {
        assert!(!plan(&Method::POST, &headers(&[("idempotency-key", b"")])).retry);
        assert!(!plan(&Method::POST, &headers(&[("idempotency-key", b"  ")])).retry);
        let odd = plan(&Method::POST, &headers(&[("idempotency-key", b"k\xff1")]));
        assert_eq!(odd.key.as_deref(), Some("k\u{fffd}1"));
        let key = plan(&Method::GET, &headers(&[("idempotency-key", b"g-1")]));
        assert_eq!(
            key,
            Plan { retry: true, key: Some("g-1".into()), priority: None },
            "a GET's key is its call's key too"
        );
    }

    #[test]
    fn x_priority_names_one_of_the_three_in_any_case_and_anything_else_is_ignored() {
        let priority = |value: &[u8]| plan(&Method::GET, &headers(&[("x-priority", value)])).priority;
        assert_eq!(priority(b"critical"), Some(crate::Priority::Critical));
        assert_eq!(priority(b" Sheddable "), Some(crate::Priority::Sheddable));
        assert_eq!(priority(b"DEFAULT"), Some(crate::Priority::Default));
        assert_eq!(priority(b"urgent"), None);
        assert_eq!(priority(b"\xff\xfe"), None, "not text: ignored, never a panic");
        assert_eq!(plan(&Method::GET, &HeaderMap::new()).priority, None);
    }

    #[test]
    fn responses_below_400_succeed_and_the_rest_are_classified_with_retry_after() {
        for status in [200, 204, 304, 399] {
            assert_eq!(response_class(StatusCode::from_u16(status).unwrap(), &HeaderMap::new()), None);
        }
        let class = |status: u16, retry_after: &[u8]| {
            let headers = if retry_after.is_empty() {
                HeaderMap::new()
            } else {
                headers(&[("retry-after", retry_after)])
            };
            response_class(StatusCode::from_u16(status).unwrap(), &headers)
        };
        assert_eq!(class(503, b""), Some(ErrorClass::Transient));
        assert_eq!(class(408, b""), Some(ErrorClass::Transient));
        assert_eq!(class(404, b""), Some(ErrorClass::Permanent));
        assert_eq!(
            class(429, b"3"),
            Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(3)) })
        );
        assert_eq!(class(429, b"soon"), Some(ErrorClass::Throttled { retry_after: None }));
        assert_eq!(
            class(429, b"\xff"),
            Some(ErrorClass::Throttled { retry_after: None }),
            "not text: ignored"
        );
        assert_eq!(
            class(429, b"120, 120"),
            Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(120)) }),
            "merged by a proxy"
        );
        assert_eq!(
            class(429, b"99999999999999999999999"),
            Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(u64::MAX)) }),
            "out of range: saturates (the loop ends a call it cannot wait for), never a panic"
        );
    }

    /// Two `Retry-After` lines mean what a proxy's merge of them means: the
    /// longest wait when both parse, nothing when one does not. (Read as
    /// the first line alone, `5` and `120` waited 5 s.)
    #[test]
    fn two_retry_after_lines_read_as_one_list() {
        let class = |lines: &[&[u8]]| {
            let pairs: Vec<_> = lines.iter().map(|line| ("retry-after", *line)).collect();
            response_class(StatusCode::TOO_MANY_REQUESTS, &headers(&pairs))
        };
        let after = |secs| Some(ErrorClass::Throttled { retry_after: Some(Duration::from_secs(secs)) });
        assert_eq!(class(&[b"120", b"120"]), after(120));
        assert_eq!(class(&[b"5", b"120"]), after(120));
        assert_eq!(class(&[b"120", b"5"]), after(120));
        assert_eq!(class(&[b"Wed, 21 Oct 2015 07:28:00 GMT", b"3"]), after(3), "a past date is zero");
        let unknown = Some(ErrorClass::Throttled { retry_after: None });
        assert_eq!(class(&[b"120", b"soon"]), unknown);
        assert_eq!(class(&[b"120", b"\xff"]), unknown, "not text");
        let unavailable = |lines: &[&[u8]]| {
            let pairs: Vec<_> = lines.iter().map(|line| ("retry-after", *line)).collect();
            response_class(StatusCode::SERVICE_UNAVAILABLE, &headers(&pairs))
        };
        assert_eq!(unavailable(&[b"2", b"7"]), after(7));
        assert_eq!(unavailable(&[b"2", b"later"]), Some(ErrorClass::Transient));
    }
}
