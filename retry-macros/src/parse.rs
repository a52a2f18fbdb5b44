//! Parsing: the attribute's arguments into typed settings that keep their spans.
//!
//! This step only answers "what did the user write?": it turns `key = value`
//! pairs into numbers, strings and names, rejecting unknown keys, duplicates
//! and values of the wrong kind. Whether the values make sense (ranges, one
//! setting against another, the function's shape) is `validate`'s job, so
//! every check lives in exactly one place.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, LitInt, LitStr, Path, Token, UnOp};

use crate::suggest;

/// Every argument the attribute accepts, in the order the docs list them.
pub(crate) const ARGUMENTS: &[&str] = &[
    "max_attempts",
    "base_ms",
    "cap_ms",
    "jitter",
    "attempt_timeout_ms",
    "deadline_ms",
    "breaker",
    "budget",
    "bulkhead",
    "idempotent",
    "key",
    "nested",
    "crate",
];

/// A value as the user wrote it, with the tokens to point at.
pub(crate) struct Setting<T> {
    /// The parsed value.
    pub value: T,
    /// `key = value`: errors about the setting as a whole point here.
    pub pair: TokenStream,
    /// `value`: errors about the value point here.
    pub at: TokenStream,
}

/// The backoff jitter, by the names the attribute accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Jitter {
    None,
    Full,
    Equal,
    Decorrelated,
}

impl Jitter {
    const NAMES: &[&str] = &["full", "equal", "decorrelated", "none"];

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Jitter::None),
            "full" => Some(Jitter::Full),
            "equal" => Some(Jitter::Equal),
            "decorrelated" => Some(Jitter::Decorrelated),
            _ => None,
        }
    }

    /// The runtime's variant name.
    pub(crate) fn variant(self) -> &'static str {
        match self {
            Jitter::None => "None",
            Jitter::Full => "Full",
            Jitter::Equal => "Equal",
            Jitter::Decorrelated => "Decorrelated",
        }
    }
}

/// What a nested annotated call does, by the names the attribute accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Nested {
    Once,
    Retry,
}

impl Nested {
    const NAMES: &[&str] = &["once", "retry"];

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "once" => Some(Nested::Once),
            "retry" => Some(Nested::Retry),
            _ => None,
        }
    }
}

/// The arguments as written: `None` for each one left out.
///
/// Integers are kept as written (signed, wide) so that `validate` can say
/// "must be in 1..=100" about `-1` instead of a parse error.
#[derive(Default)]
pub(crate) struct Args {
    pub max_attempts: Option<Setting<i128>>,
    pub base_ms: Option<Setting<i128>>,
    pub cap_ms: Option<Setting<i128>>,
    pub jitter: Option<Setting<Jitter>>,
    pub attempt_timeout_ms: Option<Setting<i128>>,
    pub deadline_ms: Option<Setting<i128>>,
    pub breaker: Option<Setting<String>>,
    pub budget: Option<Setting<String>>,
    pub bulkhead: Option<Setting<String>>,
    pub idempotent: Option<Setting<bool>>,
    pub key: Option<Setting<Ident>>,
    pub nested: Option<Setting<Nested>>,
    pub krate: Option<Setting<Path>>,
    /// Every key met so far, valid value or not, to catch a repeated one.
    seen: Vec<String>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        let mut errors = Errors::default();
        while !input.is_empty() {
            if !input.peek(Ident::peek_any) {
                return Err(input.error("expected an argument, like `max_attempts = 4`"));
            }
            let key = input.call(Ident::parse_any)?;
            let name = key.unraw().to_string();
            if !ARGUMENTS.contains(&name.as_str()) {
                errors.push(unknown_argument(&key, &name));
                if input.peek(Token![=]) {
                    input.parse::<Token![=]>()?;
                    input.parse::<Expr>()?;
                }
            } else if input.peek(Token![=]) {
                let eq: Token![=] = input.parse()?;
                let value: Expr = input.parse()?;
                if let Err(error) = args.set(&key, &name, eq, &value) {
                    errors.push(error);
                }
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("`{name}` needs a value, like `{name} = {}`", example(&name)),
                ));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        errors.finish(args)
    }
}

