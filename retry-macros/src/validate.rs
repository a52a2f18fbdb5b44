//! Validation: the settings checked against each other and against the function.
//!
//! Each rule of the attribute's contract is one check here, and each check
//! points at the token the user has to change. All independent problems are
//! reported together, so fixing one does not just reveal the next.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::{FnArg, GenericArgument, Ident, ItemFn, Pat, PathArguments, ReturnType, Signature, Type};

use crate::parse::{Args, Errors, Jitter, Nested, Setting};
use crate::suggest;

const DEFAULT_MAX_ATTEMPTS: u32 = 4;
const DEFAULT_BASE_MS: u64 = 100;
const DEFAULT_CAP_MS: u64 = 20_000;
const MAX_ATTEMPTS: std::ops::RangeInclusive<i128> = 1..=100;

/// Everything `expand` needs, every value checked and every default filled in.
pub(crate) struct Plan {
    /// Where the runtime is: `::resilient` unless `crate = "..."` says otherwise.
    pub krate: TokenStream,
    pub max_attempts: u32,
    pub base_ms: u64,
    pub cap_ms: u64,
    pub jitter: Jitter,
    pub attempt_timeout_ms: Option<u64>,
    pub deadline_ms: Option<u64>,
    pub breaker: Option<String>,
    pub budget: Option<String>,
    pub bulkhead: Option<String>,
    /// The parameter whose `Display` is the idempotency key.
    pub key: Option<Ident>,
    pub nested: Nested,
    pub error_type: ErrorType,
}

/// The `E` of the function's `Result<T, E>`, when it can be named.
pub(crate) enum ErrorType {
    /// Written out, as in `Result<T, ApiError>`.
    Named(Box<Type>),
    /// Hidden behind an alias such as `io::Result<T>`: the compiler infers it.
    Inferred,
}

/// Checks the arguments and the function they annotate.
pub(crate) fn validate(args: Args, item: &ItemFn) -> syn::Result<Plan> {
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
    let error_type = match error_type(&item.sig) {
        Ok(error_type) => error_type,
        Err(error) => {
            check(Err(error));
            ErrorType::Inferred
        }
    };

    let max_attempts = match &args.max_attempts {
        Some(s) if !MAX_ATTEMPTS.contains(&s.value) => {
            check(Err(at(s, format!("`max_attempts` must be in 1..=100, got {}", s.value))));
            DEFAULT_MAX_ATTEMPTS
        }
        // In range, so it fits.
        Some(s) => u32::try_from(s.value).unwrap_or(DEFAULT_MAX_ATTEMPTS),
        None => DEFAULT_MAX_ATTEMPTS,
    };

    let base_ms = millis(&args.base_ms, "base_ms", &mut check);
    let cap_ms = millis(&args.cap_ms, "cap_ms", &mut check);
    check(backoff_range(&args, base_ms, cap_ms));

    let attempt_timeout_ms = millis(&args.attempt_timeout_ms, "attempt_timeout_ms", &mut check);
    let deadline_ms = millis(&args.deadline_ms, "deadline_ms", &mut check);
    check(positive(&args.attempt_timeout_ms, "attempt_timeout_ms", "no per-attempt timeout"));
    check(positive(&args.deadline_ms, "deadline_ms", "no deadline"));
    if let (Some(timeout), Some(deadline), Some(setting)) =
        (attempt_timeout_ms, deadline_ms, &args.attempt_timeout_ms)
    {
        if timeout >= deadline && deadline > 0 {
            check(Err(at(
                setting,
                format!(
                    "`attempt_timeout_ms` must be less than `deadline_ms`: a {timeout} ms attempt timeout could never fire, the {deadline} ms deadline ends the call first"
                ),
            )));
        }
    }

    for (setting, name) in
        [(&args.breaker, "breaker"), (&args.budget, "budget"), (&args.bulkhead, "bulkhead")]
    {
        if let Some(s) = setting {
            if s.value.trim().is_empty() {
                check(Err(at(
                    s,
                    format!("`{name}` needs a name, not an empty string; leave `{name}` out for no {name}"),
                )));
            }
        }
    }

    if let Some(s) = &args.idempotent {
        if !s.value && max_attempts > 1 && args.key.is_none() {
            check(Err(syn::Error::new_spanned(
                &s.pair,
                "a non-idempotent operation may only be retried with an idempotency key: add `key = <param>` or set `max_attempts = 1`",
            )));
        }
    }
    if let Some(s) = &args.key {
        check(key_parameter(&s.value, item));
    }

    let krate = match &args.krate {
        Some(s) => s.value.to_token_stream(),
        None => quote!(::resilient),
    };

    errors.finish(Plan {
        krate,
        max_attempts,
        base_ms: base_ms.unwrap_or(DEFAULT_BASE_MS),
        cap_ms: cap_ms.unwrap_or(DEFAULT_CAP_MS),
        jitter: args.jitter.as_ref().map_or(Jitter::Full, |s| s.value),
        attempt_timeout_ms,
        deadline_ms,
        breaker: args.breaker.map(|s| s.value),
        budget: args.budget.map(|s| s.value),
        bulkhead: args.bulkhead.map(|s| s.value),
        key: args.key.map(|s| s.value),
        nested: args.nested.map_or(Nested::Once, |s| s.value),
        error_type,
    })
}

