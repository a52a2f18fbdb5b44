//! The body's `self` renamed to a hygienic `__self`, for the receivers
//! that each attempt reborrows or clones afresh (see `rewrite`): `self` is a
//! keyword and cannot be shadowed the way a parameter is.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::quote;
use syn::visit_mut::{self, VisitMut};
use syn::{Block, ExprPath, Ident, Macro};

/// Renames the body's `self` to the `__self` it returns. That `__self` is
/// hygienic (mixed-site, at the receiver): a parameter or a binding of the
/// user's named `__self` neither captures it nor is captured by it.
pub(crate) fn rename_self(block: &mut Block, receiver: Span) -> Ident {
    RenameSelf.visit_block_mut(block);
    RenameSelf::renamed(receiver)
}

/// Renames the receiver `self` to a hygienic `__self` in a body.
struct RenameSelf;

/// Whether a macro of this name takes a format string and its arguments
/// (std's, `log`'s and `tracing`'s, `anyhow`'s): only there is `"{self}"`
/// a capture, and only there can a named argument be added.
fn formats(name: &Ident) -> bool {
    const FORMATTING: &[&str] = &[
        "format",
        "format_args",
        "print",
        "println",
        "eprint",
        "eprintln",
        "write",
        "writeln",
        "panic",
        "assert",
        "assert_eq",
        "assert_ne",
        "debug_assert",
        "debug_assert_eq",
        "debug_assert_ne",
        "unreachable",
        "todo",
        "unimplemented",
        "trace",
        "debug",
        "info",
        "warn",
        "error",
        "event",
        "anyhow",
        "bail",
        "ensure",
        "format_err",
    ];
    FORMATTING.iter().any(|formatting| name == formatting)
}

/// The named format argument an inline `{self}` becomes.
const CAPTURED_SELF: &str = "__resilient_self";

impl RenameSelf {
    fn renamed(at: Span) -> Ident {
        Ident::new("__self", Span::mixed_site().located_at(at))
    }

    /// `self` renamed in a macro's tokens; `arguments` says they are a
    /// formatting macro's arguments (its own, or those of one invoked in
    /// them), where a format string may capture `self`.
    fn rename(token_stream: TokenStream, arguments: bool) -> TokenStream {
        let mut tokens: Vec<TokenTree> = token_stream.into_iter().collect();
        let mut captured = None;
        for i in 0..tokens.len() {
            let path_follows = matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
            // `name!(..)`: a formatting macro invoked in these tokens.
            let invoked = i >= 2
                && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '!')
                && matches!(&tokens[i - 2], TokenTree::Ident(name) if formats(name));
            // A format string comes first, or after a `,` (`write!(f, "..")`).
            let format_position =
                arguments && (i == 0 || matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ','));
            match &mut tokens[i] {
                TokenTree::Ident(ident) if ident == "self" && !path_follows => {
                    *ident = Self::renamed(ident.span());
                }
                TokenTree::Group(group) => {
                    let mut renamed = Group::new(group.delimiter(), Self::rename(group.stream(), invoked));
                    renamed.set_span(group.span());
                    *group = renamed;
                }
                TokenTree::Literal(literal) if format_position && captured.is_none() => {
                    if let Some(renamed) = Self::rename_captured_self(literal) {
                        captured.get_or_insert(literal.span());
                        *literal = renamed;
                    }
                }
                _ => {}
            }
        }
        // `format!("{self:?}")` captures `self` by name, out of reach of the
        // renaming above: the string now says `{__self:?}`, and a named
        // argument `__self = __self` gives it the renamed receiver.
        if let Some(span) = captured {
            if !matches!(tokens.last(), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
                tokens.push(TokenTree::Punct(proc_macro2::Punct::new(',', proc_macro2::Spacing::Alone)));
            }
            let name = Ident::new(CAPTURED_SELF, span);
            tokens.extend(quote!(#name = ));
            tokens.push(TokenTree::Ident(Self::renamed(span)));
        }
        tokens.into_iter().collect()
    }

    /// A format string whose inline arguments name `self` (`"{self}"`,
    /// `"{self:?}"`), with them renamed; `None` for any other literal.
    fn rename_captured_self(literal: &proc_macro2::Literal) -> Option<proc_macro2::Literal> {
        let string = syn::parse2::<syn::LitStr>(TokenTree::Literal(literal.clone()).into()).ok()?;
        let text = string.value();
        let mut renamed = String::with_capacity(text.len());
        let mut found = false;
        let mut rest = text.as_str();
        while let Some(at) = rest.find(['{', '}']) {
            renamed.push_str(&rest[..at]);
            rest = &rest[at..];
            if rest.starts_with("{{") || rest.starts_with("}}") || rest.starts_with('}') {
                let width = if rest.starts_with("{{") || rest.starts_with("}}") { 2 } else { 1 };
                renamed.push_str(&rest[..width]);
                rest = &rest[width..];
                continue;
            }
            // `{` opening an argument: its name runs to `}` or `:`.
            let end = rest.find(['}', ':']).unwrap_or(rest.len());
            if &rest[1..end] == "self" {
                renamed.push('{');
                renamed.push_str(CAPTURED_SELF);
                found = true;
            } else {
                renamed.push_str(&rest[..end]);
            }
            rest = &rest[end..];
        }
        renamed.push_str(rest);
        found.then(|| syn::LitStr::new(&renamed, literal.span()).token())
    }
}

impl VisitMut for RenameSelf {
    fn visit_expr_path_mut(&mut self, expr: &mut ExprPath) {
        if expr.qself.is_none() && expr.path.segments.len() == 1 && expr.path.segments[0].ident == "self" {
            let span = expr.path.segments[0].ident.span();
            expr.path.segments[0].ident = Self::renamed(span);
        }
        visit_mut::visit_expr_path_mut(self, expr);
    }

    fn visit_item_mut(&mut self, _: &mut syn::Item) {
        // A nested item's `self` is its own.
    }

    fn visit_macro_mut(&mut self, mac: &mut Macro) {
        let arguments = mac.path.segments.last().is_some_and(|segment| formats(&segment.ident));
        mac.tokens = Self::rename(std::mem::take(&mut mac.tokens), arguments);
    }
}
