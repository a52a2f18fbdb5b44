//! "Did you mean ...?" for names from a file or from code.

/// The candidate closest to `word`, if any is close enough to be a typo.
pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::damerau_levenshtein(word, candidate), candidate))
        // In characters, as the distance counts them: a length in bytes
        // would let two unrelated non-ASCII names pass for a typo.
        .filter(|(distance, candidate)| {
            *distance <= (word.chars().count().max(candidate.chars().count()) / 3).max(1)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_the_name_and_an_unrelated_word_finds_nothing() {
        let names = ["payment", "inventory", "ledger"];
        assert_eq!(closest("paymnet", names), Some("payment"));
        assert_eq!(closest("ledgre", names), Some("ledger"));
        assert_eq!(closest("weather", names), None);
        assert_eq!(closest("x", []), None);
    }

    #[test]
    fn names_are_measured_in_characters_not_bytes() {
        // Two characters apart in two: as unrelated as "ab" and "cd".
        assert_eq!(closest("支付", ["订单"]), None);
        assert_eq!(closest("zahlungsdienst", ["zählungsdienst"]), Some("zählungsdienst"));
        assert_eq!(closest("日本語", ["日本人"]), Some("日本人"), "one character of three");
    }
}
