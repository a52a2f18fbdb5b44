// `ApiError` classifies itself but cannot carry the library's own
// rejections. (A type lacking `Classify` gets the same message; its
// `.stderr` would also list every `Classify` impl, which changes with the
// crate's features, so this case leaves `Classify` in place.)
use stormproof::{Classify, ErrorClass, resilient};

#[derive(Debug)]
struct ApiError;

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Transient
    }
}

#[resilient]
async fn fetch() -> Result<u32, ApiError> {
    Err(ApiError)
}

fn main() {}
