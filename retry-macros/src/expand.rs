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
//! // Output (locals are hygienic; `__stormproof` is `::stormproof::__private`):
//! async fn load(&mut self, id: String) -> Result<Row, DbError> {
//!     use ::stormproof::__private as __stormproof;
//!     static __RESILIENT_POLICY: __stormproof::Policy = __stormproof::Policy::from_attribute(
//!         __stormproof::AttributeConfig { operation: concat!(module_path!(), "::", "load"), max_attempts: 3u32, .. });
//!     __stormproof::inventory::submit! { __stormproof::Operation::new(&__RESILIENT_POLICY) }
//!     // Nothing is built until an attempt needs it: a first attempt that
//!     // runs plain (see the runtime's `call::plain`) never builds the call.
//!     let mut call = None;
//!     loop {
//!         let step = {
//!             let id = Clone::clone(&id);        // owned parameters: a fresh clone per attempt
//!             let __self = &mut *self;           // `&mut self`: a fresh reborrow per attempt
//!             let attempt = async {
//!                 if false { let fake: Result<Row, DbError> = loop {}; return fake; } // fixes `?`'s target
//!                 let id = id;
//!                 let __self = __self;
//!                 'body: { __self.query(&id).await } // the body, `self` renamed, labelled (see `attempt_block`)
//!             };
//!             // How to build the call: the key (`Keyed(|| (key.take(), ..))`
//!             // when the function has one), the slot that keeps the last error
//!             // across waits when `DbError: Send`, and how errors are handled.
//!             let parts = __stormproof::Unkeyed(|| (
//!                 (&__stormproof::ErrorProbe::<DbError>::new()).slot(), __stormproof::by_traits::<DbError>()));
//!             // The shape: which guard slots the function names (throttle,
//!             // breaker, bulkhead, rate limit, budget), so that the others cost nothing.
//!             type Shape = (Unnamed, Named, Unnamed, Unnamed, Unnamed);
//!             match __stormproof::Call::<_, _, Shape>::plain(&call, &__RESILIENT_POLICY, &parts) {
//!                 Some(plain) => match plain.attempt(attempt).await {
//!                     Ok(value) => break Ok(value),
//!                     Err(failure) => __stormproof::Call::<_, _, Shape>::after_plain(&mut call, &__RESILIENT_POLICY, parts, failure),
//!                 },
//!                 None => __stormproof::Call::<_, _, Shape>::next(&mut call, &__RESILIENT_POLICY, parts, attempt).await,
//!             }
//!         };
//!         match step { Step::Done(result) => break result, Step::Retry => {} }
//!     }
//! }
//! ```
//!
//! Every combination of arguments expands to this shape: the guards, the
//! key, timeouts and the deadline are the runtime's business, read from the
//! policy and the shape. With `max_attempts = 1` there is no loop (the body
//! may move its parameters, so the attempt is an `async move` block). With
//! `hedge_after_ms`, each attempt is made by a closure the runtime may call
//! again while earlier attempts run (`Call::next_hedged`, with no plain
//! first attempt): the same fresh clones, in an `async move` block, and a
//! fresh clone of an owned receiver such as `self: Arc<Self>` (the body's
//! `self` renamed). With `fallback = path`, the loop's result is matched:
//! an `Err` goes to `path(error).await`.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{AttrStyle, Block, Ident, ItemFn, Lifetime, ReturnType, Signature};

use crate::marker::POLICY;
use crate::policy::{attribute_config, call_target};
use crate::rewrite::{clone_receiver, fresh_arguments, key_is_used, reborrow_receiver};
use crate::types::erase_impl_trait;
use crate::validate::{ErrorType, Plan};