impl Args {
    fn set(&mut self, key: &Ident, name: &str, eq: Token![=], value: &Expr) -> syn::Result<()> {
        if self.seen.iter().any(|seen| seen == name) {
            return Err(syn::Error::new(key.span(), format!("`{name}` set more than once")));
        }
        self.seen.push(name.to_owned());
        let pair = quote!(#key #eq #value);
        match name {
            "max_attempts" => store(&mut self.max_attempts, name, pair, value, integer),
            "base_ms" => store(&mut self.base_ms, name, pair, value, integer),
            "cap_ms" => store(&mut self.cap_ms, name, pair, value, integer),
            "jitter" => store(&mut self.jitter, name, pair, value, |name, value| {
                one_of(name, value, Jitter::NAMES, Jitter::from_name)
            }),
            "attempt_timeout_ms" => store(&mut self.attempt_timeout_ms, name, pair, value, integer),
            "deadline_ms" => store(&mut self.deadline_ms, name, pair, value, integer),
            "breaker" => store(&mut self.breaker, name, pair, value, guard_name),
            "budget" => store(&mut self.budget, name, pair, value, guard_name),
            "bulkhead" => store(&mut self.bulkhead, name, pair, value, guard_name),
            "idempotent" => store(&mut self.idempotent, name, pair, value, boolean),
            "key" => store(&mut self.key, name, pair, value, parameter),
            "nested" => store(&mut self.nested, name, pair, value, |name, value| {
                one_of(name, value, Nested::NAMES, Nested::from_name)
            }),
            "crate" => store(&mut self.krate, name, pair, value, path),
            _ => Err(unknown_argument(key, name)),
        }
    }
}

/// Stores a setting (`set` has already refused a repeated key).
fn store<T>(
    slot: &mut Option<Setting<T>>,
    name: &str,
    pair: TokenStream,
    value: &Expr,
    convert: impl FnOnce(&str, &Expr) -> syn::Result<T>,
) -> syn::Result<()> {
    *slot = Some(Setting { value: convert(name, value)?, pair, at: value.to_token_stream() });
    Ok(())
}

fn unknown_argument(key: &Ident, name: &str) -> syn::Error {
    let expected = ARGUMENTS.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ");
    let message = match suggest::closest(name, ARGUMENTS) {
        Some(close) => {
            format!("unknown argument `{name}`; did you mean `{close}`? (expected one of: {expected})")
        }
        None => format!("unknown argument `{name}`; expected one of: {expected}"),
    };
    syn::Error::new(key.span(), message)
}

/// A value that fits the argument, for "like `x = ...`" hints.
fn example(name: &str) -> &'static str {
    match name {
        "max_attempts" => "4",
        "base_ms" => "100",
        "cap_ms" => "20_000",
        "attempt_timeout_ms" => "500",
        "deadline_ms" => "5_000",
        "jitter" => "\"full\"",
        "nested" => "\"once\"",
        "breaker" | "budget" | "bulkhead" => "\"payment\"",
        "idempotent" => "false",
        "key" => "order_id",
        _ => "\"::resilient\"",
    }
}

/// Sees through the invisible groups a `macro_rules!` wraps around `$x:expr`.
fn peel(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(group) => peel(&group.expr),
        other => other,
    }
}

fn literal(expr: &Expr) -> Option<&Lit> {
    match peel(expr) {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        _ => None,
    }
}

/// An integer literal, possibly negative; suffixes must be integer types.
fn integer(name: &str, expr: &Expr) -> syn::Result<i128> {
    let example = example(name);
    let wrong = |found: &str| {
        let message = if found.is_empty() {
            format!("expected an integer literal for `{name}`, like `{name} = {example}`")
        } else {
            format!("expected an integer literal for `{name}` (like `{name} = {example}`), found {found}")
        };
        syn::Error::new_spanned(expr, message)
    };
    match peel(expr) {
        Expr::Lit(ExprLit { lit: Lit::Int(lit), .. }) => unsigned(name, lit),
        Expr::Unary(ExprUnary { op: UnOp::Neg(_), expr: inner, .. }) => match literal(inner) {
            Some(Lit::Int(lit)) => unsigned(name, lit).map(|v| -v),
            Some(Lit::Float(_)) => Err(wrong("a float")),
            _ => Err(wrong("")),
        },
        Expr::Lit(ExprLit { lit: Lit::Float(_), .. }) => Err(wrong("a float")),
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => {
            let text = s.value();
            if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit() || c == '_') {
                Err(syn::Error::new_spanned(
                    expr,
                    format!(
                        "expected an integer literal for `{name}`, found a string: write `{name} = {text}` without quotes"
                    ),
                ))
            } else {
                Err(wrong("a string"))
            }
        }
        Expr::Lit(ExprLit { lit: Lit::Bool(_), .. }) => Err(wrong("a bool")),
        _ => Err(wrong("")),
    }
}

