// Behind a `Result` alias the error type is inferred, with the same message.
use stormproof::{Classify, ErrorClass, resilient};

#[derive(Debug)]
struct ApiError;

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

type ApiResult<T> = Result<T, ApiError>;

#[resilient]
async fn fetch() -> ApiResult<u32> {
    Err(ApiError)
}

fn main() {}
