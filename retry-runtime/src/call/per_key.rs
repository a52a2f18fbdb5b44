//! A call with a breaker per key (`per = tenant`): its guards are the
//! policy's, with its key's breaker, found once as the call is made and
//! borrowed by the call from its caller's frame, so that the call runs on
//! the plain path as any other does, and pays for its key one lock and one
//! hash lookup (see `KeyedBreakers::get`). The policy's other guards are
//! borrowed, not copied (see `guards::KeyedSet`).

use std::fmt::{Display, Write};

use super::Call;
use super::key::{KeyTexter, StackText};
use crate::guards::{Guards, KeyedSet};
use crate::policy::Policy;

/// The guards of one call of a policy with a breaker per key: its key's
/// breaker and the policy's other guards. Made by the attribute's
/// expansion (`per = tenant`) and by [`Policy::per`].
#[derive(Debug)]
pub struct KeyedGuards<'p> {
    set: KeyedSet<'p>,
}

impl<'p> KeyedGuards<'p> {
    /// The guards of a call of `policy` made now with the key `value`, in
    /// the registry in effect; `None` for a policy without a breaker per
    /// key. The key's text is `texter`'s shortcut for its type (from the
    /// probe, `KeyProbe`), else `text`, the same key as a `&dyn Display`,
    /// formatted on the stack. (The attribute makes the key a `&dyn
    /// Display` at its own tokens, so a key that is not `Display` is one
    /// error there, in the compiler's words, naming no function of the
    /// library.)
    #[inline(always)]
    pub fn of<T: ?Sized>(
        policy: &'p Policy,
        value: &T,
        text: &dyn Display,
        texter: KeyTexter<T>,
    ) -> Option<KeyedGuards<'p>> {
        if !policy.per_key() {
            return None;
        }
        match texter {
            Some(texter) => Self::made(policy, texter(value, &mut itoa::Buffer::new())),
            None => Self::displayed(policy, text),
        }
    }

    /// [`of`](Self::of) for a key known only as `Display` (`Policy::per`'s).
    #[inline]
    pub(crate) fn of_display(policy: &'p Policy, key: &dyn Display) -> Option<KeyedGuards<'p>> {
        Self::of::<()>(policy, &(), key, None)
    }

    #[inline(never)]
    fn displayed(policy: &'p Policy, key: &dyn Display) -> Option<KeyedGuards<'p>> {
        let mut text = StackText::default();
        // A `Display` that fails leaves what it wrote: still a key.
        let _ = write!(text, "{key}");
        Self::made(policy, text.text())
    }

    #[inline(never)]
    fn made(policy: &'p Policy, key: &str) -> Option<KeyedGuards<'p>> {
        // `Some` made here, in the caller's slot, not moved into it.
        Some(KeyedGuards { set: policy.per_key_guards(key) })
    }
}

/// The attribute's way to a breaker per key (`per = tenant`), under the
/// one name its expansion calls (`Call::keyed_guards(..)`,
/// `Call::per_key(..)`): no type of the call's is involved.
impl Call<'static, (), ()> {
    /// [`KeyedGuards::of`].
    #[inline(always)]
    pub fn keyed_guards<'p, T: ?Sized>(
        policy: &'p Policy,
        value: &T,
        text: &dyn Display,
        texter: KeyTexter<T>,
    ) -> Option<KeyedGuards<'p>> {
        KeyedGuards::of(policy, value, text, texter)
    }

    /// What a call of `policy` with the guards `keyed` found (if any) runs:
    /// declared after `keyed`, which it borrows, and dropped before it.
    #[inline(always)]
    pub fn per_key<'p>(policy: &'p Policy, keyed: &'p Option<KeyedGuards<'p>>) -> Target<'p> {
        Target::per_key(policy, keyed)
    }
}

/// What a call runs: its policy, and the guards its key found (a call with
/// a breaker per key), which the call uses instead of the policy's. A
/// `&Policy` is one with none, known when the call is compiled, so that a
/// call without a breaker per key pays nothing for the question.
pub trait CallTarget<'p>: Copy {
    /// The policy.
    fn policy(self) -> &'p Policy;
    /// The guards its key found, if any.
    #[doc(hidden)]
    fn keyed(self) -> Option<&'p KeyedGuards<'p>>;
}

impl<'a: 'p, 'p> CallTarget<'p> for &'a Policy {
    #[inline(always)]
    fn policy(self) -> &'p Policy {
        self
    }

    #[inline(always)]
    fn keyed(self) -> Option<&'p KeyedGuards<'p>> {
        None
    }
}

/// A call of a policy with the guards its key found, if it has a breaker
/// per key (see `CallTarget`).
#[derive(Debug, Clone, Copy)]
pub struct Target<'p> {
    policy: &'p Policy,
    keyed: Option<&'p KeyedGuards<'p>>,
}

impl<'p> Target<'p> {
    /// A call of `policy` with the guards its key found (none: the policy's own).
    #[inline(always)]
    pub fn per_key(policy: &'p Policy, keyed: &'p Option<KeyedGuards<'p>>) -> Self {
        Target { policy, keyed: keyed.as_ref() }
    }
}

impl<'p> CallTarget<'p> for Target<'p> {
    #[inline(always)]
    fn policy(self) -> &'p Policy {
        self.policy
    }

    #[inline(always)]
    fn keyed(self) -> Option<&'p KeyedGuards<'p>> {
        self.keyed
    }
}

/// The guards `target`'s key found, if any, as one set (made at the first
/// call of this).
#[inline(always)]
pub(super) fn preset<'p>(target: impl CallTarget<'p>) -> Option<&'p Guards> {
    target.keyed().map(|keyed| keyed.set.whole())
}

/// The guards `target`'s key found, if any, slot by slot.
#[inline(always)]
pub(super) fn keyed_set<'p>(target: impl CallTarget<'p>) -> Option<&'p KeyedSet<'p>> {
    target.keyed().map(|keyed| &keyed.set)
}
