//! `hyper_util::client::legacy::Error`, the error of hyper-util's client
//! (feature `hyper-util`): what a tower stack around that client boxes.

use crate::classify::{Classify, ErrorClass};

/// A failed connect, DNS resolution included, is transient, as reqwest's
/// `is_connect()` errors are (reqwest is built on this client, and asks
/// this same `is_connect()`): the next attempt may resolve the name, or
/// reach another address. By its cause alone, a failed DNS lookup would be
/// permanent: std reports it as an `io::Error` of no known kind
/// (`Uncategorized`), which the walk takes as "the input is wrong".
///
/// Any other error is classified by what it carries (its `source()`
/// chain, as a boxed error is), transient when nothing there says.
impl Classify for hyper_util::client::legacy::Error {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self)
    }

    fn classify(&self) -> ErrorClass {
        if self.is_connect() {
            return ErrorClass::Transient;
        }
        std::error::Error::source(self).map_or(ErrorClass::Transient, super::classify_chain)
    }
}
