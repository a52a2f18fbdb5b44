//! Whether a body hands its `self` to a `move` closure or an `async move`
//! block, which decides how an owned receiver is lent to each attempt.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{Block, ExprAsync, ExprClosure, Item};

/// Whether a `move` closure or an `async move` block in `block` (not in an
/// item nested in it) mentions `self`, as a name or in a format string.
///
/// Such a capture takes a copy of a shared reference to the receiver, and
/// the body may go on using `self` after it: it compiles when the attempt
/// lends the receiver as `&Self`, not as `&mut Self`, which the capture
/// would move.
pub(crate) fn moves_self(block: &Block) -> bool {
    let mut finder = MovedSelf(false);
    finder.visit_block(block);
    finder.0
}

struct MovedSelf(bool);

impl<'ast> Visit<'ast> for MovedSelf {
    fn visit_expr_closure(&mut self, closure: &'ast ExprClosure) {
        if closure.capture.is_some() && mentions_self(closure.body.to_token_stream()) {
            self.0 = true;
        }
        visit::visit_expr_closure(self, closure);
    }

    fn visit_expr_async(&mut self, block: &'ast ExprAsync) {
        if block.capture.is_some() && mentions_self(block.block.to_token_stream()) {
            self.0 = true;
        }
        visit::visit_expr_async(self, block);
    }

    /// A nested item's `self` is its own.
    fn visit_item(&mut self, _: &'ast Item) {}
}

fn mentions_self(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|token| match token {
        TokenTree::Ident(ident) => ident == "self",
        TokenTree::Group(group) => mentions_self(group.stream()),
        // `format!("{self}")` captures it too.
        TokenTree::Literal(literal) => literal.to_string().contains("{self"),
        TokenTree::Punct(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use super::moves_self;

    fn body(tokens: &str) -> syn::Block {
        syn::parse_str(tokens).unwrap()
    }

    #[test]
    fn only_a_move_capture_of_self_counts() {
        for moving in [
            "{ let f = move || self.a; f() + self.b }",
            "{ async move { self.a }.await }",
            "{ items.iter().map(move |i| i * self.factor).sum() }",
            "{ let f = move || println!(\"{self:?}\"); f() }",
            "{ if x { let f = move || { let g = || self.a; g() }; f() } else { 0 } }",
        ] {
            assert!(moves_self(&body(moving)), "{moving}");
        }
        for not_moving in [
            "{ let f = || self.a; f() + self.b }",
            "{ async { self.a }.await }",
            "{ let f = move |x: u32| x + 1; f(self.a) }",
            "{ fn nested(v: u32) -> u32 { let f = move || v; f() } nested(self.a) }",
            "{ self.run(move || 1) }",
            "{ let s = \"{self}\"; s.len() }",
        ] {
            assert!(!moves_self(&body(not_moving)), "{not_moving}");
        }
    }
}
