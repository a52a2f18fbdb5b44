//! The text of an idempotency key, made once per call: what the key's
//! `Display` writes, in one `Arc<str>` that every attempt shares.
//!
//! `Arc::from(key.to_string())` allocates twice (the `String`, then the
//! `Arc`, which keeps its counts before the text and so cannot reuse the
//! `String`'s buffer), and more when `Display` writes in pieces and the
//! `String` grows (a `Uuid` writes five). The text only needs to exist once,
//! in the `Arc`. The attribute knows the key's type, so it picks the
//! cheapest way to the same text at compile time, through the same autoref
//! probe as the error conversions (the first of these the type has):
//!
//! 1. **text** (`str`, `String`, `Box<str>`, `Arc<str>`, `Rc<str>`,
//!    `Cow<str>`, and references to them): copied as it is;
//! 2. **a primitive integer**: written by `itoa` on the stack;
//! 3. **anything else that is `Display`**: written into a buffer on the
//!    stack, moved into a `String` if it outgrows it (then the key costs
//!    that `String` too).
//!
//! Each way writes exactly what `Display` writes: for text and integers,
//! `Display` is the standard library's and writes the value as it is (an
//! `itoa` digit string is `Display`'s, minus the padding no key asks for).
//! `Policy::run_with_key`, whose key type is generic, uses `to_string`
//! ([`key_of`]).

use std::fmt::{Display, Write as _};
use std::marker::PhantomData;
use std::sync::Arc;

/// The key of a call whose key type the caller does not know
/// (`Policy::run_with_key`): `to_string`, which the standard library makes
/// cheap for text and integers (cheaper than [`written_key`]'s formatting,
/// even with the second allocation: 877 and 906 instructions against 984
/// and 1006 for a `&str` and a `u64` key, `scripts/instructions.sh
/// policy_run_keyed`).
pub(crate) fn key_of(value: &(impl Display + ?Sized)) -> Arc<str> {
    Arc::from(value.to_string())
}

/// The key of a type with no shortcut: what its `Display` writes, on the
/// stack when it fits, so the `Arc` is the one allocation (`to_string`
/// would format just the same, into a `String` that grows as it goes).
/// `Display` runs once, whatever the length.
#[inline(never)]
fn written_key(value: &(impl Display + ?Sized)) -> Arc<str> {
    let mut text = StackText::default();
    if write!(text, "{value}").is_ok() {
        match &text.spilled {
            Some(spilled) => return Arc::from(spilled.as_str()),
            None => {
                if let Ok(on_stack) = text.on_stack() {
                    return Arc::from(on_stack);
                }
            }
        }
    }
    // A `Display` that failed: `to_string` reports it as it always has.
    key_of(value)
}

/// Text written on the stack, moved to a `String` when it outgrows it.
///
/// It takes every piece whole and never reports an error of its own: a
/// `Display` that ignores its writer's errors (legal, since `to_string`
/// never gives one) cannot leave a key cut short, as a fixed buffer that
/// refuses the rest (`io::Cursor`'s) would.
pub(super) struct StackText {
    /// Room for a UUID (36 bytes) or a composite key of a few ids.
    stack: [u8; 128],
    len: usize,
    spilled: Option<String>,
}

impl Default for StackText {
    fn default() -> Self {
        StackText { stack: [0; 128], len: 0, spilled: None }
    }
}

impl StackText {
    /// What was written on the stack: whole `str`s, so UTF-8 (checked all
    /// the same; never an error).
    fn on_stack(&self) -> Result<&str, std::fmt::Error> {
        std::str::from_utf8(&self.stack[..self.len]).map_err(|_| std::fmt::Error)
    }

    /// Everything written, on the stack or spilled.
    pub(super) fn text(&self) -> &str {
        match &self.spilled {
            Some(spilled) => spilled,
            None => self.on_stack().unwrap_or_default(),
        }
    }
}

impl std::fmt::Write for StackText {
    fn write_str(&mut self, piece: &str) -> std::fmt::Result {
        if let Some(spilled) = &mut self.spilled {
            spilled.push_str(piece);
        } else if let Some(room) = self.stack.get_mut(self.len..self.len + piece.len()) {
            room.copy_from_slice(piece.as_bytes());
            self.len += piece.len();
        } else {
            let mut spilled = String::with_capacity(self.len + piece.len());
            spilled.push_str(self.on_stack()?);
            spilled.push_str(piece);
            self.spilled = Some(spilled);
        }
        Ok(())
    }
}

/// The attribute's way to its key: `Some` for a type with a shortcut to its
/// `Display` text, `None` to format it on the stack.
pub type KeyWriter<T> = Option<fn(&T) -> Arc<str>>;

