//! "Did you mean ...?" for misspelt argument names and string values.
//!
//! A typo is cheaper to fix when the compiler names the intended word, and
//! a Levenshtein distance over a dozen short names costs nothing, so this
//! needs no crate. Besides plain typos it knows the words people carry over
//! from other retry libraries (`retries`, `timeout_ms`, ...).

/// Names other libraries use for one of ours, mapped to ours.
const SYNONYMS: &[(&str, &str)] = &[
    ("retries", "max_attempts"),
    ("max_retries", "max_attempts"),
    ("attempts", "max_attempts"),
    ("tries", "max_attempts"),
    ("max_tries", "max_attempts"),
    ("timeout", "attempt_timeout_ms"),
    ("timeout_ms", "attempt_timeout_ms"),
    ("max_delay_ms", "cap_ms"),
    ("max_backoff_ms", "cap_ms"),
    ("initial_delay_ms", "base_ms"),
    ("delay_ms", "base_ms"),
    ("idempotency_key", "key"),
    ("circuit_breaker", "breaker"),
    ("retry_budget", "budget"),
];

/// The candidate `word` was most likely meant to be, if any is close enough.
pub(crate) fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    if let Some(&(_, ours)) = SYNONYMS.iter().find(|(theirs, _)| *theirs == lower)
        && let Some(found) = candidates.iter().find(|c| **c == ours)
    {
        return Some(found);
    }
    // `Max_Attempts`, `maxAttempts`, `deadline` (for `deadline_ms`): same word, other spelling.
    let squashed = squash(&lower);
    if let Some(found) =
        candidates.iter().find(|c| squash(c) == squashed || c.strip_suffix("_ms") == Some(lower.as_str()))
    {
        return Some(found);
    }
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (distance(&lower, c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn squash(word: &str) -> String {
    word.chars().filter(|c| *c != '_' && *c != '-').map(|c| c.to_ascii_lowercase()).collect()
}

/// Levenshtein distance, counting an adjacent swap as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows: the one before last is needed for swaps.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: &[&str] = &["max_attempts", "base_ms", "cap_ms", "deadline_ms", "key", "crate"];

    #[test]
    fn a_dropped_letter_is_found() {
        assert_eq!(closest("max_attemps", NAMES), Some("max_attempts"));
    }

    #[test]
    fn a_swapped_pair_is_one_edit() {
        assert_eq!(distance("base_sm", "base_ms"), 1);
        assert_eq!(closest("base_sm", NAMES), Some("base_ms"));
    }

    #[test]
    fn other_spellings_and_missing_units_are_found() {
        assert_eq!(closest("maxAttempts", NAMES), Some("max_attempts"));
        assert_eq!(closest("deadline", NAMES), Some("deadline_ms"));
        assert_eq!(closest("retries", NAMES), Some("max_attempts"));
    }

    #[test]
    fn an_unrelated_word_gets_no_suggestion() {
        assert_eq!(closest("colour", NAMES), None);
        assert_eq!(closest("", NAMES), None);
    }

    #[test]
    fn a_synonym_is_only_suggested_when_it_is_a_candidate() {
        assert_eq!(closest("retries", &["full", "none"]), None);
    }
}
