//! The `#[resilient]` attribute of the [`stormproof`](https://docs.rs/stormproof) crate.
//!
//! Depend on `stormproof`, not on this crate: it re-exports the attribute
//! together with the runtime the expansion calls.
//!
//! The macro is a three-step pipeline, one file each: `parse` reads the
//! arguments into typed settings that keep their spans, `validate` checks
//! them against each other and against the function, and `expand` wires
//! the function's body into the runtime's retry loop. Any error is reported
//! at the token to change, and the function is still emitted unchanged, so
//! IDEs keep completing and type-checking it while the attribute is wrong.

#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::ItemFn;

mod arguments;
mod borrows;
mod error_type;
mod expand;
mod facade;
mod marker;
mod parse;
mod policy;
mod rename_self;
mod respan;
mod rewrite;
mod suggest;
mod types;
mod validate;
mod values;

use parse::{Args, Errors};

/// Retries an `async fn` with capped exponential backoff and jitter,
/// within per-attempt timeouts, a deadline, a circuit breaker, a retry
/// budget and a bulkhead, as its arguments say.
///
/// The body is one attempt. It runs again while it fails with an error
/// that classifies as transient or throttled, up to `max_attempts` times in
/// all, waiting a jittered backoff between attempts. `return` and `?`
/// inside the body end the attempt, not the call.
///
/// | argument | value | default | meaning |
/// |---|---|---|---|
/// | `max_attempts` | integer 1..=100 | 4 | attempts in all, the first included (1 = never retry) |
/// | `base_ms` | integer | 100 | backoff base |
/// | `cap_ms` | integer >= `base_ms` | 20_000 | backoff ceiling |
/// | `factor` | decimal 1.0..=10.0, at most three decimals | 2 | how much each wait grows (1.5: by half) |
/// | `jitter` | `"full"`, `"equal"`, `"decorrelated"`, `"none"` | `"full"` | how waits are spread |
/// | `attempt_timeout_ms` | integer > 0 | none | each attempt is cancelled after this |
/// | `deadline_ms` | integer > 0 | none | the whole call, waits included, ends by then |
/// | `breaker` | string, or `"none"` | the operation's own | named circuit breaker in the registry; without it the operation has its own (opens when half of its last 100 attempts failed), `"none"` for no breaker |
/// | `per` | parameter name | none | guards per key: the parameter's `Display` chooses this call's breaker, rate limit and bulkhead in the sets `breaker`, `rate_limit` and `bulkhead` name (`breaker = "search", per = tenant`); at most `max_keys` keys held, a closed breaker out first |
/// | `budget` | string, or `"none"` | the operation's own | named retry budget; without it the operation has its own (a share of its traffic: retries stay under 10 % of its calls over 10 s, or 10 a second), `"none"` for no budget |
/// | `bulkhead` | string | none | named concurrency limit |
/// | `throttle` | string | none | named client-side throttle (adaptive: refuses locally when the dependency rejects) |
/// | `rate_limit` | string | none | named rate limiter |
/// | `priority` | `"critical"`, `"default"`, `"sheddable"` | `"default"` | how much the calls matter when a bulkhead, rate limit or throttle is saturated: sheddable ones are refused first, critical ones last |
/// | `hedge_after_ms` | integer > 0 | none | start another attempt beside one not finished by then; the first success wins |
/// | `max_hedges` | integer 1..=3 | 1 | hedges per round (needs `hedge_after_ms`) |
/// | `fallback` | path to an `async fn(E) -> Result<T, E>` | none | called with the final error; what it returns is the call's result |
/// | `idempotent` | bool | true | `false` declares a non-idempotent operation |
/// | `key` | a parameter's name (or a binding of a destructured one) | none | the idempotency key; required when `idempotent = false` and `max_attempts > 1` |
/// | `nested` | `"once"`, `"retry"` | `"once"` | inside another annotated call's attempt, `"once"` makes a single attempt, without hedges |
/// | `name` | string | `module_path::fn` | the operation's name in traces and metrics (two methods of the same name in one module need it) |
/// | `classify` | path to a `fn(&E) -> ErrorClass` | `Classify` | classifies this function's errors instead of the trait |
/// | `on_retry` | path to a `fn(&stormproof::hooks::RetryEvent)` | none | told of each retry, before its wait (never on success) |
/// | `on_stop` | path to a `fn(&stormproof::hooks::StopEvent)` | none | told of each call that gives up, with why |
/// | `crate` | string path | the name Cargo.toml gives `stormproof` | where the facade is, when it is reached through a re-export |
///
/// The function must be an `async fn` returning `Result<T, E>` (or an alias
/// of it) where `E` can be classified and can carry the loop's rejections:
/// `anyhow::Error`, `Box<dyn Error + Send + Sync>`, `std::io::Error`,
/// `tonic::Status`, `stormproof::Error<X>` for a foreign `X`, or your own type
/// implementing `Classify` and `From<Rejection>` (or with `classify = ...`). Every
/// attempt runs the body on fresh arguments: each parameter taken by value
/// is cloned per attempt and must be `Clone` (unless `max_attempts = 1`),
/// while references, `&mut` references and `&mut self` receivers are
/// borrowed again by each attempt (`Pin<&mut T>` and `self: Pin<&mut Self>`
/// too, with `Pin::as_mut`), `mut` bindings included (a body that
/// consumes a `self` taken by value needs `max_attempts = 1`, and so does a
/// function that returns a borrow of `&mut self` or of a `&mut` parameter).
/// With `hedge_after_ms`, an owned receiver such as `self: Arc<Self>` is
/// cloned per attempt too. The signature, generics, attributes, docs and
/// visibility are kept as written, and the returned future is `Send`
/// whenever the body's is.
///
/// ```
/// use stormproof::{Classify, ErrorClass, Rejection, resilient};
/// # #[derive(Debug)]
/// # pub enum ApiError { Unavailable, Rejected(Rejection) }
/// # impl Classify for ApiError {
/// #     fn classify(&self) -> ErrorClass { ErrorClass::Transient }
/// # }
/// # impl From<Rejection> for ApiError {
/// #     fn from(rejection: Rejection) -> Self { ApiError::Rejected(rejection) }
/// # }
/// # pub struct Quote;
/// # pub struct Receipt;
/// # mod api {
/// #     use std::sync::Arc;
/// #     pub async fn quote(_: &str) -> Result<super::Quote, super::ApiError> { Ok(super::Quote) }
/// #     pub async fn charge(_: Option<Arc<str>>, _: u64) -> Result<super::Receipt, super::ApiError> {
/// #         Ok(super::Receipt)
/// #     }
/// # }
///
/// #[resilient(max_attempts = 4, base_ms = 100, cap_ms = 20_000, breaker = "payment")]
/// async fn quote(sku: &str) -> Result<Quote, ApiError> {
///     api::quote(sku).await
/// }
///
/// // Not idempotent: retried only with a key the server can deduplicate on.
/// #[resilient(idempotent = false, key = order_id)]
/// async fn charge(order_id: u64, cents: u64) -> Result<Receipt, ApiError> {
///     let key = stormproof::idempotency_key(); // Some("<order_id>"), the same on every attempt
///     api::charge(key, cents).await
/// }
/// # fn main() {}
/// ```
#[proc_macro_attribute]
pub fn resilient(args: TokenStream, item: TokenStream) -> TokenStream {
    entry(args.into(), item.into()).into()
}

