#![deny(warnings)]
//! The defaults: no arguments at all.

use stormproof::{Classify, ErrorClass, Rejection, resilient};

#[derive(Debug)]
pub enum ApiError {
    Unavailable,
    Rejected(Rejection),
}

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        match self {
            ApiError::Unavailable => ErrorClass::Transient,
            ApiError::Rejected(rejection) => rejection.classify(),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(rejection: Rejection) -> Self {
        ApiError::Rejected(rejection)
    }
}

/// Docs and attributes are kept.
#[resilient]
#[must_use = "the quote is the point"]
pub async fn quote(sku: &str) -> Result<usize, ApiError> {
    #![allow(clippy::len_zero)]
    if sku.len() == 0 {
        return Err(ApiError::Unavailable);
    }
    Ok(sku.len())
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    assert_eq!(quote("A-1").await.unwrap(), 3);
}
