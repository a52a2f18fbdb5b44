//! Loading more than one file, a load racing the calls, and the values a
//! file must not slip through: duplicate keys, empty names, a rate mode's
//! key without the rate mode.

use resilient::Registry;

use super::error;

#[test]
fn a_duplicate_key_is_named() {
    let err =
        Registry::new().load_toml("[breakers.p]\nfailure_threshold = 1\nfailure_threshold = 2").unwrap_err();
    assert_eq!(err.problems[0].field.as_deref(), Some("failure_threshold"), "{err}");
    assert_eq!(
        err.to_string(),
        "<toml>:3:1: not valid TOML: duplicate key `failure_threshold`: a key is given once"
    );
    let err = error("[operations.\"a::b\"]\nmax_attempts = 2\n[operations.'a::b']\nmax_attempts = 3");
    assert_eq!(err, "<toml>:3:13: not valid TOML: duplicate key `a::b`: a key is given once");
}
