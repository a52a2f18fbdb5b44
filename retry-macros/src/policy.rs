//! The policy an annotated function declares: the `AttributeConfig`
//! literal its `static` is built from at compile time, from the validated
//! arguments. Part of the expansion, kept apart as the one place that
//! lists every argument the runtime receives.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Signature};

use crate::validate::Plan;

/// The `AttributeConfig` literal the policy is built from, at compile time.
pub(crate) fn attribute_config(
    sig: &Signature,
    plan: &Plan,
    rt: &TokenStream,
    public: &TokenStream,
) -> TokenStream {
    let operation = match &plan.name {
        Some(name) => {
            let name = Literal::string(name);
            quote!(#name)
        }
        None => {
            let name = sig.ident.to_string();
            let name = name.strip_prefix("r#").unwrap_or(&name);
            quote!(::core::concat!(::core::module_path!(), "::", #name))
        }
    };
    let max_attempts = Literal::u32_suffixed(plan.max_attempts);
    let base_ms = Literal::u64_suffixed(plan.base_ms);
    let cap_ms = Literal::u64_suffixed(plan.cap_ms);
    let factor_milli = Literal::u32_suffixed(plan.factor_milli);
    let jitter = Ident::new(&capitalized(plan.jitter), Span::call_site());
    let priority = Ident::new(&capitalized(plan.priority), Span::call_site());
    let attempt_timeout_ms = option(plan.attempt_timeout_ms.map(Literal::u64_suffixed));
    let deadline_ms = option(plan.deadline_ms.map(Literal::u64_suffixed));
    let breaker = option(plan.breaker.as_deref().map(Literal::string));
    let budget = option(plan.budget.as_deref().map(Literal::string));
    let default_budget = plan.default_budget;
    let default_breaker = plan.default_breaker;
    let breaker_per = plan.per.is_some();
    let bulkhead = option(plan.bulkhead.as_deref().map(Literal::string));
    let throttle = option(plan.throttle.as_deref().map(Literal::string));
    let rate_limit = option(plan.rate_limit.as_deref().map(Literal::string));
    let hedge_after_ms = option(plan.hedge_after_ms.map(Literal::u64_suffixed));
    let max_hedges = Literal::u32_suffixed(plan.max_hedges);
    let nested_retry = plan.nested_retry;
    let idempotent = plan.idempotent;
    let has_key = plan.key.is_some();
    // Spanned at the path: a function of the wrong type is reported there.
    let hook = |path: &Option<syn::ExprPath>| match path {
        Some(path) => quote_spanned!(path.span()=> ::core::option::Option::Some(#path)),
        None => quote!(::core::option::Option::None),
    };
    let on_retry = hook(&plan.on_retry);
    let on_stop = hook(&plan.on_stop);
    quote! {
        #rt::AttributeConfig {
            operation: #operation,
            max_attempts: #max_attempts,
            base_ms: #base_ms,
            cap_ms: #cap_ms,
            jitter: #public::Jitter::#jitter,
            factor_milli: #factor_milli,
            attempt_timeout_ms: #attempt_timeout_ms,
            deadline_ms: #deadline_ms,
            hedge_after_ms: #hedge_after_ms,
            max_hedges: #max_hedges,
            breaker: #breaker,
            default_breaker: #default_breaker,
            breaker_per: #breaker_per,
            rate_limit_per: #breaker_per,
            bulkhead_per: #breaker_per,
            budget: #budget,
            default_budget: #default_budget,
            bulkhead: #bulkhead,
            throttle: #throttle,
            rate_limit: #rate_limit,
            nested_retry: #nested_retry,
            idempotent: #idempotent,
            has_key: #has_key,
            on_retry: #on_retry,
            on_stop: #on_stop,
            priority: #public::Priority::#priority,
        }
    }
}

/// `"decorrelated"` -> `"Decorrelated"`: the runtime's variant for a jitter
/// or priority name.
fn capitalized(name: &str) -> String {
    let mut chars = name.chars();
    chars.next().map(|first| first.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

fn option(value: Option<Literal>) -> TokenStream {
    match value {
        Some(value) => quote!(::core::option::Option::Some(#value)),
        None => quote!(::core::option::Option::None),
    }
}

/// What the call runs, and what to declare before the call: the policy
/// alone, or with `per = param`, the policy with the guards the key found,
/// declared first so that the call, which borrows them, is dropped first.
pub(crate) fn call_target(
    plan: &Plan,
    rt: &TokenStream,
    policy: &Ident,
    start: TokenStream,
) -> (TokenStream, TokenStream) {
    let Some(per) = &plan.per else {
        return (start, quote!(&#policy));
    };
    let keyed = Ident::new("__stormproof_keyed", Span::mixed_site());
    let target = Ident::new("__stormproof_target", Span::mixed_site());
    // At the parameter: a key that is not `Display` is one error there.
    let text = quote_spanned!(per.span()=> &#per as &dyn ::core::fmt::Display);
    let texter = quote!((&&&#rt::probe::KeyProbe::of(&#per)).key_texter());
    let start = quote! {
        let #keyed = #rt::Call::keyed_guards(&#policy, &#per, #text, #texter);
        let #target = #rt::Call::per_key(&#policy, &#keyed);
        #start
    };
    (start, quote!(#target))
}
