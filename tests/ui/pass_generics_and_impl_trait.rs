#![deny(warnings)]
//! Generics, lifetimes, where-clauses, `impl Trait` arguments, `?` with a
//! `From` conversion, an aliased `Result`, and argument patterns.

use std::fmt::Display;

use stormproof::{Classify, ErrorClass, Rejection, resilient};

#[derive(Debug)]
enum AppError {
    Parse(std::num::ParseIntError),
    Rejected(Rejection),
}

impl Classify for AppError {
    fn classify(&self) -> ErrorClass {
        match self {
            AppError::Parse(_) => ErrorClass::Permanent,
            AppError::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for AppError {
    fn from(rejection: Rejection) -> Self {
        AppError::Rejected(rejection)
    }
}

impl From<std::num::ParseIntError> for AppError {
    fn from(error: std::num::ParseIntError) -> Self {
        AppError::Parse(error)
    }
}

type AppResult<T> = Result<T, AppError>;

#[resilient]
async fn parse(text: &str) -> Result<u32, AppError> {
    let n: u32 = text.trim().parse()?;
    Ok(n)
}

#[resilient]
async fn longest<'a, 'b: 'a, T>(a: &'a T, b: &'b T) -> AppResult<&'a str>
where
    T: AsRef<str> + ?Sized,
{
    let (a, b) = (a.as_ref(), b.as_ref());
    Ok(if a.len() >= b.len() { a } else { b })
}

#[resilient(max_attempts = 3)]
async fn label<T: Clone + Display>(
    prefix: impl AsRef<str> + Clone,
    value: T,
    suffix: &impl Display,
) -> AppResult<String> {
    Ok(format!("{}{value}{suffix}", prefix.as_ref()))
}

#[resilient]
async fn patterns(mut name: String, (a, mut b): (u32, Vec<u32>), _ignored: u8) -> AppResult<String> {
    name.push('!');
    b.push(a);
    Ok(format!("{name}{b:?}"))
}

#[resilient]
async fn opaque(n: u32) -> Result<impl Display, AppError> {
    Ok(n * 2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(parse(" 42 ").await.unwrap(), 42);
    match parse("x").await {
        Err(AppError::Parse(error)) => assert!(!error.to_string().is_empty()),
        other => panic!("expected a parse error, got {other:?}"),
    }
    let owned = String::from("longer");
    assert_eq!(longest("short", owned.as_str()).await.unwrap(), "longer");
    assert_eq!(label("#", 7, &'!').await.unwrap(), "#7!");
    assert_eq!(patterns("hi".to_owned(), (3, vec![1]), 0).await.unwrap(), "hi![1, 3]");
    assert_eq!(opaque(4).await.unwrap().to_string(), "8");
}
