//! The rewrites that let a body run once per attempt: fresh copies of the
//! arguments before each attempt, a fresh reborrow of a `&mut self`
//! receiver, and a fresh clone of an owned receiver for a hedged attempt.
//! `expand` wires them into the retry loop.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::token::{Mut, Ref};
use syn::visit_mut::{self, VisitMut};
use syn::{
    Attribute, Block, FnArg, Ident, Meta, MetaList, Pat, PatIdent, ReceiverKind, Signature, Token, Type,
};

use crate::rename_self::rename_self;
use crate::types::{MutableReceiver, mutable_receiver, peel, pinned_mut};

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
        match borrowed(&typed.ty) {
            Some(borrowed) => {
                if let Pat::Ident(pat) = &mut *typed.pat
                    && pat.subpat.is_none()
                {
                    // `ref mut text: &str` binds the argument itself, which a
                    // reassignment would leave changed for the next attempt: its
                    // `ref` moves to the per-attempt copy, as a `mut` does.
                    let by_ref = pat.by_ref.take();
                    let mutability = pat.mutability.take();
                    let ident = pat.ident.clone();
                    // A `ref mut` copy borrows the reborrow (or copy) mutably.
                    let before_mutability = by_ref.and(mutability);
                    // A shared reference is `Copy`: the attempt's `let` copies it;
                    // only a `mut` binding needs that copy, and a `ref mut` one a
                    // copy of its own before the attempt.
                    let fresh_value = match borrowed {
                        Borrowed::Shared => before_mutability.map(|_| quote!(#ident)),
                        Borrowed::Mutable => Some(quote!(&mut *#ident)),
                        // `Pin::as_mut` reborrows through a `&mut` of the parameter:
                        // its binding is `mut` in the signature, whatever it was.
                        Borrowed::Pinned => {
                            pat.mutability = Some(Mut(ident.span()));
                            Some(quote!(::core::pin::Pin::as_mut(&mut #ident)))
                        }
                    };
                    if let Some(fresh_value) = fresh_value {
                        fresh.before.push(quote!(#(#cfgs)* let #before_mutability #ident = #fresh_value;));
                    }
                    // `copies_inside` decided it, from the same pattern.
                    if copied {
                        fresh.inside.push(quote! {
                            #(#cfgs)*
                            #(#expects)*
                            #[allow(clippy::redundant_locals, clippy::toplevel_ref_arg)]
                            let #by_ref #mutability #ident = #ident;
                        });
                    }
                }
            }
            None => {
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
                for (nested_ref, mutability, ident) in bindings {
                    // A `ref mut` deeper in the pattern (`(ref mut v, n)`, `ref mut all @ ..`)
                    // stays in the signature, borrowing the argument: the clone is of
                    // what it borrows, and the copy borrows the clone instead.
                    let by_ref = nested_ref.or(by_ref);
                    let source = match nested_ref {
                        Some(_) => quote_spanned!(span=> &*#ident),
                        None => quote_spanned!(span=> &#ident),
                    };
                    // A `ref mut` copy borrows the clone mutably.
                    let before_mutability = by_ref.and(mutability);
                    let clone = quote_spanned! {span=>
                        ::core::clone::Clone::clone(#source)
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
                && typed.attrs.iter().any(|attr| says_expect(&attr.meta))
        }
        FnArg::Receiver(_) => false,
    });
    (!expects).then(|| quote!(let _ = &#key;))
}

/// A parameter that an attempt borrows again instead of cloning.
pub(crate) enum Borrowed {
    /// `&T`: copied.
    Shared,
    /// `&mut T`: reborrowed, `&mut *x`.
    Mutable,
    /// `Pin<&mut T>`: reborrowed, `Pin::as_mut(&mut x)` (it is not `Clone`).
    Pinned,
}

/// How each attempt borrows a parameter of type `ty` again, or `None`: it
/// is owned, and each attempt clones it. `borrows` follows the same rule.
pub(crate) fn borrowed(ty: &Type) -> Option<Borrowed> {
    match peel(ty) {
        Type::Reference(reference) if reference.mutability.is_none() => Some(Borrowed::Shared),
        Type::Reference(_) => Some(Borrowed::Mutable),
        _ => pinned_mut(ty).map(|_| Borrowed::Pinned),
    }
}

/// Whether `fresh_arguments` gives the parameter a copy inside the attempt:
/// every binding of an owned parameter, a `&mut` or `Pin<&mut>` one, a `mut` `&T` one.
fn copies_inside(ty: &Type, pat: &Pat) -> bool {
    match (borrowed(ty), pat) {
        (Some(borrowed), Pat::Ident(pat)) => {
            pat.subpat.is_none()
                && (!matches!(borrowed, Borrowed::Shared) || pat.mutability.is_some() || pat.by_ref.is_some())
        }
        (Some(_), _) => false,
        (None, _) => true,
    }
}

/// The attributes a parameter's per-attempt copies take: its `#[cfg]`s and
/// its lint attributes (`#[allow]`, `#[warn]`, `#[deny]`, `#[forbid]`), so
/// that an unused or oddly named parameter the user allowed stays allowed
/// at the copies; and, apart, its `#[expect]`s, which only the copy inside
/// the attempt (the binding the body uses, or leaves unused) can fulfil:
/// when there is such a copy, the parameter and the copy before the
/// attempt take them as `#[allow]`, lest they be reported unfulfilled there.
/// An `#[expect]` under `#[cfg_attr(pred, ..)]` is one too.
fn parameter_attributes(attrs: &mut [Attribute], copied: bool) -> (Vec<Attribute>, Vec<Attribute>) {
    const LINTS: &[&str] = &["cfg", "cfg_attr", "allow", "warn", "deny", "forbid"];
    let mut expects = Vec::new();
    if copied {
        for attr in attrs.iter_mut().filter(|attr| says_expect(&attr.meta)) {
            expects.push(attr.clone());
            expect_to_allow(&mut attr.meta);
        }
    }
    let kept =
        attrs.iter().filter(|attr| LINTS.iter().any(|name| attr.path().is_ident(name))).cloned().collect();
    (kept, expects)
}

/// Whether an attribute is `#[expect(..)]`, or `#[cfg_attr(pred, .., expect(..), ..)]`.
fn says_expect(meta: &Meta) -> bool {
    match meta {
        Meta::List(list) if list.path.is_ident("expect") => true,
        Meta::List(list) if list.path.is_ident("cfg_attr") => {
            cfg_attr_metas(list).is_some_and(|metas| metas.iter().skip(1).any(says_expect))
        }
        _ => false,
    }
}

/// The `#[expect]`s of an attribute made `#[allow]`s, under `cfg_attr`s too.
fn expect_to_allow(meta: &mut Meta) {
    let Meta::List(list) = meta else {
        return;
    };
    if list.path.is_ident("expect") {
        if let Some(segment) = list.path.segments.last_mut() {
            segment.ident = Ident::new("allow", segment.ident.span());
        }
    } else if list.path.is_ident("cfg_attr")
        && let Some(mut metas) = cfg_attr_metas(list)
    {
        metas.iter_mut().skip(1).for_each(expect_to_allow);
        list.tokens = metas.to_token_stream();
    }
}

/// A `cfg_attr`'s predicate and attributes.
pub(crate) fn cfg_attr_metas(list: &MetaList) -> Option<Punctuated<Meta, Token![,]>> {
    list.parse_args_with(Punctuated::parse_terminated).ok()
}

/// `self` is a keyword, so it cannot be shadowed by a per-attempt reborrow
/// the way a `&mut T` parameter is; instead the body's `self` becomes
/// `__self`, bound to `&mut *self` before each attempt (as async-trait
/// renames it). Paths such as `self::item` and nested items keep theirs.
///
/// A `self: Pin<&mut Self>` is reborrowed with `Pin::as_mut(&mut self)`,
/// its binding made `mut` for that (which the signature's type ignores).
pub(crate) fn reborrow_receiver(block: &mut Block, sig: &mut Signature, fresh: &mut Fresh) {
    let Some(MutableReceiver { self_span, pinned, .. }) = mutable_receiver(sig) else {
        return;
    };
    let renamed = rename_self(block, self_span);
    let receiver = Ident::new("self", self_span);
    // The `mut` of `mut self: Pin<&mut Self>` (to call `self.as_mut()`)
    // goes to the reborrow the body uses, as well.
    let mut mutability = None;
    if pinned {
        if let Some(FnArg::Receiver(receiver)) = sig.inputs.first_mut() {
            mutability = receiver.mutability;
            receiver.mutability.get_or_insert(Mut(self_span));
        }
        fresh.before.push(quote!(let #renamed = ::core::pin::Pin::as_mut(&mut #receiver);));
    } else {
        fresh.before.push(quote!(let #renamed = &mut *#receiver;));
    }
    fresh.inside.push(quote!(#[allow(clippy::redundant_locals)] let #mutability #renamed = #renamed;));
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

/// Every binding `pat` makes, in order; of an `|` pattern, its first
/// alternative's (every alternative binds the same names).
pub(crate) fn pattern_bindings(pat: &Pat) -> Vec<&PatIdent> {
    fn walk<'p>(pat: &'p Pat, out: &mut Vec<&'p PatIdent>) {
        match pat {
            Pat::Ident(pat) => {
                out.push(pat);
                if let Some((_, sub)) = &pat.subpat {
                    walk(sub, out);
                }
            }
            Pat::Or(or) => or.cases.iter().take(1).for_each(|case| walk(case, out)),
            Pat::Paren(pat) => walk(&pat.pat, out),
            Pat::Reference(pat) => walk(&pat.pat, out),
            Pat::Slice(pat) => pat.elems.iter().for_each(|p| walk(p, out)),
            Pat::Tuple(pat) => pat.elems.iter().for_each(|p| walk(p, out)),
            Pat::TupleStruct(pat) => pat.elems.iter().for_each(|p| walk(p, out)),
            Pat::Struct(pat) => pat.fields.iter().for_each(|field| walk(&field.pat, out)),
            Pat::Type(pat) => walk(&pat.pat, out),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(pat, &mut out);
    out
}

/// The bindings of a pattern that each attempt needs a copy of: by value,
/// with their `mut` taken out of it (in every alternative of an `|`: one
/// set of copies serves them all); `ref mut`, left as it is. A shared
/// `ref` is not one: it borrows the argument, which no attempt can change
/// (what interior mutability changes, the attempts share, as they always
/// did), so it is neither cloned nor required to be `Clone`.
fn take_bindings(pat: &mut Pat, out: &mut Vec<(Option<Ref>, Option<Mut>, Ident)>) {
    for binding in pattern_bindings(pat) {
        match (binding.by_ref, binding.mutability) {
            (None, mutability) => out.push((None, mutability, binding.ident.clone())),
            (Some(_), Some(_)) => out.push((binding.by_ref, binding.mutability, binding.ident.clone())),
            (Some(_), None) => {}
        }
    }
    /// Takes the `mut` out of every by-value binding.
    struct TakeMut;
    impl VisitMut for TakeMut {
        fn visit_pat_ident_mut(&mut self, binding: &mut PatIdent) {
            if binding.by_ref.is_none() {
                binding.mutability = None;
            }
            visit_mut::visit_pat_ident_mut(self, binding);
        }
    }
    TakeMut.visit_pat_mut(pat);
}
