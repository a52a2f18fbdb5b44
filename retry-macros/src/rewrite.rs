//! The rewrites that let a body run once per attempt: fresh copies of the
//! arguments before each attempt, a fresh reborrow of a `&mut self`
//! receiver, and a fresh clone of an owned receiver for a hedged attempt.
//! `expand` wires them into the retry loop.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::token::Mut;
use syn::visit_mut::{self, VisitMut};
use syn::{Attribute, Block, ExprPath, FnArg, Ident, Macro, Pat, ReceiverKind, Signature, Type};

use crate::types::peel;

/// Statements giving each attempt its own copy of the arguments.
pub(crate) struct Fresh {
    /// Before the attempt: clones of owned arguments, reborrows of `&mut` ones.
    pub(crate) before: Vec<TokenStream>,
    /// First thing in the attempt: moves those into it, so that the attempt
    /// owns them (and is `Send` whenever they are) instead of borrowing them.
    pub(crate) inside: Vec<TokenStream>,
}

/// Owned parameters are cloned for every attempt (a non-`Clone` one fails
/// to compile right at the parameter); `&T` parameters are copied; `&mut T`
/// parameters are reborrowed by the attempt. The `mut` of a binding moves
/// from the signature to the per-attempt copy or reborrow, the one the body
/// actually mutates: a body that reassigns `mut text: &str` or moves
/// `mut buf: &mut [u8]` leaves the next attempt the argument as passed. A
/// parameter's `#[cfg]` and lint attributes go with its copies.
pub(crate) fn fresh_arguments(sig: &mut Signature) -> Fresh {
    let mut fresh = Fresh { before: Vec::new(), inside: Vec::new() };
    for input in &mut sig.inputs {
        let FnArg::Typed(typed) = input else {
            continue;
        };
        let copied = copies_inside(&typed.ty, &typed.pat);
        let (cfgs, expects) = parameter_attributes(&mut typed.attrs, copied);
        match peel(&typed.ty) {
            Type::Reference(reference) => {
                let shared = reference.mutability.is_none();
                if let Pat::Ident(pat) = &mut *typed.pat
                    && pat.by_ref.is_none()
                    && pat.subpat.is_none()
                {
                    let mutability = pat.mutability.take();
                    let ident = &pat.ident;
                    // A shared reference is `Copy`: the attempt's `let` copies it;
                    // only a `mut` binding needs that copy.
                    if !shared {
                        fresh.before.push(quote!(#(#cfgs)* let #ident = &mut *#ident;));
                    }
                    if !shared || mutability.is_some() {
                        fresh.inside.push(quote! {
                            #(#cfgs)*
                            #(#expects)*
                            #[allow(clippy::redundant_locals)]
                            let #mutability #ident = #ident;
                        });
                    }
                }
            }
            _ => {
                let span = typed.ty.span();
                // `ref mut buf: Vec<u8>` binds the argument itself, which a
                // mutation would leave changed for the next attempt: its
                // `ref` moves to the per-attempt copy, as a `mut` does.
                let by_ref = match &mut *typed.pat {
                    Pat::Ident(pat) if pat.subpat.is_none() => pat.by_ref.take(),
                    _ => None,
                };
                let mut bindings = Vec::new();
                take_bindings(&mut typed.pat, &mut bindings);
                // A `ref mut` copy borrows the clone mutably.
                let before_mutability = by_ref.and(typed_mutability(&bindings));
                for (mutability, ident) in bindings {
                    let clone = quote_spanned! {span=>
                        ::core::clone::Clone::clone(&#ident)
                    };
                    fresh.before.push(quote! {
                        #(#cfgs)*
                        #[allow(clippy::clone_on_copy, clippy::redundant_clone)]
                        let #before_mutability #ident = #clone;
                    });
                    fresh.inside.push(quote! {
                        #(#cfgs)*
                        #(#expects)*
                        #[allow(clippy::redundant_locals, clippy::toplevel_ref_arg)]
                        let #by_ref #mutability #ident = #ident;
                    });
                }
            }
        }
    }
    fresh
}

/// The `key` parameter is read by the attribute itself (it makes the
/// call's idempotency key from it before the first attempt), so a body that
/// never reads it has not left it unused: its per-attempt copy is marked
/// used, lest the compiler advise renaming it `_key`, which `key = ..`
/// would then have to follow. Not when the parameter says `#[expect]`
/// (the user's way to quiet it before): the use would leave the
/// expectation unfulfilled, an error under `#![deny(warnings)]`. Read from
/// the signature before [`fresh_arguments`] turns that `#[expect]` into an
/// `#[allow]` there.
pub(crate) fn key_is_used(sig: &Signature, key: Option<&Ident>) -> Option<TokenStream> {
    let key = key?;
    let expects = sig.inputs.iter().any(|input| match input {
        FnArg::Typed(typed) => {
            matches!(&*typed.pat, Pat::Ident(pat) if pat.ident == *key)
                && typed.attrs.iter().any(|attr| attr.path().is_ident("expect"))
        }
        FnArg::Receiver(_) => false,
    });
    (!expects).then(|| quote!(let _ = &#key;))
}

/// The `mut` of a single binding.
fn typed_mutability(bindings: &[(Option<Mut>, Ident)]) -> Option<Mut> {
    bindings.first().and_then(|(mutability, _)| *mutability)
}

/// Whether `fresh_arguments` gives the parameter a copy inside the attempt:
/// every binding of an owned parameter, a `&mut` one, a `mut` `&T` one.
fn copies_inside(ty: &Type, pat: &Pat) -> bool {
    match (peel(ty), pat) {
        (Type::Reference(reference), Pat::Ident(pat)) => {
            pat.by_ref.is_none()
                && pat.subpat.is_none()
                && (reference.mutability.is_some() || pat.mutability.is_some())
        }
        (Type::Reference(_), _) => false,
        _ => true,
    }
}

/// The attributes a parameter's per-attempt copies take: its `#[cfg]`s and
/// its lint attributes (`#[allow]`, `#[warn]`, `#[deny]`, `#[forbid]`), so
/// that an unused or oddly named parameter the user allowed stays allowed
/// at the copies; and, apart, its `#[expect]`s, which only the copy inside
/// the attempt (the binding the body uses, or leaves unused) can fulfil:
/// when there is such a copy, the parameter and the copy before the
/// attempt take them as `#[allow]`, lest they be reported unfulfilled there.
fn parameter_attributes(attrs: &mut [Attribute], copied: bool) -> (Vec<Attribute>, Vec<Attribute>) {
    const LINTS: &[&str] = &["cfg", "cfg_attr", "allow", "warn", "deny", "forbid"];
    let mut expects = Vec::new();
    if copied {
        for attr in attrs.iter_mut().filter(|attr| attr.path().is_ident("expect")) {
            expects.push(attr.clone());
            if let syn::Meta::List(list) = &mut attr.meta
                && let Some(segment) = list.path.segments.last_mut()
            {
                segment.ident = Ident::new("allow", segment.ident.span());
            }
        }
    }
    let kept =
        attrs.iter().filter(|attr| LINTS.iter().any(|name| attr.path().is_ident(name))).cloned().collect();
    (kept, expects)
}

/// `self` is a keyword, so it cannot be shadowed by a per-attempt reborrow
/// the way a `&mut T` parameter is; instead the body's `self` becomes
/// `__self`, bound to `&mut *self` before each attempt (as async-trait
/// renames it). Paths such as `self::item` and nested items keep theirs.
pub(crate) fn reborrow_receiver(block: &mut Block, receiver: Span, fresh: &mut Fresh) {
    let renamed = rename_self(block, receiver);
    let receiver = Ident::new("self", receiver);
    fresh.before.push(quote!(let #renamed = &mut *#receiver;));
    fresh.inside.push(quote!(#[allow(clippy::redundant_locals)] let #renamed = #renamed;));
}

/// A hedged attempt is an `async move` made by a closure the runtime calls
/// again for every hedge: an owned receiver (`self`, `self: Arc<Self>`)
/// moved into the first would be gone for the next. Like an owned
/// parameter, it is cloned for every attempt instead (a receiver that is
/// not `Clone` fails to compile at its type), the body's `self` renamed to
/// the clone. The `mut` of `mut self` moves to the clone.
pub(crate) fn clone_receiver(block: &mut Block, sig: &mut Signature, fresh: &mut Fresh) {
    let Some(FnArg::Receiver(receiver)) = sig.inputs.first_mut() else {
        return;
    };
    let type_span = match &receiver.kind {
        ReceiverKind::Value => receiver.self_token.span,
        ReceiverKind::Typed(_, ty) if !matches!(peel(ty), Type::Reference(_)) => ty.span(),
        _ => return,
    };
    let mutability = receiver.mutability.take();
    let renamed = rename_self(block, receiver.self_token.span);
    let receiver = Ident::new("self", receiver.self_token.span);
    let clone = quote_spanned!(type_span=> ::core::clone::Clone::clone(&#receiver));
    fresh
        .before
        .push(quote!(#[allow(clippy::clone_on_copy, clippy::redundant_clone)] let #renamed = #clone;));
    fresh.inside.push(quote!(#[allow(clippy::redundant_locals)] let #mutability #renamed = #renamed;));
}

/// Renames the body's `self` to the `__self` it returns. That `__self` is
/// hygienic (mixed-site, at the receiver): a parameter or a binding of the
/// user's named `__self` neither captures it nor is captured by it.
fn rename_self(block: &mut Block, receiver: Span) -> Ident {
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

/// The by-value bindings of a pattern, with their `mut` taken out of it.
fn take_bindings(pat: &mut Pat, out: &mut Vec<(Option<Mut>, Ident)>) {
    match pat {
        Pat::Ident(pat) => {
            if pat.by_ref.is_none() {
                out.push((pat.mutability.take(), pat.ident.clone()));
            }
            if let Some((_, sub)) = &mut pat.subpat {
                take_bindings(sub, out);
            }
        }
        Pat::Or(or) => {
            // Every alternative binds the same names; one set of copies serves them all.
            let mut first = true;
            for case in &mut or.cases {
                let mut ignored = Vec::new();
                take_bindings(case, if first { &mut *out } else { &mut ignored });
                first = false;
            }
        }
        Pat::Paren(pat) => take_bindings(&mut pat.pat, out),
        Pat::Reference(pat) => take_bindings(&mut pat.pat, out),
        Pat::Slice(pat) => pat.elems.iter_mut().for_each(|p| take_bindings(p, out)),
        Pat::Tuple(pat) => pat.elems.iter_mut().for_each(|p| take_bindings(p, out)),
        Pat::TupleStruct(pat) => pat.elems.iter_mut().for_each(|p| take_bindings(p, out)),
        Pat::Struct(pat) => pat.fields.iter_mut().for_each(|field| take_bindings(&mut field.pat, out)),
        Pat::Type(pat) => take_bindings(&mut pat.pat, out),
        _ => {}
    }
}
