//! Validation: the settings checked against each other and against the function.
//!
//! Each rule of the attribute's contract is one check here, and each check
//! points at the token the user has to change. All independent problems are
//! reported together, so fixing one does not just reveal the next.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{ToTokens, quote};
use syn::{FnArg, Ident, ItemFn};

pub(crate) use crate::types::ErrorType;

use crate::arguments::{self, Default};
use crate::borrows::{no_mutable_borrow_copied, no_mutable_borrow_hedged, no_mutable_borrow_returned};
use crate::marker::POLICY;
use crate::parse::{Args, Errors, Setting};
use crate::rewrite::pattern_bindings;
use crate::suggest;
use crate::types::{error_type, returns_future};

const MAX_ATTEMPTS: std::ops::RangeInclusive<i128> = 1..=100;

const MAX_HEDGES: std::ops::RangeInclusive<i128> = 1..=3;

/// Everything `expand` needs, every value checked and every default filled in.
pub(crate) struct Plan {
    /// Where the runtime is: `::stormproof` unless `crate = "..."` says otherwise.
    pub krate: TokenStream,
    /// The operation's name, when `name = "..."` gave one (else `module_path::fn`).
    pub name: Option<String>,
    pub max_attempts: u32,
    pub base_ms: u64,
    pub cap_ms: u64,
    /// How much each wait grows, in thousandths (2000: doubling).
    pub factor_milli: u32,
    /// One of `arguments::JITTERS` and one of `arguments::PRIORITIES`.
    pub jitter: &'static str,
    pub priority: &'static str,
    pub attempt_timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    /// The breaker the function names (`None` for `"none"`, or none named).
    pub breaker: Option<String>,
    /// Whether the operation has its own breaker: it names none, and does
    /// not say `"none"`.
    pub default_breaker: bool,
    /// The budget the function names (`None` for `"none"`, or none named).
    pub budget: Option<String>,
    /// Whether the operation has its own budget: it names none, and does
    /// not say `"none"`.
    pub default_budget: bool,
    pub bulkhead: Option<String>,
    pub throttle: Option<String>,
    pub rate_limit: Option<String>,
    /// `hedge_after_ms`: the attempts of a round run side by side.
    pub hedge_after_ms: Option<u64>,
    pub max_hedges: u32,
    /// `fallback = path`: called with the final error.
    pub fallback: Option<syn::ExprPath>,
    /// The parameter whose `Display` is the idempotency key.
    pub key: Option<Ident>,
    /// `per = param`: the parameter whose `Display` chooses the breaker.
    pub per: Option<Ident>,
    pub nested_retry: bool,
    /// `false` for `idempotent = false`.
    pub idempotent: bool,
    pub error_type: ErrorType,
    /// `classify = path`: classifies the errors instead of `Classify`.
    pub classify: Option<syn::ExprPath>,
    /// `on_retry = path`: a `fn(&RetryEvent)` told of each retry.
    pub on_retry: Option<syn::ExprPath>,
    /// `on_stop = path`: a `fn(&StopEvent)` told of each call that gives up.
    pub on_stop: Option<syn::ExprPath>,
}