fn at<T>(setting: &Setting<T>, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new_spanned(&setting.at, message)
}

/// A duration in milliseconds: not negative, and within `u64`.
fn millis(
    setting: &Option<Setting<i128>>,
    name: &str,
    check: &mut impl FnMut(syn::Result<()>),
) -> Option<u64> {
    let s = setting.as_ref()?;
    match u64::try_from(s.value) {
        Ok(ms) => Some(ms),
        Err(_) if s.value < 0 => {
            check(Err(at(s, format!("`{name}` cannot be negative, got {}", s.value))));
            None
        }
        Err(_) => {
            check(Err(at(s, format!("`{name}` is too large: at most {} ms", u64::MAX))));
            None
        }
    }
}

fn positive(setting: &Option<Setting<i128>>, name: &str, without: &str) -> syn::Result<()> {
    match setting {
        Some(s) if s.value == 0 => {
            Err(at(s, format!("`{name}` must be greater than 0; leave it out for {without}")))
        }
        _ => Ok(()),
    }
}

/// `base_ms <= cap_ms`, naming the default when only one of them was written.
fn backoff_range(args: &Args, base_ms: Option<u64>, cap_ms: Option<u64>) -> syn::Result<()> {
    match (&args.base_ms, base_ms, &args.cap_ms, cap_ms) {
        (Some(setting), Some(base), Some(_), Some(cap)) if base > cap => {
            Err(at(setting, format!("`base_ms` must not exceed `cap_ms` ({base} > {cap})")))
        }
        (None, _, Some(setting), Some(cap)) if DEFAULT_BASE_MS > cap => Err(at(
            setting,
            format!(
                "`base_ms` must not exceed `cap_ms`: the default `base_ms` is {DEFAULT_BASE_MS}, above `cap_ms = {cap}`; set `base_ms` too"
            ),
        )),
        (Some(setting), Some(base), None, _) if base > DEFAULT_CAP_MS => Err(at(
            setting,
            format!(
                "`base_ms` must not exceed `cap_ms`: the default `cap_ms` is 20_000, below `base_ms = {base}`; set `cap_ms` too"
            ),
        )),
        _ => Ok(()),
    }
}

/// The `E` of `Result<T, E>`, or an error if the function does not return a `Result`.
fn error_type(sig: &Signature) -> syn::Result<ErrorType> {
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

fn peel(ty: &Type) -> &Type {
    match ty {
        Type::Group(group) => peel(&group.elem),
        Type::Paren(paren) => peel(&paren.elem),
        other => other,
    }
}

/// `impl Trait` cannot be named in a turbofish or a `let`.
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

/// The names of the parameters bound by a plain identifier pattern.
pub(crate) fn parameter_names(item: &ItemFn) -> Vec<Ident> {
    item.sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(typed) => match &*typed.pat {
                Pat::Ident(pat) => Some(pat.ident.clone()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect()
}

fn key_parameter(key: &Ident, item: &ItemFn) -> syn::Result<()> {
    if key == "self" {
        return Err(syn::Error::new(
            key.span(),
            "`self` cannot be the idempotency key: `key` must name a parameter of this function, like `key = order_id`",
        ));
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
    Err(syn::Error::new(key.span(), format!("`key` must name a parameter of this function{hint}")))
}
