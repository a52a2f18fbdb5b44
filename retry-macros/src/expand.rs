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
//!
//! ```text
//! // Input:
//! #[resilient(max_attempts = 3, breaker = "db")]
//! async fn load(&mut self, id: String) -> Result<Row, DbError> { self.query(&id).await }
//!
//! // Output (locals are hygienic; `__stormproof` is the facade, `::stormproof`,
//! // and `rt` below stands for its `__private`, which holds ten names):
//! async fn load(&mut self, id: String) -> Result<Row, DbError> {
//!     use ::stormproof::{self as __stormproof};
//!     use __stormproof::__private::probe::{KeepSendError as _, ..}; // the probes' traits, unnamed
//!     static __RESILIENT_POLICY: __stormproof::Policy = __stormproof::Policy::from_attribute(
//!         rt::AttributeConfig { operation: concat!(module_path!(), "::", "load"), max_attempts: 3u32, .. });
//!     rt::inventory::submit! { rt::Operation::new(&__RESILIENT_POLICY) }
//!     // Nothing is built until an attempt needs it: a first attempt that
//!     // runs plain (see the runtime's `call::plain`) never builds the call.
//!     let mut call = None;
//!     let answer = loop {
//!         let step = {
//!             let id = Clone::clone(&id);        // owned parameters: a fresh clone per attempt
//!             let __self = &mut *self;           // `&mut self`: a fresh reborrow per attempt
//!             let attempt = async {
//!                 if false { let fake: Result<Row, DbError> = loop {}; return fake; } // fixes `?`'s target
//!                 let id = id;
//!                 let __self = __self;
//!                 'body: { __self.query(&id).await } // the body, `self` renamed, labelled (see `attempt_block`)
//!             };
//!             // The shape: which guard slots the function names (throttle,
//!             // breaker, bulkhead, rate limit, budget), so that the others cost nothing.
//!             // `Call` stands for (the expansion writes it out each time):
//!             //     rt::Call::<_, _, (rt::Unnamed, rt::Named, rt::Unnamed, rt::Unnamed, rt::Unnamed)>
//!             // How to build the call: the key (`Call::keyed(&mut key, || ..)`
//!             // when the function has one: a plain first attempt runs in it,
//!             // `in_key`), the slot that keeps the last error across waits
//!             // when `DbError: Send`, and how errors are handled.
//!             let mut parts = Call::unkeyed(|| (
//!                 (&rt::probe::ErrorProbe::<DbError>::new()).slot(),
//!                 <DbError as __stormproof::ResilientError>::handling()));
//!             match Call::plain(&call, &__RESILIENT_POLICY, &parts) {
//!                 Some(plain) => match plain.attempt(parts.in_key(attempt)).await {
//!                     Ok(value) => rt::Step::Done(Ok(value)),
//!                     Err(failure) => Call::after_plain(&mut call, &__RESILIENT_POLICY, parts, failure),
//!                 },
//!                 None => Call::next(&mut call, &__RESILIENT_POLICY, parts, attempt).await,
//!             }
//!         };
//!         match step { rt::Step::Done(result) => break result, rt::Step::Retry => {} }
//!     };
//!     answer
//! }
//! ```
//!
//! Every combination of arguments expands to this one loop of steps (the
//! macro's tests check it): the guards, the key, timeouts and the deadline
//! are the runtime's business, read from the policy and the shape. What
//! varies is what one step makes and awaits. With an attempt timeout or a
//! deadline, `Call::plain_timed` races the plain first attempt with one
//! timer (with an `on_stop` hook, it reads the attempt's start if it
//! waits, for the hook's elapsed time). With `max_attempts = 1`, nothing is cloned and the attempt is an
//! `async move` block (the body may move its parameters), and `Step::Retry`
//! is unreachable, so the loop never goes round and the borrow checker sees
//! the moves made once. With `hedge_after_ms`, each attempt is made by a
//! closure the runtime may call again while earlier attempts run
//! (`Call::next_hedged`, with no plain first attempt): the same fresh
//! clones, in an `async move` block, and a fresh clone of an owned receiver
//! such as `self: Arc<Self>` (the body's `self` renamed). With
//! `fallback = path`, the answer is matched: an `Err` goes to
//! `path(error).await`.
//!
//! The step is written out, not one runtime function awaited: an `async
//! fn` of the runtime holding the attempt across its awaits made the
//! futures of functions with borrowed parameters fail `Send` ("not general
//! enough": the compiler's auto-trait check of an opaque future with
//! lifetimes), and the plain first attempt's inline match is what keeps a
//! guarded call's success at the floor's cost.

