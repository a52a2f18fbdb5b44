//! What `validate` and `expand` both need to know about types as written.

use proc_macro2::Span;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::visit_mut::{self, VisitMut};
use syn::{
    GenericArgument, Lifetime, PathArguments, ReceiverKind, ReturnType, Signature, Type, TypeInfer,
    TypeReference,
};

/// The `E` of the function's `Result<T, E>`, when it can be named.
pub(crate) enum ErrorType {
    /// Written out, as in `Result<T, ApiError>`.
    Named(Box<Type>),
    /// Hidden behind an alias such as `io::Result<T>`: the compiler infers it.
    Inferred,
}

/// `ty` without the invisible and parenthesised groups around it.
pub(crate) fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => peel(&group.elem),
        Type::Paren(paren) => peel(&paren.elem),
        other => other,
    }
}

/// Whether `ty` mentions `impl Trait`, which cannot be named in a turbofish or a `let`.
pub(crate) fn mentions_impl_trait(ty: &Type) -> bool {
    mentions(ty.to_token_stream(), &|ident| ident == "impl")
}

/// Whether the function returns a future (`impl Future<..>`, `Box<dyn Future<..>>`,
/// `BoxFuture<..>`): the output of a plain fn written as an `async fn` would be.
pub(crate) fn returns_future(sig: &Signature) -> bool {
    match &sig.output {
        ReturnType::Type(_, ty) => {
            mentions(ty.to_token_stream(), &|ident| ident.to_string().ends_with("Future"))
        }
        ReturnType::Default => false,
    }
}

/// Whether `tokens` hold an identifier, at any depth, that `is` says yes to.
fn mentions(tokens: TokenStream, is: &dyn Fn(&proc_macro2::Ident) -> bool) -> bool {
    tokens.into_iter().any(|token| match token {
        proc_macro2::TokenTree::Ident(ident) => is(&ident),
        proc_macro2::TokenTree::Group(group) => mentions(group.stream(), is),
        _ => false,
    })
}

/// `ty` with every `impl Trait` replaced by `_`, which the compiler infers
/// (as tracing-attributes erases them).
pub(crate) fn erase_impl_trait(ty: &Type) -> Type {
    struct Erase;
    impl VisitMut for Erase {
        fn visit_type_mut(&mut self, ty: &mut Type) {
            if let Type::ImplTrait(impl_trait) = ty {
                let underscore_token = syn::Token![_](impl_trait.impl_token.span);
                *ty = Type::Infer(TypeInfer { attrs: Vec::new(), underscore_token });
            } else {
                visit_mut::visit_type_mut(self, ty);
            }
        }
    }
    let mut ty = ty.clone();
    Erase.visit_type_mut(&mut ty);
    ty
}

/// A `&mut self` receiver (or `self: &mut Self`, or `self: Pin<&mut Self>`):
/// where its `self` is, and its lifetime if one is written.
pub(crate) struct MutableReceiver {
    pub self_span: Span,
    pub lifetime: Option<Lifetime>,
    /// `self: Pin<&mut Self>`: reborrowed with `Pin::as_mut`, not `&mut *`.
    pub pinned: bool,
}

/// The function's receiver, when it is a mutable reference, pinned or not.
pub(crate) fn mutable_receiver(sig: &Signature) -> Option<MutableReceiver> {
    let receiver = sig.receiver()?;
    let self_span = receiver.self_token.span;
    match &receiver.kind {
        ReceiverKind::Reference(_, lifetime, Some(_)) => {
            Some(MutableReceiver { self_span, lifetime: lifetime.clone(), pinned: false })
        }
        ReceiverKind::Typed(_, ty) => mutable_borrow(ty).map(|reference| MutableReceiver {
            self_span,
            lifetime: reference.lifetime.clone(),
            pinned: pinned_mut(ty).is_some(),
        }),
        _ => None,
    }
}

/// The `&mut` borrow a parameter of type `ty` holds: `ty` itself when it is
/// a `&mut T`, the pointer of a `Pin<&mut T>`.
pub(crate) fn mutable_borrow(ty: &Type) -> Option<&TypeReference> {
    match peel(ty) {
        Type::Reference(reference) if reference.mutability.is_some() => Some(reference),
        _ => pinned_mut(ty),
    }
}

