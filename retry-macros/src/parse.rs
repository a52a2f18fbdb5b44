//! Parsing: the attribute's arguments into typed values that keep their spans.
//!
//! This step only answers "what did the user write?": it turns `key = value`
//! pairs into numbers, strings and names by the kind the argument table
//! gives them, rejecting unknown keys, duplicates and values of the wrong
//! kind. Whether the values make sense (ranges, one setting against another,
//! the function's shape) is `validate`'s job, so every check lives in
//! exactly one place.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, ExprPath, Ident, Path, Token};

use crate::arguments::{self, Argument, Kind};
use crate::suggest;
use crate::values::{boolean, decimal, fn_path, integer, one_of, parameter, path, string};

/// A value as the user wrote it, typed by its argument's kind.
pub(crate) enum Value {
    Integer(i128),
    /// A decimal, in thousandths.
    Decimal(i128),
    Name(String),
    Choice(&'static str),
    Bool(bool),
    Parameter(Ident),
    CratePath(Path),
    FnPath(ExprPath),
}

/// One argument as written, with the tokens to point at.
pub(crate) struct Setting {
    pub value: Value,
    /// `key = value`: errors about the setting as a whole point here.
    pub pair: TokenStream,
    /// `value`: errors about the value point here.
    pub at: TokenStream,
}

/// The arguments as written, in order; each name at most once.
#[derive(Default)]
pub(crate) struct Args {
    settings: Vec<(&'static str, Setting)>,
    /// Every key met so far, valid value or not, to catch a repeated one.
    seen: Vec<String>,
}

impl Args {
    /// The setting of `name`, if it was written (with a valid value).
    pub(crate) fn get(&self, name: &str) -> Option<&Setting> {
        self.settings.iter().find(|(n, _)| *n == name).map(|(_, setting)| setting)
    }

    /// An integer argument's value and setting.
    pub(crate) fn integer(&self, name: &str) -> Option<(i128, &Setting)> {
        self.get(name).and_then(|s| match s.value {
            Value::Integer(v) => Some((v, s)),
            _ => None,
        })
    }

    /// A decimal argument's value, in thousandths, and setting.
    pub(crate) fn decimal(&self, name: &str) -> Option<(i128, &Setting)> {
        self.get(name).and_then(|s| match s.value {
            Value::Decimal(v) => Some((v, s)),
            _ => None,
        })
    }

    /// A name argument's value and setting.
    pub(crate) fn name(&self, name: &str) -> Option<(&str, &Setting)> {
        self.get(name).and_then(|s| match &s.value {
            Value::Name(v) => Some((v.as_str(), s)),
            _ => None,
        })
    }

    /// A choice argument's value.
    pub(crate) fn choice(&self, name: &str) -> Option<&'static str> {
        self.get(name).and_then(|s| match s.value {
            Value::Choice(v) => Some(v),
            _ => None,
        })
    }

    /// A boolean argument's value and setting.
    pub(crate) fn boolean(&self, name: &str) -> Option<(bool, &Setting)> {
        self.get(name).and_then(|s| match s.value {
            Value::Bool(v) => Some((v, s)),
            _ => None,
        })
    }

    /// The parameter named by a parameter argument.
    pub(crate) fn parameter(&self, name: &str) -> Option<&Ident> {
        self.get(name).and_then(|s| match &s.value {
            Value::Parameter(v) => Some(v),
            _ => None,
        })
    }

    /// The path of a function-path argument.
    pub(crate) fn fn_path(&self, name: &str) -> Option<&ExprPath> {
        self.get(name).and_then(|s| match &s.value {
            Value::FnPath(v) => Some(v),
            _ => None,
        })
    }

