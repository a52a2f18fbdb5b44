//! Reading one argument's value by its kind: an integer literal, a string,
//! one of a set of strings, a bool, a parameter's name, a path. Each reader
//! says what was expected, and how to write it, at the value.

use syn::{Expr, ExprLit, ExprPath, ExprUnary, Ident, Lit, LitInt, LitStr, Path, UnOp};

use crate::arguments::Argument;
use crate::suggest;

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
pub(crate) fn integer(argument: &Argument, expr: &Expr) -> syn::Result<i128> {
    let (name, example) = (argument.name, argument.example);
    let wrong = |found: &str| {
        let message = if found.is_empty() {
            format!("expected an integer literal for `{name}`, like `{name} = {example}`")
        } else {
            format!("expected an integer literal for `{name}` (like `{name} = {example}`), found {found}")
        };
        syn::Error::new_spanned(expr, message)
    };
    match peel(expr) {
        Expr::Lit(ExprLit { lit: Lit::Int(lit), .. }) => unsigned(name, lit).and_then(|v| fits(name, lit, v)),
        Expr::Unary(ExprUnary { op: UnOp::Neg(_), expr: inner, .. }) => match literal(inner) {
            Some(Lit::Int(lit)) => unsigned(name, lit).and_then(|v| fits(name, lit, -v)),
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

/// `value` itself, when the type its literal's suffix names can hold it: a
/// `300u8` is no `u8` (rustc refuses it as an overflowing literal), and
/// whether 300 or its wrapped 44 was meant cannot be told. A suffix that
/// holds the value is accepted whatever its type: the argument takes the
/// number, not the literal. A negative value with an unsigned suffix is
/// left to `validate`, which refuses every negative value for what it is.
fn fits(name: &str, lit: &LitInt, value: i128) -> syn::Result<i128> {
    let suffix = lit.suffix();
    let range = match suffix {
        "u8" => 0..=i128::from(u8::MAX),
        "u16" => 0..=i128::from(u16::MAX),
        "u32" => 0..=i128::from(u32::MAX),
        // `usize` and `isize` as wide as they are on a 64-bit target.
        "u64" | "usize" => 0..=i128::from(u64::MAX),
        "i8" => i128::from(i8::MIN)..=i128::from(i8::MAX),
        "i16" => i128::from(i16::MIN)..=i128::from(i16::MAX),
        "i32" => i128::from(i32::MIN)..=i128::from(i32::MAX),
        "i64" | "isize" => i128::from(i64::MIN)..=i128::from(i64::MAX),
        // No suffix, `u128` and `i128`: any value `unsigned` could read.
        _ => return Ok(value),
    };
    if range.contains(&value) || (value < 0 && suffix.starts_with('u')) {
        return Ok(value);
    }
    let (low, high) = (range.start(), range.end());
    Err(syn::Error::new(
        lit.span(),
        format!(
            "the integer literal for `{name}` does not fit its suffix: `{suffix}` holds {low}..={high}, not {value}; write `{name} = {value}` without the suffix"
        ),
    ))
}

pub(crate) fn string<'a>(argument: &Argument, expr: &'a Expr) -> syn::Result<&'a LitStr> {
    let name = argument.name;
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
                _ => format!(", like `{name} = {}`", argument.example),
            };
            Err(syn::Error::new_spanned(expr, format!("expected a string literal for `{name}`{hint}")))
        }
    }
}

/// One of a fixed set of strings.
pub(crate) fn one_of(
    argument: &Argument,
    expr: &Expr,
    choices: &'static [&'static str],
) -> syn::Result<&'static str> {
    let lit = string(argument, expr)?;
    let value = lit.value();
    choices.iter().copied().find(|choice| *choice == value).ok_or_else(|| {
        let expected = choices.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        let close = suggest::closest(&value, choices)
            .map(|close| format!("; did you mean \"{close}\"?"))
            .unwrap_or_default();
        let name = argument.name;
        syn::Error::new(lit.span(), format!("unknown {name} \"{value}\"; expected one of: {expected}{close}"))
    })
}

