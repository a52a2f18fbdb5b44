//! `GET /`: the dashboard, one self-contained page (`page.html`).

use axum::http::{HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};

/// The page: inline CSS and JS, no external asset.
const PAGE: &str = include_str!("page.html");

/// What the page may load: nothing but itself and its own routes. The
/// browser enforces "no external assets", and an injected script could
/// not call out.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; \
     style-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

pub(super) async fn page() -> Response {
    let mut response = Html(PAGE).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::PAGE;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        // The SVG namespace is a name, not an address the page loads.
        let page = PAGE.replace("\"http://www.w3.org/2000/svg\"", "");
        for needle in ["http:", "https:", "//cdn", "<link", "src=", "@import", "url("] {
            assert!(!page.contains(needle), "the page must be self-contained, but it has `{needle}`");
        }
    }
}
