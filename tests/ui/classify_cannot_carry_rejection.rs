//! `classify = ...` replaces `Classify`, but the error type must still be
//! able to carry the loop's rejections.

use stormproof::{ErrorClass, resilient};

#[derive(Debug)]
struct Opaque;

fn classify(_: &Opaque) -> ErrorClass {
    ErrorClass::Transient
}

#[resilient(classify = classify)]
async fn call() -> Result<(), Opaque> {
    Err(Opaque)
}

fn main() {}
