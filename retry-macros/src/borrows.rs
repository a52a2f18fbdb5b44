//! The `&mut` borrows an attempt cannot be given, each said at the borrow
//! rather than as a borrow or `Clone` error inside the expansion: one the
//! function returns, one a hedged round would share, and one inside an
//! owned parameter that every attempt copies.

use quote::ToTokens;
use syn::{FnArg, Meta, Pat, PatType, ReceiverKind, ReturnType, Signature, Type, TypeReference};

use crate::rewrite::{borrowed, cfg_attr_metas};
use crate::types::{borrow_of, mutable_borrow, mutable_receiver, peel, pinned_mut};

/// A `&mut self` method that returns a borrow of `self`, or a fn that
/// returns a borrow of a `&mut T` parameter, cannot retry: each attempt
/// reborrows it, and the borrow checker cannot end a reborrow that may be
/// returned before the next iteration takes another. Said here, at the
/// borrow in the return type, instead of as a borrow error inside the
/// expansion.
pub(crate) fn no_mutable_borrow_returned(sig: &Signature) -> syn::Result<()> {
    let ReturnType::Type(_, output) = &sig.output else {
        return Ok(());
    };
    if let Some(receiver) = mutable_receiver(sig)
        && let Some(tokens) = borrow_of(output, receiver.lifetime.as_ref(), true)
    {
        let method = if receiver.pinned { "`self: Pin<&mut Self>`" } else { "`&mut self`" };
        return Err(syn::Error::new_spanned(
            tokens,
            format!(
                "a {method} method that returns a borrow of `self` cannot retry: every attempt reborrows `self`, and the borrow checker cannot end a borrow that may be returned (see \"Function shapes, and the one limitation\" in the README); return an owned value, or set `max_attempts = 1`"
            ),
        ));
    }
    // Elision gives the output's elided lifetimes a borrowed receiver's, else
    // the parameters' only one (with more, the compiler refuses the elision).
    let elided_from_receiver = sig.receiver().is_some_and(|receiver| {
        match &receiver.kind {
        ReceiverKind::Value => false,
        ReceiverKind::Reference(..) => true,
        ReceiverKind::Typed(_, ty) => ty.to_token_stream().into_iter().any(|token| {
            matches!(token, proc_macro2::TokenTree::Punct(p) if p.as_char() == '&' || p.as_char() == '\'')
        }),
        _ => true,
    }
    });
    for input in &sig.inputs {
        if let FnArg::Typed(typed) = input
            && let Some(reference) = mutable_borrow(&typed.ty)
            && let Some(tokens) = borrow_of(output, reference.lifetime.as_ref(), !elided_from_receiver)
        {
            let name = match &*typed.pat {
                Pat::Ident(pat) => format!("`{}`", pat.ident),
                _ => "it".to_owned(),
            };
            return Err(syn::Error::new_spanned(
                tokens,
                format!(
                    "a fn that returns a borrow of a `&mut` parameter cannot retry: every attempt reborrows {name}, and the borrow checker cannot end a borrow that may be returned (see \"Function shapes, and the one limitation\" in the README); return an owned value, or set `max_attempts = 1`"
                ),
            ));
        }
    }
    Ok(())
}

/// The attempts of a hedged round run at the same time, and only one of
/// them could hold a `&mut` borrow: said at the `&mut`, not as a borrow
/// error inside the expansion. A `&mut` inside an owned parameter's tuple
/// or array is one too: each hedge would need a copy of it.
pub(crate) fn no_mutable_borrow_hedged(sig: &Signature) -> syn::Result<()> {
    const MESSAGE: &str = "a hedged fn cannot take `&mut` parameters: the attempts of a round run at the same time, and only one of them could hold the borrow; take `&self` / `&T` or an owned value, or leave out `hedge_after_ms`";
    if let Some(receiver) = mutable_receiver(sig) {
        return Err(syn::Error::new(receiver.self_span, MESSAGE));
    }
    for input in &sig.inputs {
        if let FnArg::Typed(typed) = input
            && let Some(reference) = mutable_borrow(&typed.ty).or_else(|| copied_mutable_borrow(typed))
            && let Some(mutability) = reference.mutability
        {
            return Err(syn::Error::new(mutability.span, MESSAGE));
        }
    }
    Ok(())
}

/// Every attempt takes its own copy of an owned parameter, and a `&mut`
/// inside one (`(conn, n): (&mut Conn, u32)`) cannot be copied: said at the
/// `&mut`, rather than as "`&mut Conn: Clone` is not satisfied" at the type.
/// Each such parameter is reported.
pub(crate) fn no_mutable_borrow_copied(sig: &Signature) -> syn::Result<()> {
    const MESSAGE: &str = "a `&mut` inside a parameter's tuple or array cannot retry: every attempt takes its own copy of an owned parameter, and a `&mut` cannot be copied; take it as a parameter of its own (`conn: &mut Conn`, which every attempt reborrows), or set `max_attempts = 1`";
    let mut errors: Option<syn::Error> = None;
    for input in &sig.inputs {
        if let FnArg::Typed(typed) = input
            && let Some(reference) = copied_mutable_borrow(typed)
        {
            let error = syn::Error::new_spanned(reference, MESSAGE);
            match &mut errors {
                Some(errors) => errors.combine(error),
                None => errors = Some(error),
            }
        }
    }
    errors.map_or(Ok(()), Err)
}