/// The attribute's way to the text of a breaker-per-key's key (`per =
/// tenant`) without an allocation: `Some` for a type with a shortcut (its
/// text as it is, an integer's digits written into the buffer), `None` to
/// format its `Display` on the stack.
pub type KeyTexter<T> = Option<for<'a> fn(&'a T, &'a mut itoa::Buffer) -> &'a str>;

/// A probe for the key's type, asked for its `KeyWriter` through
/// autoref: `(&&&KeyProbe::of(&key)).key_writer()` takes the first of
/// [`KeyFromText`], [`KeyFromInteger`] and [`KeyFromDisplay`] whose bound
/// the type meets. The last has none, so the probe itself never fails.
pub struct KeyProbe<T: ?Sized>(PhantomData<fn(&T)>);

impl<T: ?Sized> KeyProbe<T> {
    /// The probe for `value`'s type.
    #[inline(always)]
    pub fn of(_value: &T) -> Self {
        KeyProbe(PhantomData)
    }

    /// The key's text, made once per call (see the module's documentation):
    /// `writer`'s shortcut for `value`'s type (from the probe's
    /// `key_writer`), else `text`, the same key as a `&dyn Display`. The key
    /// becomes that at the attribute's own tokens, so a key that is not
    /// `Display` is one error there, in the compiler's words, naming no
    /// function of the library.
    #[inline(always)]
    pub fn key(value: &T, text: &dyn Display, writer: KeyWriter<T>) -> Arc<str> {
        match writer {
            Some(write) => write(value),
            None => written_key(text),
        }
    }
}

/// Types whose `Display` writes their text unchanged.
pub trait KeyText {
    /// The text `Display` writes.
    fn key_text(&self) -> &str;
}

/// The standard library's text types, each `Display`ed as its `str`.
macro_rules! key_text {
    ($($text:ty),*) => {$(
        impl KeyText for $text {
            #[inline(always)]
            fn key_text(&self) -> &str {
                self
            }
        }
    )*};
}