use proc_macro2::{Group, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{AttrStyle, Block, Ident, ItemFn, Lifetime, ReturnType, Signature};

use crate::error_type::{error_handling, error_span, error_type_tokens};
use crate::marker::POLICY;
use crate::policy::{attribute_config, call_target};
use crate::respan::respan;
use crate::rewrite::{clone_receiver, fresh_arguments, key_is_used, reborrow_receiver};
use crate::types::erase_impl_trait;
use crate::validate::Plan;

/// The annotated function with the retry loop around its body.
pub(crate) fn expand(mut item: ItemFn, plan: &Plan) -> TokenStream {
    let krate = &plan.krate;
    // One import of the runtime: when `crate = "..."` names no such path, the
    // compiler reports it once, at that string, and not at every use.
    // The facade's public names (`Policy`, `Jitter`, ...) are named at its
    // root, the expansion's own at `__private`; the probes' traits are
    // imported unnamed (`as _`), so the body sees none of them.
    let facade = Ident::new("__stormproof", Span::mixed_site());
    // At the path's last segment (the string of `crate = "..."`): a path
    // that names nothing is reported there, where `use` reports `self`.
    let krate_span = krate.clone().into_iter().last().map_or_else(Span::call_site, |token| token.span());
    let as_facade = respan(quote!({self as #facade}), krate_span);
    let import = quote! {
        use #krate::#as_facade;
        #[allow(unused_imports)]
        use #facade::__private::probe::{
            ConvertByFrom as _, ConvertByTraits as _, ConvertByWrapping as _, ConvertNot as _, ForgetOtherError as _,
            KeepSendError as _,
            KeyFromDisplay as _, KeyFromInteger as _, KeyFromText as _,
        };
    };
    let rt = quote!(#facade::__private);
    let public = quote!(#facade);
    // Mixed-site hygiene: the body cannot see (or shadow) these locals.
    let policy = Ident::new(POLICY, Span::mixed_site());
    let call = Ident::new("__stormproof_call", Span::mixed_site());
    let step = Ident::new("__stormproof_step", Span::mixed_site());
    let result = Ident::new("__stormproof_result", Span::mixed_site());

    let config = attribute_config(&item.sig, plan, &rt, &public);
    let key = match &plan.key {
        Some(key) => {
            let key_of = respan(quote!(#rt::probe::KeyProbe::key), key.span());
            // The probe picks the cheapest way to the key's `Display` text for its type.
            let writer = quote!((&&&#rt::probe::KeyProbe::of(&#key)).key_writer());
            quote_spanned!(key.span()=> ::core::option::Option::Some(#key_of(&#key, &#key, #writer)))
        }
        None => quote!(::core::option::Option::None),
    };
    let error_ty = error_type_tokens(&item.sig, &plan.error_type, &rt);
    let error_span = error_span(&item.sig, &plan.error_type);
    let slot = quote!((&#rt::probe::ErrorProbe::<#error_ty>::new()).slot());
    let handling = error_handling(plan, &error_ty, error_span, &rt, &public);
    // A missing `Classify` or `From<Rejection>` is reported at this call too:
    // point that at the error type, under the readable message, not at the attribute.
    // Which guards the function names, known here: a call pays nothing for
    // a guard its function does not name (the runtime's `guards::Shape`),
    // slot by slot in the guard set's order.
    let slot_of = |named: bool| if named { quote!(#rt::Named) } else { quote!(#rt::Unnamed) };
    let budget = plan.budget.is_some() || plan.default_budget;
    let breaker = plan.breaker.is_some() || plan.default_breaker;
    let shape =
        [plan.throttle.is_some(), breaker, plan.bulkhead.is_some(), plan.rate_limit.is_some(), budget]
            .map(slot_of);
    let call_type = quote!(#rt::Call::<_, _, (#(#shape),*)>);
    let attempt_of = respan(quote!(#call_type::next), error_span);
    // A function with an attempt timeout or a deadline races its plain
    // first attempt with the timer (the runtime's `call::timed`), and one
    // with an `on_stop` hook has its start read if it waits (the hook
    // reports the time the call took); the others carry neither.
    let plain_of = match (plan.attempt_timeout_ms, plan.deadline_ms, &plan.on_stop) {
        (None, None, None) => respan(quote!(#call_type::plain), error_span),
        _ => respan(quote!(#call_type::plain_timed), error_span),
    };
    let after_plain_of = respan(quote!(#call_type::after_plain), error_span);
    let hedged_of = respan(quote!(#call_type::next_hedged), error_span);
    // What builds the call when it needs to be (a plain call's first
    // attempt runs without it): its key, made once, and how its errors are
    // kept and handled. The probe's borrow is what puts the fallback slot
    // one auto-reference further away: it is not needless.
    let key_slot = Ident::new("__stormproof_key", Span::mixed_site());
    let (start, parts) = match &plan.key {
        Some(_) => (
            quote! {
                let mut #call = ::core::option::Option::None;
                let mut #key_slot = #key;
            },
            quote!(#call_type::keyed(&mut #key_slot, || (#slot, #handling))),
        ),
        None => (
            quote!(let mut #call = ::core::option::Option::None;),
            quote!(#call_type::unkeyed(|| (#slot, #handling))),
        ),
    };
    let (start, target) = call_target(plan, &rt, &policy, start);
    let parts = quote! {{
        #[allow(clippy::needless_borrow)]
        let parts = #parts;
        parts
    }};
    // One attempt, `attempt`, made: a plain call's first runs as it is (see
    // the runtime's `call::plain`), any other through `Call::next`.
    let plain = Ident::new("__stormproof_plain", Span::mixed_site());
    let failure = Ident::new("__stormproof_failure", Span::mixed_site());
    let value = Ident::new("__stormproof_value", Span::mixed_site());
    let attempt_var = Ident::new("__stormproof_attempt", Span::mixed_site());
    let parts_var = Ident::new("__stormproof_parts", Span::mixed_site());
    let one_attempt = |attempt: TokenStream| {
        quote_spanned! {error_span=>
            let #attempt_var = #attempt;
            let mut #parts_var = #parts;
            match #plain_of(&#call, #target, &#parts_var) {
                ::core::option::Option::Some(#plain) => match #plain.attempt(#parts_var.in_key(#attempt_var)).await {
                    ::core::result::Result::Ok(#value) => #rt::Step::Done(::core::result::Result::Ok(#value)),
                    ::core::result::Result::Err(#failure) => #after_plain_of(&mut #call, #target, #parts_var, #failure),
                },
                ::core::option::Option::None => #attempt_of(&mut #call, #target, #parts_var, #attempt_var).await,
            }
        }
    };
    // Each attempt: what is made fresh for it (`before`), the attempt made
    // and awaited (its step), and what a retry does (`again`).
    let (before, step_of_attempt, again) = if plan.hedge_after_ms.is_some() {
        // Hedged: the attempts of a round run side by side, so each is made
        // by a call of a closure, owning fresh clones (`async move`) of the
        // owned parameters and receiver; `&T` parameters are copied into it.
        // `&mut` ones were refused in `validate`. No plain first attempt.
        let key_used = key_is_used(&item.sig, plan.key.as_ref());
        let mut fresh = fresh_arguments(&mut item.sig);
        fresh.inside.extend(key_used);
        fresh.inside.extend(key_is_used(&item.sig, plan.per.as_ref()));
        clone_receiver(&mut item.block, &mut item.sig, &mut fresh);
        let before = &fresh.before;
        let async_body = attempt_block(&item.sig, quote!(move), &fresh.inside, &item.block);
        let step = quote_spanned! {error_span=>
            #hedged_of(&mut #call, #target, #parts, || {
                #(#before)*
                #async_body
            }).await
        };
        (Vec::new(), step, quote!({}))
    } else if plan.max_attempts == 1 {
        // One attempt: the body may move its parameters and nothing is
        // cloned, and no retry comes (so the loop never goes round, and the
        // borrow checker sees the moves made once). The attempt owns them
        // (`async move`), as the function's own future would: one that
        // borrowed them would not be `Send` for a parameter or receiver that
        // is `Send` but not `Sync` (a `Cell`, a `Box<dyn Fn() + Send>`). The
        // price: those the body names are dropped as the attempt ends,
        // before a fallback runs (docs/attribute.md says so, at "Fallback").
        let body = attempt_block(&item.sig, quote!(move), &[], &item.block);
        let never =
            quote!(::core::unreachable!("#[resilient]: a retry was requested with `max_attempts = 1`"));
        (Vec::new(), one_attempt(body), never)
    } else {
        let key_used = key_is_used(&item.sig, plan.key.as_ref());
        let mut fresh = fresh_arguments(&mut item.sig);
        fresh.inside.extend(key_used);
        fresh.inside.extend(key_is_used(&item.sig, plan.per.as_ref()));
        reborrow_receiver(&mut item.block, &mut item.sig, &mut fresh);
        let async_body = attempt_block(&item.sig, TokenStream::new(), &fresh.inside, &item.block);
        (fresh.before, one_attempt(async_body), quote!({}))
    };
    // Every function: this loop, one step per attempt. The await is the
    // attribute's: "await occurs here" points at `#[resilient]`.
    let answer = Ident::new("__stormproof_answer", Span::mixed_site());
    let run = quote! {
        let #answer = loop {
            let #step = {
                #(#before)*
                #step_of_attempt
            };
            match #step {
                #rt::Step::Done(#result) => break #result,
                #rt::Step::Retry => #again,
            }
        };
    };
    let answer = match &plan.fallback {
        None => quote!(#answer),
        Some(fallback) => {
            // At the path: a fallback of the wrong signature is reported there.
            let error = Ident::new("__stormproof_error", Span::mixed_site().located_at(fallback.span()));
            let call = quote_spanned!(fallback.span()=> #fallback(#error).await);
            quote! {
                match #answer {
                    ::core::result::Result::Err(#error) => {
                        #rt::Operation::falling_back(&#policy);
                        #call
                    }
                    #result => #result,
                }
            }
        }
    };

    let (inner, outer): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|attr| matches!(attr.style, AttrStyle::Inner(_)));
    let vis = &item.vis;
    let sig = &item.sig;
    let body = quote! {
        #(#inner)*
        #import
        static #policy: #public::Policy = #public::Policy::from_attribute(#config);
        // Listed at link time: configuration overrides and
        // `Registry::check` find the function by its operation name.
        #rt::inventory::submit! { #rt::Operation::new(&#policy) }
        #start
        #run
        #answer
    };
    // The user's braces, not the attribute's: with the attribute's span the
    // function reads as generated code, and the compiler and clippy skip
    // their lints about a function as written (`dead_code`,
    // `missing_errors_doc`, ...), leaving an `#[expect]` of one unfulfilled.
    let mut block = Group::new(proc_macro2::Delimiter::Brace, body);
    block.set_span(item.block.brace_token.span.join());
    quote! {
        #(#outer)*
        #vis #sig #block
    }
}

/// One attempt: an `async` block (`async move` for `movability = move`)
/// that takes its fresh arguments (`inside`) and runs the body.
///
/// A never-taken early `return` first fixes the block's output type to the
/// function's return type before the body is type-checked, so that `?` in
/// the body knows which error type to convert into.
///
/// The body is the block's tail, so that its value coerces to the return
/// type (`Ok(Box::new(x))` to a `Result<Box<dyn Trait>, E>`) and nothing
/// follows a body that diverges. It is labelled (hygienically: the body
/// cannot name the label): a one-line body `{ Ok(n + 1) }` unlabelled there
/// trips `unused_braces` at the user's braces, which `#![deny(warnings)]`
/// makes an error. A typed `let` or a `match` around the body would leave
/// code unreachable after `{ todo!() }`, or lose the coercion.
fn attempt_block(
    sig: &Signature,
    movability: TokenStream,
    inside: &[TokenStream],
    body: &Block,
) -> TokenStream {
    let ReturnType::Type(_, ty) = &sig.output else {
        // Not a `Result`: `validate` has reported it, nothing is expanded.
        return quote!(async #movability { #(#inside)* #body });
    };
    let fake = Ident::new("__stormproof_fake_return", Span::mixed_site());
    let label = Lifetime {
        apostrophe: Span::mixed_site(),
        ident: Ident::new("__stormproof_body", Span::mixed_site()),
    };
    let erased = erase_impl_trait(ty);
    quote! {
        async #movability {
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
            #(#inside)*
            #label: #body
        }
    }
}