pub(crate) fn validate(args: Args, item: &ItemFn) -> syn::Result<Plan> {
    // Checked first and alone: the function was rewritten by the first, and
    // what the other checks would find in the rewrite is not what was written.
    if expanded_before(item) {
        return Err(syn::Error::new(Span::call_site(), TWICE));
    }
    let mut errors = Errors::default();
    let mut check = |result: syn::Result<()>| {
        if let Err(error) = result {
            errors.push(error);
        }
    };

    if item.sig.asyncness.is_none() {
        check(Err(syn::Error::new(
            item.sig.fn_token.span,
            "#[resilient] needs an `async fn`: each attempt is awaited, and the waits between attempts are async sleeps",
        )));
    }
    if let Some(again) =
        item.attrs.iter().find(|attr| attr.path().segments.last().is_some_and(|s| s.ident == "resilient"))
    {
        check(Err(syn::Error::new_spanned(again, TWICE)));
    }
    let error_type = match error_type(&item.sig) {
        Ok(error_type) => error_type,
        Err(error) => {
            // A plain fn returning a future of a `Result` (`-> impl Future<Output = ..>`)
            // has been told to be an `async fn`, which is all it has to change.
            if item.sig.asyncness.is_some() || !returns_future(&item.sig) {
                check(Err(error));
            }
            ErrorType::Inferred
        }
    };

    let default_max_attempts = arguments::default_integer("max_attempts") as u32;
    let max_attempts = match args.integer("max_attempts") {
        Some((value, s)) if !MAX_ATTEMPTS.contains(&value) => {
            check(Err(at(s, format!("`max_attempts` must be in 1..=100, got {value}"))));
            default_max_attempts
        }
        // In range, so it fits.
        Some((value, _)) => u32::try_from(value).unwrap_or(default_max_attempts),
        None => default_max_attempts,
    };

    let factor_milli = match args.decimal("factor") {
        Some((value, s)) if !(1000..=10_000).contains(&value) => {
            check(Err(at(
                s,
                format!(
                    "`factor` must be in 1.0..=10.0 (waits that never shrink, and grow at most tenfold a step), got {}",
                    value as f64 / 1000.0
                ),
            )));
            2000
        }
        // In range, so it fits.
        Some((value, _)) => u32::try_from(value).unwrap_or(2000),
        None => 2000,
    };
    let base_ms = millis(&args, "base_ms", &mut check);
    let cap_ms = millis(&args, "cap_ms", &mut check);
    check(backoff_range(&args, base_ms, cap_ms));

    let attempt_timeout_ms = millis(&args, "attempt_timeout_ms", &mut check);
    let deadline_ms = millis(&args, "deadline_ms", &mut check);
    check(positive(&args, "attempt_timeout_ms", "no per-attempt timeout"));
    check(positive(&args, "deadline_ms", "no deadline"));
    if let (Some(timeout), Some(deadline), Some((_, setting))) =
        (attempt_timeout_ms, deadline_ms, args.integer("attempt_timeout_ms"))
        && timeout >= deadline
        && deadline > 0
    {
        check(Err(at(
            setting,
            format!(
                "`attempt_timeout_ms` must be less than `deadline_ms`: a {timeout} ms attempt timeout could never fire, the {deadline} ms deadline ends the call first"
            ),
        )));
    }

    for name in ["breaker", "budget", "bulkhead", "throttle", "rate_limit", "name"] {
        if let Some((value, s)) = args.name(name)
            && value.trim().is_empty()
        {
            let without = if name == "name" {
                "the default, `module_path::fn`".to_owned()
            } else if name == "budget" || name == "breaker" {
                format!("the operation's own {name}, or say `\"none\"` for none")
            } else {
                format!("no {}", name.replace('_', " "))
            };
            check(Err(at(
                s,
                format!("`{name}` needs a name, not an empty string; leave `{name}` out for {without}"),
            )));
        }
    }

    let idempotent = args.boolean("idempotent");
    if let Some((false, s)) = idempotent
        && max_attempts > 1
        && args.get("key").is_none()
    {
        check(Err(syn::Error::new_spanned(
            &s.pair,
            "a non-idempotent operation may only be retried with an idempotency key: add `key = <param>` or set `max_attempts = 1`",
        )));
    }
    if let Some(key) = args.parameter("key") {
        check(parameter_named("key", key, item));
    }
    if let Some(per) = args.parameter("per") {
        check(parameter_named("per", per, item));
        let keyed = ["rate_limit", "bulkhead"].iter().any(|guard| args.name(guard).is_some());
        if args.name("breaker").is_none_or(|(name, _)| name == NO_GUARD) && !keyed {
            check(Err(syn::Error::new(per.span(), PER_WITHOUT_GUARD)));
        }
    }
    if max_attempts > 1 {
        check(no_mutable_borrow_returned(&item.sig));
        // A hedged fn's `&mut`s, nested or not, are refused with the hedge below.
        if args.integer("hedge_after_ms").is_none() {
            check(no_mutable_borrow_copied(&item.sig));
        }
    }

    let hedge_after_ms = millis(&args, "hedge_after_ms", &mut check);
    check(positive(&args, "hedge_after_ms", "no hedging"));
    let default_max_hedges = arguments::default_integer("max_hedges") as u32;
    let max_hedges = match args.integer("max_hedges") {
        Some((value, s)) if !MAX_HEDGES.contains(&value) => {
            check(Err(at(s, format!("`max_hedges` must be in 1..=3, got {value}"))));
            default_max_hedges
        }
        Some((_, s)) if hedge_after_ms.is_none() => {
            check(Err(at(s, "`max_hedges` needs `hedge_after_ms = <ms>`: when to start a hedge")));
            default_max_hedges
        }
        Some((value, _)) => u32::try_from(value).unwrap_or(default_max_hedges),
        None => default_max_hedges,
    };
    if let Some((_, setting)) = args.integer("hedge_after_ms") {
        if let Some((false, _)) = idempotent
            && args.get("key").is_none()
        {
            check(Err(syn::Error::new_spanned(
                &setting.pair,
                "a non-idempotent operation may only be hedged with an idempotency key: add `key = <param>` (every hedge carries the same key) or leave out `hedge_after_ms`",
            )));
        }
        check(no_mutable_borrow_hedged(&item.sig));
    }

    let krate = match args.crate_path("crate") {
        Some(path) => path.to_token_stream(),
        None => crate::facade::path().unwrap_or_else(|error| {
            check(Err(error));
            quote!(::stormproof)
        }),
    };
    let choice = |name: &str| match arguments::find(name).map(|a| a.default) {
        Some(Default::Choice(default)) => args.choice(name).unwrap_or(default),
        _ => unreachable!("`{name}` is a choice with a default in the table"),
    };
    let owned = |name: &str| args.name(name).map(|(value, _)| value.to_owned());

    let plan = Plan {
        krate,
        name: owned("name"),
        max_attempts,
        base_ms: base_ms.unwrap_or(arguments::default_integer("base_ms")),
        cap_ms: cap_ms.unwrap_or(arguments::default_integer("cap_ms")),
        factor_milli,
        jitter: choice("jitter"),
        priority: choice("priority"),
        attempt_timeout_ms,
        deadline_ms,
        breaker: owned("breaker").filter(|name| name != NO_GUARD),
        default_breaker: args.name("breaker").is_none(),
        budget: owned("budget").filter(|name| name != NO_GUARD),
        default_budget: args.name("budget").is_none(),
        bulkhead: owned("bulkhead"),
        throttle: owned("throttle"),
        rate_limit: owned("rate_limit"),
        hedge_after_ms,
        max_hedges,
        fallback: args.fn_path("fallback").cloned(),
        key: args.parameter("key").cloned(),
        per: args.parameter("per").cloned(),
        nested_retry: choice("nested") == "retry",
        idempotent: idempotent.is_none_or(|(value, _)| value),
        error_type,
        classify: args.fn_path("classify").cloned(),
        on_retry: args.fn_path("on_retry").cloned(),
        on_stop: args.fn_path("on_stop").cloned(),
    };
    errors.finish(plan)
}