    /// The path of a crate-path argument.
    pub(crate) fn crate_path(&self, name: &str) -> Option<&Path> {
        self.get(name).and_then(|s| match &s.value {
            Value::CratePath(v) => Some(v),
            _ => None,
        })
    }
}

impl Parse for Args {
    /// An unreadable argument is skipped to the next `,`, or to the next
    /// argument when a `,` is missing: its error joins the others', and so
    /// do those of every argument after it.
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        let mut errors = Errors::default();
        while !input.is_empty() {
            if let Err(error) = args.parse_one(input, &mut errors) {
                errors.push(error);
                skip_argument(input)?;
            }
            if !input.is_empty()
                && let Err(error) = input.parse::<Token![,]>()
            {
                errors.push(error);
                skip_argument(input)?;
                input.parse::<Option<Token![,]>>()?;
            }
        }
        errors.finish(args)
    }
}

/// The rest of an argument, up to the `,` after it, the end, or the next
/// argument when its `,` is missing (`max_attempts = 3 base_ms = 5s`): that
/// argument is read, and its errors reported, as if the `,` were there.
fn skip_argument(input: ParseStream) -> syn::Result<()> {
    while !input.is_empty() && !input.peek(Token![,]) && !starts_argument(input) {
        input.parse::<proc_macro2::TokenTree>()?;
    }
    Ok(())
}

/// Whether `name = ` comes next: an argument (`name == x` and `name => x` are not).
fn starts_argument(input: ParseStream) -> bool {
    input.peek(Ident::peek_any)
        && input.peek2(Token![=])
        && !input.peek2(Token![==])
        && !input.peek2(Token![=>])
}

impl Args {
    /// One `key = value`: errors about the value go to `errors`.
    fn parse_one(&mut self, input: ParseStream, errors: &mut Errors) -> syn::Result<()> {
        if !input.peek(Ident::peek_any) {
            return Err(input.error("expected an argument, like `max_attempts = 4`"));
        }
        let key = input.call(Ident::parse_any)?;
        let name = key.unraw().to_string();
        let argument = arguments::find(&name).ok_or_else(|| errors.push(unknown_argument(&key, &name))).ok();
        match argument {
            _ if input.peek(Token![=]) => {}
            // `retries(3)`, `timeout: 30`: the unknown name is what to fix.
            None => return skip_argument(input),
            Some(argument) => {
                let message = format!("`{name}` needs a value, like `{name} = {}`", argument.example);
                return Err(syn::Error::new(key.span(), message));
            }
        }
        let eq: Token![=] = input.parse()?;
        let value: Expr = input.parse()?;
        if let Some(argument) = argument
            && let Err(error) = self.set(&key, argument, eq, &value)
        {
            errors.push(error);
        }
        Ok(())
    }

    fn set(
        &mut self,
        key: &Ident,
        argument: &'static Argument,
        eq: Token![=],
        value: &Expr,
    ) -> syn::Result<()> {
        let name = argument.name;
        if self.seen.iter().any(|seen| seen == name) {
            return Err(syn::Error::new(key.span(), format!("`{name}` set more than once")));
        }
        self.seen.push(name.to_owned());
        let parsed = match argument.kind {
            Kind::Integer => Value::Integer(integer(argument, value)?),
            Kind::Decimal => Value::Decimal(decimal(argument, value)?),
            Kind::Name => Value::Name(string(argument, value)?.value()),
            Kind::OneOf(choices) => Value::Choice(one_of(argument, value, choices)?),
            Kind::Bool => Value::Bool(boolean(name, value)?),
            Kind::Parameter => Value::Parameter(parameter(argument, value)?),
            Kind::CratePath => Value::CratePath(path(argument, value)?),
            Kind::FnPath => Value::FnPath(fn_path(argument, value)?),
        };
        let setting = Setting { value: parsed, pair: quote!(#key #eq #value), at: value.to_token_stream() };
        self.settings.push((name, setting));
        Ok(())
    }
}

fn unknown_argument(key: &Ident, name: &str) -> syn::Error {
    let names = arguments::names();
    let expected = names.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ");
    let message = match suggest::closest(name, &names) {
        Some(close) => {
            format!("unknown argument `{name}`; did you mean `{close}`? (expected one of: {expected})")
        }
        None => format!("unknown argument `{name}`; expected one of: {expected}"),
    };
    syn::Error::new(key.span(), message)
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