/// The `&mut T` of a `Pin<&mut T>` (`Pin` imported, `pin::Pin`,
/// `std::pin::Pin`, `core::pin::Pin`), which cannot be cloned and which each
/// attempt reborrows with `Pin::as_mut` instead, as `&mut T` with `&mut *`.
/// A `Pin` by another path (`gpio::Pin<&mut T>`) is some other type, which
/// `Pin::as_mut` would not take: cloned as any owned parameter is.
pub(crate) fn pinned_mut(ty: &Type) -> Option<&TypeReference> {
    let Type::Path(path) = peel(ty) else {
        return None;
    };
    if path.qself.is_some() || !names_std_pin(&path.path) {
        return None;
    }
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return None;
    };
    match generics.args.first() {
        Some(GenericArgument::Type(pointer)) if generics.args.len() == 1 => match peel(pointer) {
            Type::Reference(reference) if reference.mutability.is_some() => Some(reference),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a path names `Pin` as std does: `Pin`, `pin::Pin`, or
/// `std::pin::Pin` and `core::pin::Pin` (with a leading `::` or not).
fn names_std_pin(path: &syn::Path) -> bool {
    let names: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
    match names.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["Pin"] | ["pin", "Pin"] => path.leading_colon.is_none(),
        ["std" | "core", "pin", "Pin"] => true,
        _ => false,
    }
}

/// The first reference in `ty` that may borrow from a `&mut` reference
/// with lifetime `from`: one with that named lifetime, or with an elided or
/// `'_` lifetime when `elided` says elision gives those `from`'s lifetime.
pub(crate) fn borrow_of(ty: &Type, from: Option<&Lifetime>, elided: bool) -> Option<TokenStream> {
    let borrows = |lifetime: Option<&Lifetime>| match lifetime {
        None => elided,
        Some(lifetime) if lifetime.ident == "_" => elided,
        Some(lifetime) => from.is_some_and(|from| from.ident == lifetime.ident),
    };
    let inner = |ty: &Type| borrow_of(ty, from, elided);
    match peel(ty) {
        Type::Reference(reference) => {
            if borrows(reference.lifetime.as_ref()) {
                Some(reference.to_token_stream())
            } else {
                inner(&reference.elem)
            }
        }
        Type::Tuple(tuple) => tuple.elems.iter().find_map(inner),
        Type::Array(array) => inner(&array.elem),
        Type::Slice(slice) => inner(&slice.elem),
        Type::Path(path) => path.path.segments.iter().find_map(|segment| match &segment.arguments {
            PathArguments::AngleBracketed(generics) => generics.args.iter().find_map(|arg| match arg {
                GenericArgument::Type(t) => inner(t),
                GenericArgument::Lifetime(l) if borrows(Some(l)) => Some(l.to_token_stream()),
                _ => None,
            }),
            _ => None,
        }),
        _ => None,
    }
}

/// The `E` of `Result<T, E>`, or an error if the function does not return a `Result`.
pub(crate) fn error_type(sig: &Signature) -> syn::Result<ErrorType> {
    const MESSAGE: &str =
        "a #[resilient] fn must return a `Result`: the error of each attempt decides whether to retry";
    let ty = match &sig.output {
        ReturnType::Type(_, ty) => peel(ty),
        ReturnType::Default => return Err(syn::Error::new(sig.ident.span(), MESSAGE)),
    };
    let Type::Path(path) = ty else {
        return Err(syn::Error::new_spanned(ty, MESSAGE));
    };
    let Some(last) = path.path.segments.last() else {
        return Err(syn::Error::new_spanned(ty, MESSAGE));
    };
    if NOT_RESULTS.iter().any(|name| last.ident == name) {
        return Err(syn::Error::new_spanned(ty, MESSAGE));
    }
    // Any other path may be an alias (`io::Result<T>`, `AppResult<T>`): the
    // compiler checks it through the inferred error type.
    let PathArguments::AngleBracketed(generics) = &last.arguments else {
        return Ok(ErrorType::Inferred);
    };
    if last.ident != "Result" {
        return Ok(ErrorType::Inferred);
    }
    let types: Vec<&Type> = generics
        .args
        .iter()
        .filter_map(|arg| match arg {
            GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
        .collect();
    match types.as_slice() {
        [_, error] if !mentions_impl_trait(error) => Ok(ErrorType::Named(Box::new((*error).clone()))),
        _ => Ok(ErrorType::Inferred),
    }
}

/// Types that are certainly not a `Result`, to say so in words rather than
/// as a type mismatch inside the expansion.
const NOT_RESULTS: &[&str] = &[
    "Option", "Vec", "String", "Box", "Poll", "bool", "char", "str", "u8", "u16", "u32", "u64", "u128",
    "usize", "i8", "i16", "i32", "i64", "i128", "isize", "f32", "f64",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impl_trait_is_erased_at_any_depth() {
        let ty: Type = syn::parse_quote!(Result<(impl Display, Vec<impl Debug>), &'a [impl Clone; 3]>);
        let erased = erase_impl_trait(&ty);
        assert!(mentions_impl_trait(&ty));
        assert!(!mentions_impl_trait(&erased));
        assert_eq!(erased.to_token_stream().to_string(), "Result < (_ , Vec < _ >) , & 'a [_ ; 3] >");
    }
}
