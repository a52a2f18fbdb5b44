//! "Did you mean ...?" for names from a file or from code.

/// The candidate closest to `word`, if any is close enough to be a typo.
pub(crate) fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::damerau_levenshtein(word, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= (word.len().max(candidate.len()) / 3).max(1))
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
}