const PER_WITHOUT_GUARD: &str = "`per` gives each key its own circuit breaker, rate limit or bulkhead, of the sets `breaker`, `rate_limit` and `bulkhead` name: name one, like `breaker = \"search\", per = tenant`";

/// The budget or breaker name that means none at all (the runtime's
/// `budget::NO_BUDGET` and `breaker::NO_BREAKER`).
const NO_GUARD: &str = "none";

const TWICE: &str = "#[resilient] is on this function twice: the retries would multiply (every attempt of one running all of the other's); keep one, with every argument in it";

/// Whether another `#[resilient]` has expanded the function already: its
/// body declares the policy `static` (which a body as written does not),
/// at its top or, when an attribute between the two wrapped the body (as
/// `#[tracing::instrument]` does), deeper in. Told by the expansion rather
/// than by name, since `use stormproof::resilient as retry;` renames the
/// attribute; the first catches a second written `stormproof` before that.
fn expanded_before(item: &ItemFn) -> bool {
    fn declares_policy(tokens: TokenStream) -> bool {
        let mut after_static = false;
        tokens.into_iter().any(|token| {
            let found = match &token {
                TokenTree::Ident(ident) => after_static && ident == POLICY,
                TokenTree::Group(group) => declares_policy(group.stream()),
                _ => false,
            };
            after_static = matches!(&token, TokenTree::Ident(ident) if ident == "static");
            found
        })
    }
    declares_policy(item.block.to_token_stream())
}