/// Parse, validate, expand; on any error, the errors plus the function as written.
fn entry(args: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut errors = Errors::default();
    let args = syn::parse2::<Args>(args).map_err(|error| errors.push(error)).ok();
    let function = syn::parse2::<ItemFn>(item.clone()).map_err(|_| errors.push(not_a_function(&item))).ok();
    if let (Some(args), Some(function)) = (args, function) {
        match validate::validate(args, &function) {
            Ok(plan) => return expand::expand(function, &plan),
            Err(error) => errors.push(error),
        }
    }
    let errors = errors.finish(()).err().map(|error| error.to_compile_error());
    quote!(#errors #item)
}

fn not_a_function(item: &TokenStream2) -> syn::Error {
    match syn::parse2::<syn::TraitItemFn>(item.clone()) {
        Ok(declaration) if declaration.default.is_none() => syn::Error::new_spanned(
            &declaration.sig,
            "#[resilient] goes on a function with a body: put it on the `async fn` in each impl, not on the trait's declaration",
        ),
        _ => syn::Error::new_spanned(item, "#[resilient] goes on an `async fn`"),
    }
}

#[cfg(test)]
mod tests {
    use super::entry;

    fn run(args: &str, item: &str) -> String {
        let args = args.parse().expect("test args tokenize");
        let item = item.parse().expect("test item tokenizes");
        entry(args, item).to_string()
    }

    const FUNCTIONS: &[&str] = &[
        "async fn f(a: u32, order_id: String) -> Result<u32, E> { Ok(a) }",
        "pub async fn f(&mut self, (a, mut b): (u8, Vec<u8>), _: u8) -> io::Result<()> { Ok(()) }",
        "async fn f<'a, T: Clone>(x: &'a T, y: impl Display) -> Result<impl Display, E> where T: Send { Ok(1) }",
        "async fn f(self: Box<Self>, mut s: String, Point { x, mut y }: Point) -> Result<(), E> { Ok(()) }",
        "fn f() -> Result<(), E> { Ok(()) }",
        "async fn f() {}",
        "async fn f() -> Result { Ok(()) }",
        "async fn f() -> <T as Tr>::Result { todo!() }",
        "async fn f(&self) -> Result<u32, E>;",
        "struct S;",
        "",
        "fn",
        "async fn f",
        "#![inner] async fn f() -> Result<(), E> { #![allow(x)] Ok(()) }",
    ];

    const VALUES: &[&str] = &[
        "",
        "4",
        "0",
        "1",
        "100",
        "101",
        "-1",
        "-0",
        "- 1",
        "1.5",
        "-1.5",
        "1e3",
        "1ms",
        "5s",
        "99999999999999999999999999999999999999999",
        "0x10",
        "1_000u64",
        "\"\"",
        "\" \"",
        "\"x\"",
        "\"full\"",
        "\"Full\"",
        "\"4\"",
        "true",
        "false",
        "\"false\"",
        "self",
        "Self",
        "a",
        "order_id",
        "a::b",
        "::a",
        "(3)",
        "[1]",
        "|| {}",
        "r#type",
        "'a'",
        "b\"x\"",
        "\"::stormproof\"",
        "\"a b\"",
        "\"a::\"",
        "{ 3 }",
        "3 4",
        "= 3",
    ];

    #[test]
    fn no_input_makes_the_macro_panic_and_errors_keep_the_function() {
        for name in crate::arguments::names().iter().chain(&["retries", "r#crate", "Max_Attempts"]) {
            for value in VALUES {
                for args in [
                    format!("{name} = {value}"),
                    format!("{name}({value})"),
                    format!("{name} = {value}, {name} = {value}"),
                    format!("max_attempts = 3, {name} = {value},"),
                    format!("{name} {value}"),
                    format!("{value} = {name}"),
                ] {
                    let Ok(args) = args.parse::<proc_macro2::TokenStream>() else {
                        continue;
                    };
                    for item in FUNCTIONS {
                        let out = run(&args.to_string(), item);
                        if out.contains("compile_error") {
                            let kept: String = item.split_whitespace().collect();
                            let out: String = out.split_whitespace().collect();
                            assert!(out.contains(&kept), "{args} on {item}: the function is not kept");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_valid_function_expands_without_errors() {
        let out = run("max_attempts = 3, idempotent = false, key = order_id, crate = \"r\"", FUNCTIONS[0]);
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("use r :: { self as __stormproof } ;"), "{out}");
        assert!(out.contains("__stormproof :: Policy :: from_attribute"), "{out}");
    }

    /// Arguments that reach every branch of the expansion: many attempts,
    /// one attempt, hedging, a key, a key per call of a guard, a fallback,
    /// `classify = path`, every guard, the timed first attempt, the hooks.
    const COMBINATIONS: [&str; 10] = [
        "",
        "breaker = \"b\", budget = \"b\"",
        "max_attempts = 1",
        "hedge_after_ms = 50, idempotent = true",
        "idempotent = false, key = order_id",
        "breaker = \"b\", per = order_id",
        "fallback = recover",
        "classify = by_status",
        "throttle = \"t\", bulkhead = \"h\", rate_limit = \"r\", deadline_ms = 9, attempt_timeout_ms = 3",
        "on_retry = log, on_stop = log, priority = \"critical\", budget = \"none\", breaker = \"none\"",
    ];

    /// Every combination of arguments expands to one shape: one loop, one
    /// step awaited per attempt, ended by `Step::Done` and gone round on
    /// `Step::Retry` (which a function of one attempt never asks for), its
    /// answer the function's (or the fallback's, matched on it).
    #[test]
    fn every_combination_expands_to_one_loop_of_steps() {
        for args in COMBINATIONS {
            let out = run(args, FUNCTIONS[0]);
            assert!(!out.contains("compile_error"), "{args}: {out}");
            // Besides the empty `loop {}` that fixes an attempt's return type.
            let loops = out.matches("loop {").count() - out.matches("loop { }").count();
            assert_eq!(loops, 1, "{args}: {out}");
            assert_eq!(out.matches("let __stormproof_answer = loop {").count(), 1, "{args}: {out}");
            assert_eq!(out.matches("let __stormproof_step =").count(), 1, "{args}: {out}");
            assert_eq!(
                out.matches("match __stormproof_step { __stormproof :: __private :: Step :: Done (__stormproof_result) => break __stormproof_result").count(),
                1,
                "{args}: {out}"
            );
            let answered = if args.contains("fallback") {
                "match __stormproof_answer {"
            } else {
                "; __stormproof_answer }"
            };
            assert!(out.contains(answered), "{args}: {out}");
        }
    }

    /// What the expansion names in the runtime's `__private`, over every
    /// combination: at most ten names, the private surface the macro and
    /// the runtime share.
    #[test]
    fn the_expansion_names_at_most_ten_private_items() {
        let mut names = std::collections::BTreeSet::new();
        for args in COMBINATIONS {
            let out = run(args, FUNCTIONS[0]);
            assert!(!out.contains("compile_error"), "{args}: {out}");
            let mut rest = out.as_str();
            while let Some(at) = rest.find("__private :: ") {
                rest = &rest[at + "__private :: ".len()..];
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                names.insert(name);
            }
        }
        assert!(names.contains("Call"), "{names:?}");
        assert!(names.len() <= 10, "{} names: {names:?}", names.len());
    }

    /// `factor`'s literal in thousandths: the decimals that count, at most
    /// three; a negative number read as one (for the range check); no
    /// exponent.
    #[test]
    fn a_factor_is_read_in_thousandths() {
        let factor = crate::arguments::find("factor").unwrap();
        let read = |text: &str| {
            crate::values::decimal(factor, &syn::parse_str(text).unwrap()).map_err(|e| e.to_string())
        };
        for (text, milli) in [
            ("1.5", 1500),
            ("2", 2000),
            ("2.0000", 2000),
            ("1.", 1000),
            ("1.125", 1125),
            ("1.5f32", 1500),
            ("-1.5", -1500),
        ] {
            assert_eq!(read(text), Ok(milli), "{text}");
        }
        assert_eq!(read("1.2345"), Err("`factor` takes at most three decimals, got 1.2345".to_owned()));
        assert!(read("1e3").unwrap_err().contains("a plain decimal number"), "{:?}", read("1e3"));
        assert!(read("\"1.5\"").unwrap_err().contains("expected a decimal number"), "a string");
    }

    #[test]
    fn the_attributes_defaults_are_the_builders() {
        use crate::arguments::{Default, find};
        let policy = stormproof::Policy::builder().build().expect("the defaults are valid");
        let integer = |name| match find(name).map(|a| a.default) {
            Some(Default::Integer(value)) => value,
            other => panic!("{name}: {other:?}"),
        };
        let choice = |name| match find(name).map(|a| a.default) {
            Some(Default::Choice(value)) => value,
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(integer("max_attempts"), u64::from(policy.max_attempts()));
        assert_eq!(integer("base_ms"), policy.backoff().base.as_millis() as u64);
        assert_eq!(integer("cap_ms"), policy.backoff().cap.as_millis() as u64);
        assert_eq!(integer("factor") as f64, policy.backoff().factor());
        assert_eq!(choice("jitter"), policy.backoff().jitter.name());
        assert_eq!(choice("nested") == "retry", policy.nested() == stormproof::Nested::Retry);
        for unset in ["attempt_timeout_ms", "deadline_ms", "bulkhead", "key"] {
            assert_eq!(find(unset).map(|a| a.default), Some(Default::None), "{unset}");
        }
        assert_eq!(find("budget").map(|a| a.default), Some(Default::Derived), "the operation's own");
        assert!(policy.has_default_budget());
        assert_eq!(find("breaker").map(|a| a.default), Some(Default::Derived), "the operation's own");
        assert!(policy.has_default_breaker());
        assert_eq!(policy.guard_name(stormproof::GuardKind::Breaker), Some(policy.operation()));
        assert_eq!(policy.guard_name(stormproof::GuardKind::Budget), Some(policy.operation()));
        assert_eq!((policy.attempt_timeout(), policy.deadline()), (None, None));
    }

    #[test]
    fn a_repeated_key_is_reported_even_when_its_first_value_was_invalid() {
        let out = run("max_attempts = \"x\", max_attempts = 3", FUNCTIONS[0]);
        assert!(out.contains("`max_attempts` set more than once"), "{out}");
    }

    #[test]
    fn the_arguments_after_a_missing_comma_are_still_read() {
        let out = run("max_attempts = 3 base_ms = 5s, bogus = 1", FUNCTIONS[0]);
        assert!(out.contains("expected `,`"), "{out}");
        assert!(out.contains("unexpected suffix `s` on the integer literal for `base_ms`"), "{out}");
        assert!(out.contains("unknown argument `bogus`"), "{out}");
        let out = run("retries(3) jitter = \"gaussian\"", FUNCTIONS[0]);
        assert!(out.contains("unknown argument `retries`"), "{out}");
        assert!(out.contains("unknown jitter"), "{out}");
        // Nothing that reads as an argument follows: skipped to the `,` as before.
        let out = run("max_attempts = 3 4, bogus = 1", FUNCTIONS[0]);
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
    }

    #[test]
    fn all_independent_errors_are_reported_together() {
        let out = run("jitter = \"gaussian\", colour = 1, base_ms = 1.5", FUNCTIONS[0]);
        assert_eq!(out.matches("compile_error").count(), 3, "{out}");
        let out = run("max_attempts = 0, breaker = \"\", key = nope", "fn f() -> u32 { 1 }");
        assert_eq!(out.matches("compile_error").count(), 5, "{out}");
    }
}
