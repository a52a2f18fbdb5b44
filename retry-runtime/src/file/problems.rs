//! A configuration file's problems, and where each is: what every step
//! (reading, parsing, checking, applying) reports a file's faults through.
//!
//! It sits below the steps so that each can place a problem without using
//! another: a problem is collected as a byte offset of the text and
//! placed by line and column only when the file is refused, all at once,
//! in file order.

use std::fmt;
use std::ops::Range;

/// A configuration file that could not be used: every problem in it, with
/// where it is. Nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    /// The file's name (`<toml>` for a string).
    pub file: String,
    /// Each problem, in the order of the file.
    pub problems: Vec<Problem>,
}

/// One problem of a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line; 0 when the problem is the whole file's (it could not
    /// be read), which has no position.
    pub line: usize,
    /// 1-based column (in characters); 0 with `line`.
    pub column: usize,
    /// The key it is about, when there is one.
    pub field: Option<String>,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self
            .problems
            .iter()
            .map(|p| match p.line {
                0 => format!("{}: {}", self.file, p.message),
                line => format!("{}:{}:{}: {}", self.file, line, p.column, p.message),
            })
            .collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for ConfigFileError {}

/// Where in the text a key or value is.
pub(crate) type Span = Range<usize>;

/// Collects problems, each placed at a span of `text`.
pub(crate) struct Problems<'t> {
    text: &'t str,
    file: String,
    /// Each problem's byte offset, field and message: placed (line and
    /// column) only once they are sorted, in one pass over the text.
    found: Vec<(usize, Option<String>, String)>,
}

impl<'t> Problems<'t> {
    pub(crate) fn new(text: &'t str, file: &str) -> Self {
        Problems { text, file: file.to_owned(), found: Vec::new() }
    }

    /// A problem about `field` (if any) at `span`.
    /// Where `span` is, as the source of a setting: the file and the line.
    pub(crate) fn source_of(&self, span: &Span) -> crate::settings::SettingSource {
        let before = &self.text.as_bytes()[..span.start.min(self.text.len())];
        let line = 1 + before.iter().filter(|&&byte| byte == b'\n').count();
        crate::settings::SettingSource::File { file: self.file.clone(), line }
    }

    pub(crate) fn push(&mut self, span: &Span, field: Option<&str>, message: impl Into<String>) {
        self.found.push((span.start, field.map(str::to_owned), message.into()));
    }

    pub(crate) fn len(&self) -> usize {
        self.found.len()
    }

    /// `Ok(value)` when nothing was found, else every problem in file order.
    pub(crate) fn finish<T>(mut self, value: T) -> Result<T, ConfigFileError> {
        if self.found.is_empty() {
            return Ok(value);
        }
        self.found.sort_by_key(|(at, _, _)| *at);
        // Placed from the start of the text each, the problems of a file
        // with many took time quadratic in its size (40,000 unknown keys,
        // 430 KB: 20 s); in file order, each from the one before.
        let mut cursor = Cursor::new(self.text);
        let problems = self
            .found
            .into_iter()
            .map(|(at, field, message)| {
                let (line, column) = cursor.advance_to(at);
                Problem { line, column, field, message }
            })
            .collect();
        Err(ConfigFileError { file: self.file, problems })
    }
}

/// The 1-based line and column (in characters) of increasing byte offsets
/// of a text, each counted on from the one before.
pub(super) struct Cursor<'t> {
    text: &'t str,
    at: usize,
    line: usize,
    column: usize,
    /// How many bytes all the calls have read, for the test that they read
    /// the text once.
    #[cfg(test)]
    read: usize,
}

impl<'t> Cursor<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Cursor {
            text,
            at: 0,
            line: 1,
            column: 1,
            #[cfg(test)]
            read: 0,
        }
    }

    /// The line and column of byte `at` (not before the last one asked).
    pub(super) fn advance_to(&mut self, at: usize) -> (usize, usize) {
        let at = at.min(self.text.len());
        // A span from the parser always falls on a character boundary; clamp
        // to one anyway rather than panic on an odd span.
        let at = (self.at..=at).rev().find(|i| self.text.is_char_boundary(*i)).unwrap_or(self.at);
        let passed = &self.text[self.at..at];
        #[cfg(test)]
        {
            self.read += passed.len();
        }
        match passed.rfind('\n') {
            Some(last) => {
                self.line += passed.matches('\n').count();
                self.column = passed[last + 1..].chars().count() + 1;
            }
            None => self.column += passed.chars().count(),
        }
        self.at = at;
        (self.line, self.column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\n[é]\nbé = 2";
        let mut cursor = Cursor::new(text);
        assert_eq!(cursor.advance_to(0), (1, 1));
        assert_eq!(cursor.advance_to(0), (1, 1), "twice the same offset");
        assert_eq!(cursor.advance_to(6), (2, 1));
        assert_eq!(cursor.advance_to(8), (2, 2), "inside é: at its start");
        assert_eq!(cursor.advance_to(9), (2, 3), "é is one character");
        assert_eq!(cursor.advance_to(text.find("= 2").unwrap()), (3, 4));
        assert_eq!(cursor.advance_to(10_000), (3, 7), "past the end: at the end");
    }

    /// The place of `at` in `text`, counted from its start.
    fn place(text: &str, at: usize) -> (usize, usize) {
        let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
        (text[..at].matches('\n').count() + 1, text[line_start..at].chars().count() + 1)
    }

    /// Problems are placed in one pass over the text, whatever their number
    /// and the order they were found in: each counted from the start, a
    /// file of 40,000 unknown keys (430 KB) took 20 s to refuse.
    #[test]
    fn many_problems_are_placed_in_one_pass_over_the_text() {
        let many = 1_000;
        let lines: String = (0..many).map(|i| format!("k{i} = 1\n")).collect();
        let inline: String = (0..many).map(|i| format!("k{i} = 1, ")).collect();
        for text in [lines, format!("x = {{ {inline} }}")] {
            let mut problems = Problems::new(&text, "<toml>");
            let at: Vec<usize> = text.match_indices('k').map(|(at, _)| at).collect();
            for &at in at.iter().rev() {
                problems.push(&(at..at + 1), Some("k"), "unknown");
            }
            let err = problems.finish(()).unwrap_err();
            let placed: Vec<_> = err.problems.iter().map(|p| (p.line, p.column)).collect();
            assert_eq!(placed, at.iter().map(|&at| place(&text, at)).collect::<Vec<_>>(), "in file order");
            let mut cursor = Cursor::new(&text);
            for &at in &at {
                cursor.advance_to(at);
            }
            assert!(cursor.read <= text.len(), "read {} bytes of {}", cursor.read, text.len());
        }
    }
}
