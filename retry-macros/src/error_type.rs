//! The function's error type, as the expansion names and handles it: the
//! type itself (as written, or through an alias's `Result`), where errors
//! about it point, and how the call classifies it and makes rejections into
//! it. Part of the expansion, kept apart as the one place that reads the
//! error type.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::{ReturnType, Signature};

use crate::respan::respan;
use crate::types::erase_impl_trait;
use crate::validate::{ErrorType, Plan};

/// The error type as written, or the whole return type when it is an alias.
pub(crate) fn error_span(sig: &Signature, error_type: &ErrorType) -> Span {
    match (error_type, &sig.output) {
        (ErrorType::Named(ty), _) => ty.span(),
        (ErrorType::Inferred, ReturnType::Type(_, ty)) => ty.span(),
        (ErrorType::Inferred, ReturnType::Default) => Span::call_site(),
    }
}

/// The error type `E`, as a type the expansion can name: as written, or
/// through the return type (`<io::Result<T> as ResultType>::Error`).
pub(crate) fn error_type_tokens(sig: &Signature, error_type: &ErrorType, rt: &TokenStream) -> TokenStream {
    match (error_type, &sig.output) {
        (ErrorType::Named(ty), _) => quote!(#ty),
        (ErrorType::Inferred, ReturnType::Type(_, ty)) => {
            let erased = erase_impl_trait(ty);
            quote!(<#erased as #rt::probe::ResultType>::Error)
        }
        // Not a `Result`: `validate` has reported it, nothing is expanded.
        (ErrorType::Inferred, ReturnType::Default) => quote!(()),
    }
}

/// How the call classifies its errors and makes rejections into them: the
/// traits (`Classify`, `From<Rejection>`), checked at the error type so a
/// missing one is reported there in words; or `classify = path`, with the
/// rejection conversion the error type allows (autoref specialization: its
/// `From<Rejection>`, else `Error::Rejected` for a `stormproof::Error<X>`).
pub(crate) fn error_handling(
    plan: &Plan,
    error_ty: &TokenStream,
    error_span: Span,
    rt: &TokenStream,
    public: &TokenStream,
) -> TokenStream {
    match &plan.classify {
        None => {
            // Its result, two function pointers, made when the call is built:
            // the bound is then checked at this one call, and a missing trait
            // is one error. (The function itself, a handling of no size,
            // would carry the bound to every use of the handling's type, and
            // repeat the error at each.)
            let by_traits = respan(quote!(<#error_ty as #public::ResilientError>::handling), error_span);
            quote!(#by_traits())
        }
        Some(path) => {
            // The function is given to a binding of the type it must have,
            // and the conversion asked of the trait by name: a function of
            // another type, or an error type that cannot carry a rejection,
            // is one error at the user's tokens, naming no function of the
            // library.
            let fn_type = respan(quote!(fn(&#error_ty) -> #public::ErrorClass), path.span());
            let handling = respan(quote!(#rt::RejectionConverter::<#error_ty>::classify_with), path.span());
            quote!({
                let classify: #fn_type = #path;
                #handling((&&&&#rt::probe::RejectProbe::<#error_ty>::new()).converter(), classify)
            })
        }
    }
}
