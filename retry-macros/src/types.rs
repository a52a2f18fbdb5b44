//! What `validate` and `expand` both need to know about types as written.

use proc_macro2::Span;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::visit_mut::{self, VisitMut};
use syn::{Lifetime, ReceiverKind, Signature, Type, TypeInfer};

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
    fn any_impl(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|token| match token {
            proc_macro2::TokenTree::Ident(ident) => ident == "impl",
            proc_macro2::TokenTree::Group(group) => any_impl(group.stream()),
            _ => false,
        })
    }
    any_impl(ty.to_token_stream())
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

/// A `&mut self` receiver (or `self: &mut Self`): where its `self` is, and
/// its lifetime if one is written.
pub(crate) struct MutableReceiver {
    pub self_span: Span,
    pub lifetime: Option<Lifetime>,
}

/// The function's receiver, when it is a mutable reference.
pub(crate) fn mutable_receiver(sig: &Signature) -> Option<MutableReceiver> {
    let receiver = sig.receiver()?;
    let self_span = receiver.self_token.span;
    match &receiver.kind {
        ReceiverKind::Reference(_, lifetime, Some(_)) => {
            Some(MutableReceiver { self_span, lifetime: lifetime.clone() })
        }
        ReceiverKind::Typed(_, ty) => match peel(ty) {
            Type::Reference(reference) if reference.mutability.is_some() => {
                Some(MutableReceiver { self_span, lifetime: reference.lifetime.clone() })
            }
            _ => None,
        },
        _ => None,
    }
}

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