/// A decimal literal (`1.5`, `2`, `1.125`), in thousandths: at most three
/// decimals, no suffix but `f64`/`f32` on a float.
pub(crate) fn decimal(argument: &Argument, expr: &Expr) -> syn::Result<i128> {
    // A negative number is read as one, for the range check to refuse in words.
    if let Expr::Unary(ExprUnary { op: UnOp::Neg(_), expr: inner, .. }) = peel(expr) {
        return decimal(argument, inner).map(|value| -value);
    }
    let (name, example) = (argument.name, argument.example);
    let digits = match literal(expr) {
        Some(Lit::Float(lit)) if matches!(lit.suffix(), "" | "f64" | "f32") => lit.base10_digits().to_owned(),
        Some(Lit::Int(lit)) if lit.suffix().is_empty() => lit.base10_digits().to_owned(),
        _ => {
            let message = format!("expected a decimal number for `{name}`, like `{name} = {example}`");
            return Err(syn::Error::new_spanned(expr, message));
        }
    };
    if digits.contains(['e', 'E']) {
        let message = format!(
            "expected a plain decimal number for `{name}`, like `{name} = {example}`, found {digits}"
        );
        return Err(syn::Error::new_spanned(expr, message));
    }
    let (whole, fraction) = digits.split_once('.').unwrap_or((&digits, ""));
    // `2.0000` is 2: only the decimals that count are limited.
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > 3 {
        let message = format!("`{name}` takes at most three decimals, got {digits}");
        return Err(syn::Error::new_spanned(expr, message));
    }
    let too_large = || syn::Error::new_spanned(expr, format!("`{name}` is too large: {digits}"));
    let whole: i128 = whole.parse().map_err(|_| too_large())?;
    let fraction: i128 = format!("{fraction:0<3}").parse().unwrap_or(0);
    whole.checked_mul(1000).and_then(|w| w.checked_add(fraction)).ok_or_else(too_large)
}

pub(crate) fn boolean(name: &str, expr: &Expr) -> syn::Result<bool> {
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
pub(crate) fn parameter(argument: &Argument, expr: &Expr) -> syn::Result<Ident> {
    let name = argument.name;
    // `self` is a one-segment path too: `validate` rejects it with the other parameter checks.
    if let Expr::Path(p) = peel(expr)
        && let (None, Some(ident)) = (&p.qself, p.path.get_ident())
    {
        return Ok(ident.clone());
    }
    let message = match literal(expr) {
        Some(Lit::Str(s)) if syn::parse_str::<Ident>(&s.value()).is_ok() => format!(
            "`{name}` takes a parameter's name, not a string: write `{name} = {}` without quotes",
            s.value()
        ),
        _ => format!("expected a parameter's name for `{name}`, like `{name} = {}`", argument.example),
    };
    Err(syn::Error::new_spanned(expr, message))
}

/// The runtime's path, written as a string like tokio's `crate = "..."`.
pub(crate) fn path(argument: &Argument, expr: &Expr) -> syn::Result<Path> {
    let name = argument.name;
    let lit = string(argument, expr)?;
    lit.parse_with(Path::parse_mod_style).map_err(|_| {
        syn::Error::new(
            lit.span(),
            format!("`{name}` must be a path to the `stormproof` crate, like `{name} = \"::stormproof\"`"),
        )
    })
}

/// A path to a function, as a path (`classify = my_classify`).
pub(crate) fn fn_path(argument: &Argument, expr: &Expr) -> syn::Result<ExprPath> {
    let name = argument.name;
    if let Expr::Path(path) = peel(expr) {
        return Ok(path.clone());
    }
    let message = match literal(expr) {
        Some(Lit::Str(s)) if s.parse::<ExprPath>().is_ok() => format!(
            "`{name}` takes a path to a function, not a string: write `{name} = {}` without quotes",
            s.value()
        ),
        _ => format!(
            "expected a path to a function `fn(&E) -> ErrorClass` for `{name}`, like `{name} = {}`",
            argument.example
        ),
    };
    Err(syn::Error::new_spanned(expr, message))
}
