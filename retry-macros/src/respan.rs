//! Generated tokens moved to the user's code: the one way the expansion
//! makes the compiler's errors point at what the user wrote.

use proc_macro2::{Group, Span, TokenStream, TokenTree};

/// `tokens` moved to where `span` is, keeping their hygiene: errors about
/// them point at the user's code, while they resolve as before.
pub(crate) fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut moved = Group::new(group.delimiter(), respan(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                token = TokenTree::Group(moved);
            }
            token.set_span(token.span().located_at(span));
            token
        })
        .collect()
}
