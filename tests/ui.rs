//! Compile-time behaviour of `#[resilient]`: every rule of the attribute's
//! contract is a `tests/ui/<rule>.rs` that must fail with the message in its
//! `.stderr`, and every supported function shape is a `tests/ui/pass_*.rs`
//! that must compile (warning-free) and run.
//!
//! One `#[test]` for all cases, so trybuild builds them in a single batch.
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite` and read them.

#[test]
fn ui() {
    let mut cases: Vec<_> = std::fs::read_dir("tests/ui")
        .expect("tests/ui exists")
        .map(|entry| entry.expect("readable tests/ui").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    cases.sort();
    let t = trybuild::TestCases::new();
    for case in &cases {
        let passes =
            case.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.starts_with("pass_"));
        if passes {
            t.pass(case);
        } else {
            t.compile_fail(case);
        }
    }
}

/// The guide shows the compiler's real message and span for a
/// non-idempotent function without a key: its `.stderr`, which `ui` above
/// checks against the compiler, verbatim.
#[test]
fn the_guides_compile_error_sample_is_the_real_one() {
    let readme = std::fs::read_to_string("docs/attribute.md").expect("docs/attribute.md is readable");
    let stderr =
        std::fs::read_to_string("tests/ui/non_idempotent_without_key.stderr").expect("the .stderr exists");
    let sample = format!("```text\n{}\n```", stderr.trim_end());
    assert!(readme.contains(&sample), "docs/attribute.md must show, verbatim:\n{sample}");
}