fn unsigned(name: &str, lit: &LitInt) -> syn::Result<i128> {
    const INTEGER_SUFFIXES: &[&str] =
        &["", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize"];
    let suffix = lit.suffix();
    if !INTEGER_SUFFIXES.contains(&suffix) {
        let digits = lit.base10_digits();
        let hint = match (name.ends_with("_ms"), suffix) {
            (true, "ms") => format!("`{name}` is already in milliseconds: write `{name} = {digits}`"),
            (true, "s" | "sec" | "secs") => {
                match digits.parse::<u64>().ok().and_then(|s| s.checked_mul(1000)) {
                    Some(ms) => format!("`{name}` is in milliseconds: write `{name} = {ms}`"),
                    None => format!("`{name}` is in milliseconds"),
                }
            }
            _ => format!("write a plain integer, like `{name} = {digits}`"),
        };
        return Err(syn::Error::new(
            lit.span(),
            format!("unexpected suffix `{suffix}` on the integer literal for `{name}`; {hint}"),
        ));
    }
    lit.base10_parse::<i128>().map_err(|_| syn::Error::new(lit.span(), format!("`{name}` is too large")))
}

fn string<'a>(name: &str, expr: &'a Expr) -> syn::Result<&'a LitStr> {
    match literal(expr) {
        Some(Lit::Str(lit)) => Ok(lit),
        _ => {
            let hint = match peel(expr) {
                Expr::Path(p) if p.path.get_ident().is_some() => {
                    format!(
                        ": write `{name} = \"{}\"`",
                        p.path.get_ident().map(Ident::to_string).unwrap_or_default()
                    )
                }
                _ => format!(", like `{name} = {}`", example(name)),
            };
            Err(syn::Error::new_spanned(expr, format!("expected a string literal for `{name}`{hint}")))
        }
    }
}

/// A breaker, budget or bulkhead name.
fn guard_name(name: &str, expr: &Expr) -> syn::Result<String> {
    string(name, expr).map(LitStr::value)
}

/// One of a fixed set of strings.
fn one_of<T>(name: &str, expr: &Expr, names: &[&str], from_name: fn(&str) -> Option<T>) -> syn::Result<T> {
    let lit = string(name, expr)?;
    let value = lit.value();
    from_name(&value).ok_or_else(|| {
        let expected = names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        let close = suggest::closest(&value, names)
            .map(|close| format!("; did you mean \"{close}\"?"))
            .unwrap_or_default();
        syn::Error::new(lit.span(), format!("unknown {name} \"{value}\"; expected one of: {expected}{close}"))
    })
}

fn boolean(name: &str, expr: &Expr) -> syn::Result<bool> {
    match literal(expr) {
        Some(Lit::Bool(b)) => Ok(b.value),
        Some(Lit::Str(s)) if matches!(s.value().as_str(), "true" | "false") => Err(syn::Error::new_spanned(
            expr,
            format!(
                "expected `true` or `false` for `{name}`, found a string: write `{name} = {}` without quotes",
                s.value()
            ),
        )),
        _ => Err(syn::Error::new_spanned(expr, format!("expected `true` or `false` for `{name}`"))),
    }
}

/// The name of one of the function's parameters (checked against them in `validate`).
fn parameter(name: &str, expr: &Expr) -> syn::Result<Ident> {
    // `self` is a one-segment path too: `validate` rejects it with the other parameter checks.
    if let Expr::Path(p) = peel(expr) {
        if let (None, Some(ident)) = (&p.qself, p.path.get_ident()) {
            return Ok(ident.clone());
        }
    }
    let message = match literal(expr) {
        Some(Lit::Str(s)) if syn::parse_str::<Ident>(&s.value()).is_ok() => format!(
            "`{name}` takes a parameter's name, not a string: write `{name} = {}` without quotes",
            s.value()
        ),
        _ => format!("expected a parameter's name for `{name}`, like `{name} = {}`", example(name)),
    };
    Err(syn::Error::new_spanned(expr, message))
}

/// The runtime's path, written as a string like tokio's `crate = "..."`.
fn path(name: &str, expr: &Expr) -> syn::Result<Path> {
    let lit = string(name, expr)?;
    lit.parse_with(Path::parse_mod_style).map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`{name}` must be a path to the `resilient` crate, like `{name} = \"::resilient\"`"),
        )
    })
}

/// Several independent errors, reported together.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(first) => first.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.0 {
            Some(error) => Err(error),
            None => Ok(value),
        }
    }
}