fn at(setting: &Setting, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new_spanned(&setting.at, message)
}

/// A duration in milliseconds: not negative, and within `u64`.
fn millis(args: &Args, name: &str, check: &mut impl FnMut(syn::Result<()>)) -> Option<u64> {
    let (value, s) = args.integer(name)?;
    match u64::try_from(value) {
        Ok(ms) => Some(ms),
        Err(_) if value < 0 => {
            check(Err(at(s, format!("`{name}` cannot be negative, got {value}"))));
            None
        }
        Err(_) => {
            check(Err(at(s, format!("`{name}` is too large: at most {} ms", u64::MAX))));
            None
        }
    }
}

fn positive(args: &Args, name: &str, without: &str) -> syn::Result<()> {
    match args.integer(name) {
        Some((0, s)) => Err(at(s, format!("`{name}` must be greater than 0; leave it out for {without}"))),
        _ => Ok(()),
    }
}

/// `base_ms <= cap_ms`, naming the default when only one of them was written.
fn backoff_range(args: &Args, base_ms: Option<u64>, cap_ms: Option<u64>) -> syn::Result<()> {
    let default_base = arguments::default_integer("base_ms");
    let default_cap = arguments::default_integer("cap_ms");
    match (args.integer("base_ms"), base_ms, args.integer("cap_ms"), cap_ms) {
        (Some((_, setting)), Some(base), Some(_), Some(cap)) if base > cap => {
            Err(at(setting, format!("`base_ms` must not exceed `cap_ms` ({base} > {cap})")))
        }
        (None, _, Some((_, setting)), Some(cap)) if default_base > cap => Err(at(
            setting,
            format!(
                "`base_ms` must not exceed `cap_ms`: the default `base_ms` is {default_base}, above `cap_ms = {cap}`; set `base_ms` too"
            ),
        )),
        (Some((_, setting)), Some(base), None, _) if base > default_cap => Err(at(
            setting,
            format!(
                "`base_ms` must not exceed `cap_ms`: the default `cap_ms` is 20_000, below `base_ms = {base}`; set `cap_ms` too"
            ),
        )),
        _ => Ok(()),
    }
}

/// The names the parameters bind: a plain `order_id: u64`, and each
/// binding of a destructured one, `Order { id, .. }: Order`. Any of them
/// can be the key: it is read before the first attempt, where each is in
/// scope as the signature binds it.
fn parameter_names(item: &ItemFn) -> Vec<Ident> {
    let mut names = Vec::new();
    for arg in &item.sig.inputs {
        if let FnArg::Typed(typed) = arg {
            names.extend(pattern_bindings(&typed.pat).into_iter().map(|binding| binding.ident.clone()));
        }
    }
    names
}

/// `key = param` or `per = param` (`argument`): a parameter, not `self`.
fn parameter_named(argument: &str, key: &Ident, item: &ItemFn) -> syn::Result<()> {
    if key == "self" {
        let (what, like) = if argument == "key" {
            ("the idempotency key", "order_id")
        } else {
            ("the key of a breaker per key", "tenant")
        };
        let message = format!(
            "`self` cannot be {what}: `{argument}` must name a parameter of this function, like `{argument} = {like}`"
        );
        return Err(syn::Error::new(key.span(), message));
    }
    let names = parameter_names(item);
    if names.iter().any(|name| name == key) {
        return Ok(());
    }
    let strings: Vec<String> = names.iter().map(Ident::to_string).collect();
    let refs: Vec<&str> = strings.iter().map(String::as_str).collect();
    let hint = match suggest::closest(&key.to_string(), &refs) {
        Some(close) => format!("; did you mean `{close}`?"),
        None if refs.is_empty() => "; it has none".to_owned(),
        None => format!(
            "; its parameters are: {}",
            refs.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        ),
    };
    Err(syn::Error::new(key.span(), format!("`{argument}` must name a parameter of this function{hint}")))
}
