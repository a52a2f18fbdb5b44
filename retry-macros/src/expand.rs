//! Expansion: the function rewritten to run its body once per attempt.
//!
//! The retry loop is inlined into the function instead of calling a runtime
//! `retry(|| async { .. })`: a closure returning a future cannot reborrow
//! `&mut self` or a `&mut T` parameter for each attempt, and boxing would
//! cost an allocation per call. Inlined, each attempt is an `async` block
//! that borrows what the body borrows for as long as the attempt runs, and
//! the function's signature, generics and `Send`-ness stay exactly as
//! written. Only the wiring lives here; what an attempt does (guards,
//! timeouts, classification, the backoff sleep) is the runtime's.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::token::Mut;
use syn::{
    AttrStyle, FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Signature, Type,
    TypeInfer,
};

use crate::parse::Nested;
use crate::validate::{ErrorType, Plan};

/// The annotated function with the retry loop around its body.
pub(crate) fn expand(mut item: ItemFn, plan: &Plan) -> TokenStream {
    let krate = &plan.krate;
    // One import of the runtime: when `crate = "..."` names no such path, the
    // compiler reports it once, at that string, and not at every use.
    let runtime = Ident::new("__resilient", Span::mixed_site());
    let import = quote!(use #krate::__private as #runtime;);
    let rt = quote!(#runtime);
    // Mixed-site hygiene: the body cannot see (or shadow) these locals.
    let policy = Ident::new("__RESILIENT_POLICY", Span::mixed_site());
    let execution = Ident::new("__resilient_execution", Span::mixed_site());
    let step = Ident::new("__resilient_step", Span::mixed_site());
    let result = Ident::new("__resilient_result", Span::mixed_site());

    let config = attribute_config(&item.sig, plan, &rt);
    let pin = pin_output_type(&item.sig);
    let key = match &plan.key {
        Some(key) => {
            let key_of = respan(quote!(#rt::idempotency_key), key.span());
            quote_spanned!(key.span()=> ::core::option::Option::Some(#key_of(&#key)))
        }
        None => quote!(::core::option::Option::None),
    };
    // A missing `Classify` or `From<Rejection>` is reported at this call too:
    // point that at the error type, under the readable message, not at the attribute.
    let error_span = error_span(&item.sig, &plan.error_type);
    let callee = respan(quote!(#rt::Execution::attempt), error_span);
    let attempt = |future: TokenStream| {
        let call = quote_spanned!(error_span=> #callee(&mut #execution, #future));
        // The await is the attribute's: "await occurs here" points at `#[resilient]`.
        quote!(#call.await)
    };

    let body = &item.block;
    let run = if plan.max_attempts == 1 {
        // One attempt: no loop, so the body may move its parameters and nothing is cloned.
        let attempt_once = attempt(quote!(async { #pin #body }));
        quote! {
            match #attempt_once {
                #rt::Step::Done(#result) => #result,
                #rt::Step::Retry => ::core::unreachable!("#[resilient]: a retry was requested with `max_attempts = 1`"),
            }
        }
    } else {
        let fresh = fresh_arguments(&mut item.sig);
        let (before, inside) = (&fresh.before, &fresh.inside);
        let attempt_each = attempt(quote! {
            async {
                #pin
                #(#inside)*
                #body
            }
        });
        quote! {
            loop {
                let #step = {
                    #(#before)*
                    #attempt_each
                };
                match #step {
                    #rt::Step::Done(#result) => return #result,
                    #rt::Step::Retry => {}
                }
            }
        }
    };

    let (inner, outer): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
    let vis = &item.vis;
    let sig = &item.sig;
    quote! {
        #(#outer)*
        #vis #sig {
            #(#inner)*
            #import
            static #policy: #rt::Policy = #rt::Policy::from_attribute(#config);
            let mut #execution = #policy.execution(#key);
            #run
        }
    }
}

/// `tokens` moved to where `span` is, keeping their hygiene: errors about
/// them point at the user's code, while they resolve as before.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let proc_macro2::TokenTree::Group(group) = &token {
                let mut moved = proc_macro2::Group::new(group.delimiter(), respan(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                token = proc_macro2::TokenTree::Group(moved);
            }
            token.set_span(token.span().located_at(span));
            token
        })
        .collect()
}

/// The error type as written, or the whole return type when it is an alias.
fn error_span(sig: &Signature, error_type: &ErrorType) -> Span {
    match (error_type, &sig.output) {
        (ErrorType::Named(ty), _) => ty.span(),
        (ErrorType::Inferred, ReturnType::Type(_, ty)) => ty.span(),
        (ErrorType::Inferred, ReturnType::Default) => Span::call_site(),
    }
}

/// The `AttributeConfig` literal the policy is built from, at compile time.
fn attribute_config(sig: &Signature, plan: &Plan, rt: &TokenStream) -> TokenStream {
    let name = sig.ident.to_string();
    let name = name.strip_prefix("r#").unwrap_or(&name);
    let max_attempts = Literal::u32_suffixed(plan.max_attempts);
    let base_ms = Literal::u64_suffixed(plan.base_ms);
    let cap_ms = Literal::u64_suffixed(plan.cap_ms);
    let jitter = Ident::new(plan.jitter.variant(), Span::call_site());
    let attempt_timeout_ms = option(plan.attempt_timeout_ms.map(Literal::u64_suffixed));
    let deadline_ms = option(plan.deadline_ms.map(Literal::u64_suffixed));
    let breaker = option(plan.breaker.as_deref().map(Literal::string));
    let budget = option(plan.budget.as_deref().map(Literal::string));
    let bulkhead = option(plan.bulkhead.as_deref().map(Literal::string));
    let nested_retry = plan.nested == Nested::Retry;
    quote! {
        #rt::AttributeConfig {
            operation: ::core::concat!(::core::module_path!(), "::", #name),
            max_attempts: #max_attempts,
            base_ms: #base_ms,
            cap_ms: #cap_ms,
            jitter: #rt::Jitter::#jitter,
            attempt_timeout_ms: #attempt_timeout_ms,
            deadline_ms: #deadline_ms,
            breaker: #breaker,
            budget: #budget,
            bulkhead: #bulkhead,
            nested_retry: #nested_retry,
        }
    }
}

fn option(value: Option<Literal>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// A never-taken early `return` that fixes the attempt's output type to the
/// function's return type before the body is type-checked, so that `?` in
/// the body knows which error type to convert into.
fn pin_output_type(sig: &Signature) -> TokenStream {
    let ReturnType::Type(_, ty) = &sig.output else {
        return TokenStream::new();
    };
    let fake = Ident::new("__resilient_fake_return", Span::mixed_site());
    let erased = erase_impl_trait(ty);
    quote! {
        #[allow(
            unreachable_code,
            clippy::diverging_sub_expression,
            clippy::empty_loop,
            clippy::needless_return,
            clippy::unreachable
        )]
        if false {
            let #fake: #erased = loop {};
            return #fake;
        }
    }
}

/// `impl Trait` cannot be written in a `let`; `_` lets the compiler infer it.
fn erase_impl_trait(ty: &Type) -> Type {
    fn erase(ty: &mut Type) {
        match ty {
            Type::ImplTrait(it) => {
                *ty = Type::Infer(TypeInfer { underscore_token: syn::Token![_](it.span()) });
            }
            Type::Array(t) => erase(&mut t.elem),
            Type::Group(t) => erase(&mut t.elem),
            Type::Paren(t) => erase(&mut t.elem),
            Type::Ptr(t) => erase(&mut t.elem),
            Type::Reference(t) => erase(&mut t.elem),
            Type::Slice(t) => erase(&mut t.elem),
            Type::Tuple(t) => t.elems.iter_mut().for_each(erase),
            Type::Path(t) => {
                if let Some(qself) = &mut t.qself {
                    erase(&mut qself.ty);
                }
                for segment in &mut t.path.segments {
                    if let PathArguments::AngleBracketed(generics) = &mut segment.arguments {
                        for arg in &mut generics.args {
                            match arg {
                                GenericArgument::Type(t) => erase(t),
                                GenericArgument::AssocType(t) => erase(&mut t.ty),
                                _ => {}
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let mut ty = ty.clone();
    erase(&mut ty);
    ty
}

/// Statements giving each attempt its own copy of the arguments.
struct Fresh {
    /// Before the attempt: clones of owned arguments, reborrows of `&mut` ones.
    before: Vec<TokenStream>,
    /// First thing in the attempt: moves those into it, so that the attempt
    /// owns them (and is `Send` whenever they are) instead of borrowing them.
    inside: Vec<TokenStream>,
}

/// Owned parameters are cloned for every attempt (a non-`Clone` one fails
/// to compile right at the parameter); `&T` parameters are copied; `&mut T`
/// parameters and `self` are reborrowed by the attempt. The `mut` of an
/// owned binding moves from the signature to the per-attempt copy, the one
/// the body actually mutates.
fn fresh_arguments(sig: &mut Signature) -> Fresh {
    let mut fresh = Fresh { before: Vec::new(), inside: Vec::new() };
    for input in &mut sig.inputs {
        let FnArg::Typed(typed) = input else {
            continue;
        };
        match peel(&typed.ty) {
            Type::Reference(reference) if reference.mutability.is_some() => {
                if let Pat::Ident(pat) = &*typed.pat {
                    if pat.by_ref.is_none() && pat.mutability.is_none() && pat.subpat.is_none() {
                        let ident = &pat.ident;
                        fresh.before.push(quote!(let #ident = &mut *#ident;));
                        fresh.inside.push(quote!(let #ident = #ident;));
                    }
                }
            }
            Type::Reference(_) => {}
            _ => {
                let span = typed.ty.span();
                let mut bindings = Vec::new();
                take_bindings(&mut typed.pat, &mut bindings);
                for (mutability, ident) in bindings {
                    let clone = quote_spanned! {span=>
                        ::core::clone::Clone::clone(&#ident)
                    };
                    fresh.before.push(quote! {
                        #[allow(clippy::clone_on_copy, clippy::redundant_clone)]
                        let #ident = #clone;
                    });
                    fresh.inside.push(quote! {
                        #[allow(clippy::redundant_locals)]
                        let #mutability #ident = #ident;
                    });
                }
            }
        }
    }
    fresh
}

fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => peel(&group.elem),
        Type::Paren(paren) => peel(&paren.elem),
        other => other,
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