key_text!(str, String, Box<str>, Arc<str>, std::rc::Rc<str>, std::borrow::Cow<'_, str>);

impl<T: KeyText + ?Sized> KeyText for &T {
    #[inline(always)]
    fn key_text(&self) -> &str {
        (**self).key_text()
    }
}

impl<T: KeyText + ?Sized> KeyText for &mut T {
    #[inline(always)]
    fn key_text(&self) -> &str {
        (**self).key_text()
    }
}

/// First choice: text, copied into the `Arc` as it is.
pub trait KeyFromText<T: ?Sized> {
    /// Copies the text.
    fn key_writer(&self) -> KeyWriter<T>;
    /// The text as it is.
    fn key_texter(&self) -> KeyTexter<T>;
}

impl<T: KeyText + ?Sized> KeyFromText<T> for &&KeyProbe<T> {
    #[inline(always)]
    fn key_writer(&self) -> KeyWriter<T> {
        Some(|value| Arc::from(value.key_text()))
    }

    #[inline(always)]
    fn key_texter(&self) -> KeyTexter<T> {
        Some(|value, _| value.key_text())
    }
}

/// Second choice: a primitive integer, written by `itoa`.
pub trait KeyFromInteger<T> {
    /// Writes the digits.
    fn key_writer(&self) -> KeyWriter<T>;
    /// Writes the digits into the buffer.
    fn key_texter(&self) -> KeyTexter<T>;
}

impl<T: itoa::Integer + Copy> KeyFromInteger<T> for &KeyProbe<T> {
    #[inline(always)]
    fn key_writer(&self) -> KeyWriter<T> {
        Some(|value| Arc::from(itoa::Buffer::new().format(*value)))
    }

    #[inline(always)]
    fn key_texter(&self) -> KeyTexter<T> {
        Some(|value, buffer| buffer.format(*value))
    }
}

/// Last choice: whatever `Display` writes, formatted on the stack.
pub trait KeyFromDisplay<T: ?Sized> {
    /// `None`: no shortcut.
    fn key_writer(&self) -> KeyWriter<T>;
    /// `None`: no shortcut.
    fn key_texter(&self) -> KeyTexter<T>;
}

impl<T: ?Sized> KeyFromDisplay<T> for KeyProbe<T> {
    #[inline(always)]
    fn key_writer(&self) -> KeyWriter<T> {
        None
    }

    #[inline(always)]
    fn key_texter(&self) -> KeyTexter<T> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::fmt;
    use std::rc::Rc;

    use proptest::prelude::*;

    use super::*;

    // The probe is imported as the attribute's expansion imports it.
    #[allow(unused_imports)]
    use super::{KeyFromDisplay as _, KeyFromInteger as _, KeyFromText as _};

    /// The key the attribute makes for `value`, through the probe.
    macro_rules! key {
        ($value:expr) => {{
            let value = &$value;
            KeyProbe::key(value, value, (&&&KeyProbe::of(value)).key_writer())
        }};
    }

    /// Whether the probe found a shortcut for `value`'s type.
    macro_rules! has_shortcut {
        ($value:expr) => {
            (&&&KeyProbe::of(&$value)).key_writer().is_some()
        };
    }

    /// `Display` in pieces, as a `Uuid`'s is.
    struct Pieces(Vec<String>);

    impl fmt::Display for Pieces {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.iter().try_for_each(|piece| f.write_str(piece))
        }
    }

    #[test]
    fn text_and_integers_take_a_shortcut_and_other_types_display() {
        assert!(has_shortcut!("order-1"));
        assert!(has_shortcut!(String::from("order-1")));
        assert!(has_shortcut!(&&String::from("order-1")));
        assert!(has_shortcut!(Box::<str>::from("order-1")));
        assert!(has_shortcut!(Arc::<str>::from("order-1")));
        assert!(has_shortcut!(Rc::<str>::from("order-1")));
        assert!(has_shortcut!(Cow::Borrowed("order-1")));
        assert!(
            has_shortcut!(7u8) && has_shortcut!(-7i64) && has_shortcut!(u128::MAX) && has_shortcut!(7usize)
        );
        assert!(!has_shortcut!(Pieces(vec![])));
        assert!(!has_shortcut!('c'));
        assert!(!has_shortcut!(1.5f64));
    }

    #[test]
    fn every_way_writes_what_display_writes() {
        assert_eq!(&*key!("order-1"), "order-1");
        assert_eq!(&*key!(String::from("ünïcode-🦀")), "ünïcode-🦀");
        assert_eq!(&*key!(Cow::<str>::Owned("owned".into())), "owned");
        assert_eq!(&*key!(Box::<str>::from("boxed")), "boxed");
        assert_eq!(&*key!(Arc::<str>::from("shared")), "shared");
        assert_eq!(&*key!(Rc::<str>::from("counted")), "counted");
        assert_eq!(&*key!(&mut String::from("mutable")), "mutable");
        assert_eq!(&*key!(i128::MIN), i128::MIN.to_string());
        assert_eq!(&*key!(u128::MAX), u128::MAX.to_string());
        assert_eq!(&*key!(0u8), "0");
        assert_eq!(&*key!(1.5f64), "1.5");
        assert_eq!(&*key!('c'), "c");
        assert_eq!(&*key!(Pieces(vec!["a".into(), "-".into(), "b".into()])), "a-b");
    }

    #[test]
    fn a_display_longer_than_the_stack_buffer_is_written_whole() {
        for len in [127, 128, 129, 1000] {
            let long = Pieces(vec!["x".repeat(len - 1), "é".into()]);
            let expected = long.to_string();
            assert_eq!(&*key!(long), expected, "{len}");
        }
        // A multi-byte character across the buffer's end is not cut.
        let across = Pieces(vec!["x".repeat(127), "é".into()]);
        assert_eq!(&*key!(across), format!("{}é", "x".repeat(127)));
    }

    /// `Display` that ignores its writer's errors, as it may: `to_string`
    /// never gives one. It counts how often it is asked to write.
    struct Careless(Vec<String>, std::cell::Cell<u32>);

    impl fmt::Display for Careless {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.1.set(self.1.get() + 1);
            for piece in &self.0 {
                let _ = f.write_str(piece);
            }
            Ok(())
        }
    }

    /// Two long keys sharing their first 128 bytes stay two keys, and
    /// `Display` is asked once, whatever the length.
    #[test]
    fn a_display_that_ignores_errors_is_never_cut_short_and_runs_once() {
        for len in [10, 128, 129, 141, 1000] {
            let careless = Careless(vec!["x".repeat(len - 3), "-".into(), "ab".into()], Default::default());
            let key = key!(careless);
            assert_eq!(&*key, format!("{}-ab", "x".repeat(len - 3)), "{len}");
            assert_eq!(careless.1.get(), 1, "{len}: written once");
        }
    }

    proptest! {
        #[test]
        fn integers_are_their_display(a: i64, b: u64, c: i32, d: u16, e: i128) {
            prop_assert_eq!(&*key!(a), a.to_string());
            prop_assert_eq!(&*key!(b), b.to_string());
            prop_assert_eq!(&*key!(c), c.to_string());
            prop_assert_eq!(&*key!(d), d.to_string());
            prop_assert_eq!(&*key!(e), e.to_string());
        }

        #[test]
        fn text_and_pieces_are_their_display(text in ".{0,200}", pieces in proptest::collection::vec(".{0,40}", 0..8)) {
            prop_assert_eq!(&*key!(text.clone()), text.as_str());
            prop_assert_eq!(&*key!(text.as_str()), text.as_str());
            let joined = pieces.concat();
            prop_assert_eq!(&*key!(Pieces(pieces)), joined);
        }
    }
}
