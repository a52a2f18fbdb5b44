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

/// What a macro's arguments are, as far as `self` is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arguments {
    /// Tokens of unknown meaning: each `self` is renamed.
    Other,
    /// A format string and its arguments (std's, `log`'s, `anyhow`'s): only
    /// there is `"{self}"` a capture, and only there can a named argument be added.
    Format,
    /// A `tracing` event's: fields, then a format string and its arguments.
    Event,
    /// A `tracing` span's: a name, then fields.
    Span,
    /// `stringify!`'s: spelt out, never read as names, so its `self` is
    /// left as written (`stringify!(self)` is `"self"`, as without the attribute).
    Verbatim,
}

/// What the arguments of a macro of this name are.
fn arguments(name: &Ident) -> Arguments {
    const EVENTS: &[&str] = &["trace", "debug", "info", "warn", "error", "event"];
    const SPANS: &[&str] = &["span", "trace_span", "debug_span", "info_span", "warn_span", "error_span"];
    if name == "stringify" {
        Arguments::Verbatim
    } else if EVENTS.iter().any(|event| name == event) {
        Arguments::Event
    } else if SPANS.iter().any(|span| name == span) {
        Arguments::Span
    } else if formats(name) {
        Arguments::Format
    } else {
        Arguments::Other
    }
}

/// Whether a macro of this name takes a format string and its arguments.
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
        "anyhow",
        "bail",
        "ensure",
        "format_err",
    ];
    FORMATTING.iter().any(|formatting| name == formatting)
}

/// The named format argument an inline `{self}` becomes.
const CAPTURED_SELF: &str = "__stormproof_self";

impl RenameSelf {
    fn renamed(at: Span) -> Ident {
        Ident::new("__self", Span::mixed_site().located_at(at))
    }

    /// `self` renamed in a macro's tokens, which are `kind` of arguments
    /// (its own, or those of one invoked in them): a format string may
    /// capture `self`, and a `tracing` field may be named after it.
    fn rename(token_stream: TokenStream, kind: Arguments) -> TokenStream {
        match kind {
            Arguments::Verbatim => return token_stream,
            Arguments::Event | Arguments::Span => return Self::rename_fields(token_stream, kind),
            Arguments::Other | Arguments::Format => {}
        }
        let mut tokens: Vec<TokenTree> = token_stream.into_iter().collect();
        let mut captured = None;
        for i in 0..tokens.len() {
            let path_follows = matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':');
            // `name!(..)`: a macro invoked in these tokens.
            let invoked =
                match (i.checked_sub(2).map(|at| &tokens[at]), i.checked_sub(1).map(|at| &tokens[at])) {
                    (Some(TokenTree::Ident(name)), Some(TokenTree::Punct(p))) if p.as_char() == '!' => {
                        arguments(name)
                    }
                    _ => Arguments::Other,
                };
            // A format string comes first, or after a `,` (`write!(f, "..")`).
            let format_position = kind == Arguments::Format
                && (i == 0 || matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == ','));
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

    /// A `tracing` event or span names a field after the path that gives
    /// it (`info!(self.calls, "..")` records a field `self.calls`): a field
    /// written as a `self` path keeps its name, `?self.calls` made
    /// `self.calls = ?__self.calls`, and the `self.calls` of `self.calls =
    /// value` left as it is. The fields are an event's arguments before its
    /// message (its first argument that is a literal: `target: ".."` is
    /// not one) and a span's after its name; the rest is renamed as in any
    /// macro, an event's message and what follows as a format string's.
    fn rename_fields(token_stream: TokenStream, kind: Arguments) -> TokenStream {
        let tokens: Vec<TokenTree> = token_stream.into_iter().collect();
        let comma = |token: &TokenTree| matches!(token, TokenTree::Punct(p) if p.as_char() == ',');
        let mut out = TokenStream::new();
        let mut fields = kind == Arguments::Event;
        let mut start = 0;
        while start <= tokens.len() {
            let end = tokens[start..].iter().position(comma).map_or(tokens.len(), |at| start + at);
            let argument = &tokens[start..end];
            if matches!(argument.first(), Some(TokenTree::Literal(_))) && (kind == Arguments::Event) == fields
            {
                if kind == Arguments::Event {
                    let message = tokens[start..].iter().cloned().collect();
                    out.extend(Self::rename(message, Arguments::Format));
                    return out;
                }
                // A span's name: its fields follow.
                fields = true;
                out.extend(argument.iter().cloned());
            } else if fields {
                out.extend(Self::rename_field(argument));
            } else {
                out.extend(Self::rename(argument.iter().cloned().collect(), Arguments::Other));
            }
            out.extend(tokens.get(end).cloned());
            start = end + 1;
        }
        out
    }

    /// One argument in a `tracing` macro's fields (see [`Self::rename_fields`]).
    fn rename_field(argument: &[TokenTree]) -> TokenStream {
        let sigil = matches!(argument.first(), Some(TokenTree::Punct(p)) if matches!(p.as_char(), '?' | '%'));
        let (sigil, field) = argument.split_at(usize::from(sigil));
        // `self`, then `.name` as many times as written.
        let mut path = usize::from(matches!(field.first(), Some(TokenTree::Ident(i)) if i == "self"));
        while path > 0
            && matches!(field.get(path), Some(TokenTree::Punct(p)) if p.as_char() == '.')
            && matches!(field.get(path + 1), Some(TokenTree::Ident(_)))
        {
            path += 2;
        }
        let name: TokenStream = field[..path].iter().cloned().collect();
        let rest = &field[path..];
        let assigned = matches!(rest.first(), Some(TokenTree::Punct(p)) if p.as_char() == '=' && p.spacing() == proc_macro2::Spacing::Alone);
        if path == 0 || !(rest.is_empty() || (assigned && sigil.is_empty())) {
            return Self::rename(argument.iter().cloned().collect(), Arguments::Other);
        }
        let value: TokenStream = if rest.is_empty() {
            let sigil: TokenStream = sigil.iter().cloned().collect();
            let value = Self::rename(name.clone(), Arguments::Other);
            quote!(= #sigil #value)
        } else {
            Self::rename(rest.iter().cloned().collect(), Arguments::Other)
        };
        quote!(#name #value)
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
        let kind = mac.path.segments.last().map_or(Arguments::Other, |segment| arguments(&segment.ident));
        mac.tokens = Self::rename(std::mem::take(&mut mac.tokens), kind);
    }
}
