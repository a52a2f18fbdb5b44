//! Whether a body hands its `self` to a `move` closure or an `async move`
//! block, which decides how an owned receiver is lent to each attempt.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{Block, ExprAsync, ExprClosure, Item, Macro};

/// Whether a `move` closure or an `async move` block in `block` (not in an
/// item nested in it) mentions `self`, as a name or in a format string;
/// one written in a macro's arguments (`assert!(v.iter().all(move |x| ..))`,
/// `tokio::join!(async move { .. })`) too, which syn leaves as tokens.
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

    /// A macro's arguments are tokens: a `move` there with `self` after it
    /// in the same group may be such a capture, and is taken for one.
    fn visit_macro(&mut self, mac: &'ast Macro) {
        if moves_in_tokens(mac.tokens.clone()) {
            self.0 = true;
        }
    }

    /// A nested item's `self` is its own.
    fn visit_item(&mut self, _: &'ast Item) {}
}

/// Whether, in `tokens` or a group in them, `self` follows a `move`.
fn moves_in_tokens(tokens: TokenStream) -> bool {
    let mut after_move = TokenStream::new();
    let mut moving = false;
    for token in tokens {
        if let TokenTree::Group(group) = &token
            && moves_in_tokens(group.stream())
        {
            return true;
        }
        moving |= matches!(&token, TokenTree::Ident(ident) if ident == "move");
        if moving {
            after_move.extend([token]);
        }
    }
    moving && mentions_self(after_move)
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
            "{ assert!(items.iter().all(move |i| *i < self.limit)); self.a }",
            "{ let (a, b) = tokio::join!(async move { self.a }, async { 1 }); a + b + self.b }",
            "{ println!(\"{}\", items.iter().map(move |i| i * self.factor).sum::<u32>()); self.a }",
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
            "{ assert!(items.iter().all(move |i| *i < 3), \"{}\", self.a); self.b }",
            "{ println!(\"{}\", self.a); vec![move || 1].len() }",
        ] {
            assert!(!moves_self(&body(not_moving)), "{not_moving}");
        }
    }
}