/// A `&mut` (or `Pin<&mut>`) an attempt's copy of an owned parameter would
/// hold: inside its tuple or array type, where a binding of its pattern
/// takes it (`(_, n)` takes none). A `&T` or `&mut T` parameter is not
/// copied but borrowed again, and what a struct's fields hold is not known
/// from its name: neither is looked into. Nor is a parameter under a
/// `#[cfg]`: compiled out, it has no copies (they carry its `#[cfg]`), and
/// whether it is cannot be told here; compiled in, the compiler still
/// refuses its copy, at its type.
fn copied_mutable_borrow(typed: &PatType) -> Option<&TypeReference> {
    if borrowed(&typed.ty).is_some() || typed.attrs.iter().any(|attr| conditional(&attr.meta)) {
        return None;
    }
    match &*typed.pat {
        // The parameter's own `ref` moves to the attempt's copy: it copies too.
        Pat::Ident(pat) if pat.subpat.is_none() => mutable_borrow_inside(&typed.ty),
        pat => bound_mutable_borrow(pat, &typed.ty),
    }
}

/// The `&mut` a binding of `pat`, matched against `ty`, takes a copy of.
fn bound_mutable_borrow<'t>(pat: &Pat, ty: &'t Type) -> Option<&'t TypeReference> {
    match pat {
        // A shared `ref` inside the pattern borrows the argument (the rewrite's
        // `take_bindings` copies none); its sub-pattern's bindings may copy.
        Pat::Ident(pat) if pat.by_ref.is_some() && pat.mutability.is_none() => {
            pat.subpat.as_ref().and_then(|(_, sub)| bound_mutable_borrow(sub, ty))
        }
        Pat::Ident(_) => mutable_borrow_inside(ty),
        Pat::Paren(pat) => bound_mutable_borrow(&pat.pat, ty),
        Pat::Type(pat) => bound_mutable_borrow(&pat.pat, ty),
        Pat::Tuple(pat) => match peel(ty) {
            Type::Tuple(tuple) => {
                // Elements before a `..` match from the front, those after it from the back.
                let rest = pat.elems.iter().position(|elem| matches!(elem, Pat::Rest(_)));
                let front = rest.unwrap_or(pat.elems.len());
                let back = rest.map_or(0, |at| pat.elems.len() - at - 1);
                let fronts = pat.elems.iter().take(front).zip(tuple.elems.iter());
                let backs = pat.elems.iter().rev().take(back).zip(tuple.elems.iter().rev());
                fronts.chain(backs).find_map(|(pat, ty)| bound_mutable_borrow(pat, ty))
            }
            _ => None,
        },
        // Every element is of the element type, and so is each of a
        // `rest @ ..` binding's.
        Pat::Slice(pat) => {
            let elem = match peel(ty) {
                Type::Array(array) => &array.elem,
                Type::Slice(slice) => &slice.elem,
                _ => return None,
            };
            pat.elems.iter().find_map(|pat| bound_mutable_borrow(pat, elem))
        }
        _ => None,
    }
}

/// Whether an attribute may compile its parameter out: `#[cfg(..)]`, or a
/// `#[cfg_attr(pred, ..)]` that may make one (or that cannot be read).
fn conditional(meta: &Meta) -> bool {
    match meta {
        Meta::List(list) if list.path.is_ident("cfg_attr") => {
            cfg_attr_metas(list).is_none_or(|metas| metas.iter().skip(1).any(conditional))
        }
        meta => meta.path().is_ident("cfg"),
    }
}

/// A `&mut` (or `Pin<&mut>`) anywhere in the tuples and arrays `ty` is made of.
fn mutable_borrow_inside(ty: &Type) -> Option<&TypeReference> {
    match peel(ty) {
        Type::Reference(reference) if reference.mutability.is_some() => Some(reference),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(mutable_borrow_inside),
        Type::Array(array) => mutable_borrow_inside(&array.elem),
        Type::Slice(slice) => mutable_borrow_inside(&slice.elem),
        ty => pinned_mut(ty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parameters of `sig` whose copy would hold a `&mut`, by position.
    fn copied(sig: Signature) -> Vec<usize> {
        let typed = sig.inputs.iter().filter_map(|input| match input {
            FnArg::Typed(typed) => Some(typed),
            FnArg::Receiver(_) => None,
        });
        typed
            .enumerate()
            .filter(|(_, typed)| copied_mutable_borrow(typed).is_some())
            .map(|(at, _)| at)
            .collect()
    }

    #[test]
    fn a_mut_borrow_is_found_where_a_binding_copies_it_and_nowhere_else() {
        let sig: Signature = syn::parse_quote! {
            fn f(
                whole: (u8, &mut u8),
                (a, _): (&mut u8, u8),
                (_, b): (&mut u8, u8),
                (.., c): (u8, &mut u8),
                (d, ..): (u8, &mut u8),
                [first, rest @ ..]: [&mut u8; 3],
                [_, ..]: [&mut u8; 3],
                [_, rest @ ..]: [&mut u8; 3],
                [_, ref shared_rest @ ..]: [&mut u8; 3],
                pinned: (Pin<&mut u8>,),
                ref all: [&mut u8; 1],
                (ref shared, n): ((&mut u8,), u8),
                (ref mut unique, m): ((&mut u8,), u8),
                reborrowed: &mut u8,
                shared: &(&mut u8,),
                callback: fn(&mut u8),
                gpio: gpio::Pin<&mut u8>,
                top_pin: Pin<&mut u8>,
                [_, ref mut unique_rest @ ..]: [&mut u8; 3],
                #[cfg(any())] compiled_out: (&mut u8, u8),
                #[cfg_attr(all(), cfg(any()))] (maybe_out, _): (&mut u8, u8),
                #[cfg_attr(test, allow(unused))] linted: (&mut u8, u8),
            )
        };
        assert_eq!(copied(sig), [0, 1, 3, 5, 7, 9, 10, 12, 18, 21]);
    }
}