/// The annotated function with the retry loop around its body.
pub(crate) fn expand(mut item: ItemFn, plan: &Plan) -> TokenStream {
    let krate = &plan.krate;
    // One import of the runtime: when `crate = "..."` names no such path, the
    // compiler reports it once, at that string, and not at every use.
    let runtime = Ident::new("__stormproof", Span::mixed_site());
    let import = quote! {
        use #krate::__private as #runtime;
        #[allow(unused_imports)]
        use #runtime::{
            ConvertByFrom as _, ConvertByTraits as _, ConvertByWrapping as _, ConvertNot as _, ForgetOtherError as _,
            KeepSendError as _,
            KeyFromDisplay as _, KeyFromInteger as _, KeyFromText as _,
        };
    };
    let rt = quote!(#runtime);
    // Mixed-site hygiene: the body cannot see (or shadow) these locals.
    let policy = Ident::new(POLICY, Span::mixed_site());
    let call = Ident::new("__stormproof_call", Span::mixed_site());
    let step = Ident::new("__stormproof_step", Span::mixed_site());
    let result = Ident::new("__stormproof_result", Span::mixed_site());

    let config = attribute_config(&item.sig, plan, &rt);
    let key = match &plan.key {
        Some(key) => {
            let key_of = respan(quote!(#rt::idempotency_key), key.span());
            // The probe picks the cheapest way to the key's `Display` text for its type.
            let writer = quote!((&&&#rt::KeyProbe::of(&#key)).key_writer());
            quote_spanned!(key.span()=> ::core::option::Option::Some(#key_of(&#key, &#key, #writer)))
        }
        None => quote!(::core::option::Option::None),
    };
    let error_ty = error_type_tokens(&item.sig, &plan.error_type, &rt);
    let error_span = error_span(&item.sig, &plan.error_type);
    let slot = quote!((&#rt::ErrorProbe::<#error_ty>::new()).slot());
    let handling = error_handling(plan, &error_ty, error_span, &rt);
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
    let plain_of = respan(quote!(#call_type::plain), error_span);
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
            quote!(#rt::Keyed(|| (#key_slot.take(), #slot, #handling))),
        ),
        None => (
            quote!(let mut #call = ::core::option::Option::None;),
            quote!(#rt::Unkeyed(|| (#slot, #handling))),
        ),
    };
    let (start, target) = call_target(plan, &rt, &policy, start);
    let parts = quote! {{
        #[allow(clippy::needless_borrow)]
        let parts = #parts;
        parts
    }};
    // One attempt, `attempt`, made: a plain call's first runs as it is (see
    // the runtime's `call::plain`), any other through `Call::next`; `won`
    // is what a plain first attempt's success becomes.
    let plain = Ident::new("__stormproof_plain", Span::mixed_site());
    let failure = Ident::new("__stormproof_failure", Span::mixed_site());
    let value = Ident::new("__stormproof_value", Span::mixed_site());
    let attempt_var = Ident::new("__stormproof_attempt", Span::mixed_site());
    let parts_var = Ident::new("__stormproof_parts", Span::mixed_site());
    let one_attempt = |attempt: TokenStream, won: TokenStream| {
        quote_spanned! {error_span=>
            let #attempt_var = #attempt;
            let #parts_var = #parts;
            match #plain_of(&#call, #target, &#parts_var) {
                ::core::option::Option::Some(#plain) => match #plain.attempt(#attempt_var).await {
                    ::core::result::Result::Ok(#value) => #won,
                    ::core::result::Result::Err(#failure) => #after_plain_of(&mut #call, #target, #parts_var, #failure),
                },
                ::core::option::Option::None => #attempt_of(&mut #call, #target, #parts_var, #attempt_var).await,
            }
        }
    };
    let retry_loop = |attempt_each: TokenStream, before: &[TokenStream]| {
        quote! {
            loop {
                let #step = {
                    #(#before)*
                    #attempt_each
                };
                match #step {
                    #rt::Step::Done(#result) => break #result,
                    #rt::Step::Retry => {}
                }
            }
        }
    };
    let run = if plan.hedge_after_ms.is_some() {
        // Hedged: the attempts of a round run side by side, so each is made
        // by a call of a closure, owning fresh clones (`async move`) of the
        // owned parameters and receiver; `&T` parameters are copied into it.
        // `&mut` ones were refused in `validate`.
        let key_used = key_is_used(&item.sig, plan.key.as_ref());
        let mut fresh = fresh_arguments(&mut item.sig);
        fresh.inside.extend(key_used);
        fresh.inside.extend(key_is_used(&item.sig, plan.per.as_ref()));
        clone_receiver(&mut item.block, &mut item.sig, &mut fresh);
        let before = &fresh.before;
        let async_body = attempt_block(&item.sig, quote!(move), &fresh.inside, &item.block);
        let call = quote_spanned! {error_span=>
            #hedged_of(&mut #call, #target, #parts, || {
                #(#before)*
                #async_body
            })
        };
        retry_loop(quote!(#call.await), &[])
    } else if plan.max_attempts == 1 {
        // One attempt: no loop, so the body may move its parameters and nothing is cloned.
        // The attempt owns them (`async move`), as the function's own future would: one
        // that borrowed them would not be `Send` for a parameter or receiver that is
        // `Send` but not `Sync` (a `Cell`, a `Box<dyn Fn() + Send>`). The price: those
        // the body names are dropped as the attempt ends, before a fallback runs (the
        // README says so, at "Fallback").
        let body = attempt_block(&item.sig, quote!(move), &[], &item.block);
        let attempt_once = one_attempt(body, quote!(#rt::Step::Done(::core::result::Result::Ok(#value))));
        quote! {
            match { #attempt_once } {
                #rt::Step::Done(#result) => #result,
                #rt::Step::Retry => ::core::unreachable!("#[resilient]: a retry was requested with `max_attempts = 1`"),
            }
        }
    } else {
        let key_used = key_is_used(&item.sig, plan.key.as_ref());
        let mut fresh = fresh_arguments(&mut item.sig);
        fresh.inside.extend(key_used);
        fresh.inside.extend(key_is_used(&item.sig, plan.per.as_ref()));
        reborrow_receiver(&mut item.block, &mut item.sig, &mut fresh);
        let before = &fresh.before;
        let async_body = attempt_block(&item.sig, TokenStream::new(), &fresh.inside, &item.block);
        // The await is the attribute's: "await occurs here" points at `#[resilient]`.
        retry_loop(one_attempt(async_body, quote!(break ::core::result::Result::Ok(#value))), before)
    };
    let run = match &plan.fallback {
        None => run,
        Some(fallback) => {
            // At the path: a fallback of the wrong signature is reported there.
            let error = Ident::new("__stormproof_error", Span::mixed_site().located_at(fallback.span()));
            let call = quote_spanned!(fallback.span()=> #fallback(#error).await);
            quote! {
                match #run {
                    ::core::result::Result::Err(#error) => {
                        #rt::falling_back(#policy.operation());
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
        static #policy: #rt::Policy = #rt::Policy::from_attribute(#config);
        // Listed at link time: configuration overrides and
        // `Registry::check` find the function by its operation name.
        #rt::inventory::submit! { #rt::Operation::new(&#policy) }
        #start
        #run
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

/// `tokens` moved to where `span` is, keeping their hygiene: errors about
/// them point at the user's code, while they resolve as before.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut moved = Group::new(group.delimiter(), respan(group.stream(), span));
                moved.set_span(group.span().located_at(span));
                token = TokenTree::Group(moved);
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

/// The error type `E`, as a type the expansion can name: as written, or
/// through the return type (`<io::Result<T> as ResultType>::Error`).
fn error_type_tokens(sig: &Signature, error_type: &ErrorType, rt: &TokenStream) -> TokenStream {
    match (error_type, &sig.output) {
        (ErrorType::Named(ty), _) => quote!(#ty),
        (ErrorType::Inferred, ReturnType::Type(_, ty)) => {
            let erased = erase_impl_trait(ty);
            quote!(<#erased as #rt::ResultType>::Error)
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
fn error_handling(plan: &Plan, error_ty: &TokenStream, error_span: Span, rt: &TokenStream) -> TokenStream {
    match &plan.classify {
        None => {
            // Its result, two function pointers, made when the call is built:
            // the bound is then checked at this one call, and a missing trait
            // is one error. (The function itself, a handling of no size,
            // would carry the bound to every use of the handling's type, and
            // repeat the error at each.)
            let by_traits = respan(quote!(<#error_ty as #rt::ResilientError>::handling), error_span);
            quote!(#by_traits())
        }
        Some(path) => {
            // The function is given to a binding of the type it must have,
            // and the conversion asked of the trait by name: a function of
            // another type, or an error type that cannot carry a rejection,
            // is one error at the user's tokens, naming no function of the
            // library.
            let fn_type = respan(quote!(fn(&#error_ty) -> #rt::ErrorClass), path.span());
            let handling = respan(quote!(#rt::RejectionConverter::<#error_ty>::classify_with), path.span());
            quote!({
                let classify: #fn_type = #path;
                #handling((&&&&#rt::RejectProbe::<#error_ty>::new()).converter(), classify)
            })
        }
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
