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

#[test]
fn an_empty_name_is_refused_as_the_attribute_refuses_it() {
    for section in ["breakers", "budgets", "bulkheads", "throttles", "rate_limits", "operations"] {
        for name in ["\"\"", "\" \""] {
            let registry = Registry::new();
            let err = registry.load_toml(&format!("[{section}.{name}]")).unwrap_err();
            assert_eq!(err.problems.len(), 1, "{err}");
            let problem = &err.problems[0];
            assert_eq!((problem.line, problem.column), (1, section.len() + 3), "{err}");
            assert_eq!(problem.field.as_deref(), Some(section), "{err}");
            assert!(
                problem.message.starts_with(&format!("`{section}` needs a name here, not an empty string"))
            );
        }
    }
    assert_eq!(
        error("[breakers.\"\"]\nfailure_threshold = 3"),
        "<toml>:1:11: `breakers` needs a name here, not an empty string, like `[breakers.payment]`"
    );
}

#[test]
fn minimum_calls_without_a_failure_rate_is_refused() {
    let err = Registry::new().load_toml("[breakers.p]\nminimum_calls = 20").unwrap_err();
    assert_eq!(err.problems[0].field.as_deref(), Some("minimum_calls"));
    assert_eq!(
        err.to_string(),
        "<toml>:2:17: `minimum_calls` sets the rate mode's floor: give `failure_rate_percent` too"
    );
    let registry = Registry::new();
    registry.load_toml("[breakers.p]\nfailure_rate_percent = 50\nminimum_calls = 20").unwrap();
    assert_eq!(registry.breaker("p").unwrap().config().minimum_calls, 20);
}
