//! The attribute finds the facade wherever a user's Cargo.toml puts it:
//! under a new name (`sp = { package = "stormproof" }`), or through another
//! crate's re-export named with `crate = "..."`; and a re-export not named
//! is one compile error that says what to do.
//!
//! Each case is a crate of its own under `tests/facade/`, built by cargo as
//! a user's would be (offline, at the workspace's locked versions, in a
//! target directory the cases share).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cargo <verb>` on the fixture workspace at `tests/facade/<case>`.
fn cargo(case: &str, verb: &[&str]) -> Output {
    let dir = root().join("tests/facade").join(case);
    // The workspace's own lock: the same versions, nothing to fetch.
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root().join("target"), PathBuf::from)
        .join("facade-fixtures");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Command::new(cargo)
        .args(verb)
        .args(["--offline", "--quiet", "--manifest-path"])
        .arg(manifest(&dir))
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs")
}

fn manifest(dir: &Path) -> PathBuf {
    dir.join("Cargo.toml")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_crate_that_renames_the_dependency_runs_its_annotated_functions() {
    let out = cargo("renamed", &["run"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "attempts 2\nonce\n");
}

#[test]
fn a_crate_that_reaches_the_facade_through_a_reexport_names_it_with_crate() {
    let out = cargo("reexport", &["run", "-p", "app"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "attempts 2\n");
}

#[test]
fn a_reexport_not_named_with_crate_is_a_compile_error_saying_so() {
    let out = cargo("reexport", &["build", "-p", "forgets_crate"]);
    assert!(!out.status.success(), "it compiled: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("#[resilient] cannot find the `stormproof` crate among this crate's dependencies")
            && stderr.contains("crate = \"::my_lib::stormproof\"")
            && stderr.contains("forgets_crate/src/lib.rs:4:1"),
        "{stderr}"
    );
}
