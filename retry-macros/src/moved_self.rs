//! Whether a body hands its `self` to a `move` closure or an `async move`
//! block, or to a macro that may take the token `self` itself, which
//! decides how an owned receiver is lent to each attempt.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::visit::{self, Visit};
use syn::{Block, ExprAsync, ExprClosure, Ident, Item, Macro};

use crate::rename_self::takes_expressions;

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

/// Whether `block` (not an item nested in it) passes `self` to a macro not
/// known to take it as an expression ([`takes_expressions`]), or to one
/// invoked in a known one's arguments: `stringify!(self)`, or a macro of
/// the user's matching `$this:ident`. The receiver is then left as `self`,
/// as it was before owned receivers were lent in place: the place it would
/// become, `(*__self)`, is not an identifier, nor does it read `self`.
pub(crate) fn hands_self_to_macro(block: &Block) -> bool {
    let mut finder = SelfToMacro(false);
    finder.visit_block(block);
    finder.0
}

struct SelfToMacro(bool);

impl<'ast> Visit<'ast> for SelfToMacro {
    fn visit_macro(&mut self, mac: &'ast Macro) {
        if let Some(name) = mac.path.segments.last() {
            self.0 |= macro_gets_self(&name.ident, mac.tokens.clone());
        }
    }

    /// A nested item's `self` is its own.
    fn visit_item(&mut self, _: &'ast Item) {}
}

/// Whether the macro `name`, given `tokens`, or one invoked in them, is
/// given `self` without being known to take it as an expression.
fn macro_gets_self(name: &Ident, tokens: TokenStream) -> bool {
    if !takes_expressions(name) {
        return names_self(tokens);
    }
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().any(|(i, token)| {
        let TokenTree::Group(group) = token else {
            return false;
        };
        match i.checked_sub(2).map(|at| (&tokens[at], &tokens[at + 1])) {
            // `if !(..)`, `return !(..)`: a negation, not an invocation.
            Some((TokenTree::Ident(invoked), TokenTree::Punct(bang)))
                if bang.as_char() == '!' && !is_keyword(invoked) =>
            {
                macro_gets_self(invoked, group.stream())
            }
            // Nested in a known macro's arguments, as its own are.
            _ => macro_gets_self(name, group.stream()),
        }
    })
}

/// Whether `ident` is a keyword an expression may follow (`if !(..)`): no
/// macro has its name.
fn is_keyword(ident: &Ident) -> bool {
    const KEYWORDS: &[&str] = &["if", "match", "while", "return", "break", "in", "yield"];
    KEYWORDS.iter().any(|keyword| ident == keyword)
}

/// Whether `tokens` name the receiver `self` (not a path, `self::item`),
/// as a name or in a format string (`my_format!("{self:?}")`).
fn names_self(tokens: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    tokens.iter().enumerate().any(|(i, token)| match token {
        TokenTree::Ident(ident) => {
            ident == "self" && !matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
        }
        TokenTree::Group(group) => names_self(group.stream()),
        // A format string's `{self}` captures the token `self` too.
        TokenTree::Literal(literal) => literal.to_string().contains("{self"),
        TokenTree::Punct(_) => false,
    })
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
    use super::{hands_self_to_macro, moves_self};

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

    #[test]
    fn self_given_to_a_macro_that_may_not_take_an_expression_counts() {
        for giving in [
            "{ stringify!(self) }",
            "{ field!(self, a) }",
            "{ my_format!(\"{self:?}\") }",
            "{ println!(\"{}\", stringify!(self)) }",
            "{ assert!(matches!(self, S { .. }) && my::check!((self))) }",
        ] {
            assert!(hands_self_to_macro(&body(giving)), "{giving}");
        }
        for not_giving in [
            "{ println!(\"{} {self:?}\", self.a) }",
            "{ matches!(self, S { .. }) }",
            "{ tracing::info!(?self.a, \"{}\", format!(\"{}\", self.b)) }",
            "{ my::path!(self::item) }",
            "{ stringify!(x); fn f(&self) { stringify!(self); } }",
            "{ println!(\"{}\", if !(self.a) { 1 } else { 2 }) }",
            "{ assert!(match !(self.a) { _ => true }) }",
        ] {
            assert!(!hands_self_to_macro(&body(not_giving)), "{not_giving}");
        }
    }
}
