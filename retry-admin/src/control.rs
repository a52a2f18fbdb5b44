//! `POST /breakers/{name}/{action}`: manual control, for holders of the token.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::snapshot::BreakerView;
use super::{Shared, Token};

/// What a `POST` may ask of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    ForceOpen,
    ForceClosed,
    Reset,
}

const ACTIONS: [(&str, Action); 3] =
    [("force-open", Action::ForceOpen), ("force-closed", Action::ForceClosed), ("reset", Action::Reset)];

/// A refusal's body: what went wrong, and what would be right.
#[derive(Debug, Serialize)]
struct Refusal {
    error: String,
    /// The names that exist (breakers, or actions).
    known: Vec<String>,
}

pub(super) async fn control(
    State(shared): State<Arc<Shared>>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    shared.ensure_sampler();
    // Before anything else, so that nothing (not even which breakers exist)
    // is told to a caller without the token.
    if let Err(reason) = authorize(shared.token.as_ref(), &headers) {
        return unauthorized(reason);
    }
    let Some(&(_, action)) = ACTIONS.iter().find(|(label, _)| *label == action) else {
        let known = ACTIONS.iter().map(|(label, _)| (*label).to_owned()).collect();
        return not_found(format!("no action `{action}`"), known);
    };
    let Some(breaker) = shared.registry.breaker(&name) else {
        let known = shared.registry.breakers().into_iter().map(|(name, _)| name).collect();
        return not_found(format!("no breaker named `{name}`"), known);
    };
    match action {
        Action::ForceOpen => breaker.force_open(),
        Action::ForceClosed => breaker.force_closed(),
        Action::Reset => breaker.reset(),
    }
    Json(BreakerView::of(name, &breaker, Vec::new())).into_response()
}

/// Why a request may not act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unauthorized {
    /// The router was built without a token: no one may.
    NoToken,
    /// No `Authorization: Bearer ...` header.
    Missing,
    /// A bearer token, but not this router's.
    Wrong,
}

fn authorize(token: Option<&Token>, headers: &HeaderMap) -> Result<(), Unauthorized> {
    let Some(Token(expected)) = token else { return Err(Unauthorized::NoToken) };
    let sent = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim_matches(' '))
        .ok_or(Unauthorized::Missing)?;
    // Constant time in the bytes compared (a different length is told at
    // once, which gives away only the length).
    if bool::from(sent.as_bytes().ct_eq(expected)) { Ok(()) } else { Err(Unauthorized::Wrong) }
}

fn unauthorized(reason: Unauthorized) -> Response {
    let error = match reason {
        Unauthorized::NoToken => {
            "manual control is off: this admin router was built without a token (`.with_token(..)`)"
        }
        Unauthorized::Missing => "send the admin token as `Authorization: Bearer <token>`",
        Unauthorized::Wrong => "the bearer token is not this router's",
    };
    let mut response =
        (StatusCode::UNAUTHORIZED, Json(Refusal { error: error.to_owned(), known: Vec::new() }))
            .into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn not_found(error: String, known: Vec<String>) -> Response {
    (StatusCode::NOT_FOUND, Json(Refusal { error, known })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(s: &str) -> Token {
        Token(s.as_bytes().into())
    }

    fn with_authorization(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn only_the_routers_own_bearer_token_authorizes() {
        let t = token("k3y-0f-th3-r0ut3r");
        assert_eq!(authorize(Some(&t), &with_authorization("Bearer k3y-0f-th3-r0ut3r")), Ok(()));
        assert_eq!(
            authorize(Some(&t), &with_authorization("bearer k3y-0f-th3-r0ut3r")),
            Ok(()),
            "the scheme is case-insensitive"
        );
        assert_eq!(
            authorize(Some(&t), &with_authorization("Bearer k3y-0f-th3-r0ut3R")),
            Err(Unauthorized::Wrong)
        );
        assert_eq!(
            authorize(Some(&t), &with_authorization("Bearer k3y-0f-th3-r0ut3")),
            Err(Unauthorized::Wrong),
            "a prefix is not the token"
        );
        assert_eq!(authorize(Some(&t), &with_authorization("Bearer ")), Err(Unauthorized::Wrong));
        assert_eq!(
            authorize(Some(&t), &with_authorization("Basic k3y-0f-th3-r0ut3r")),
            Err(Unauthorized::Missing)
        );
        assert_eq!(authorize(Some(&t), &with_authorization("k3y-0f-th3-r0ut3r")), Err(Unauthorized::Missing));
        assert_eq!(authorize(Some(&t), &HeaderMap::new()), Err(Unauthorized::Missing));
    }

    #[test]
    fn without_a_token_no_request_is_authorized() {
        assert_eq!(authorize(None, &with_authorization("Bearer anything")), Err(Unauthorized::NoToken));
        assert_eq!(authorize(None, &HeaderMap::new()), Err(Unauthorized::NoToken));
    }
}
