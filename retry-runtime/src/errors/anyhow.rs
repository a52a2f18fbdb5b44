//! `anyhow::Error` works as it is (feature `anyhow`): `From<Rejection>` is
//! anyhow's own, and classification walks its `chain()`.

use crate::classify::{Classify, ErrorClass};

/// Classified by the first error of its chain that knows its class (a
/// [`Rejection`](crate::Rejection), `io::Error`, `reqwest::Error`,
/// `tonic::Status`); transient when none does. See the module docs of
/// [`Error`](crate::Error)'s home for the rule.
///
/// ```
/// # use stormproof_runtime as stormproof;
/// use stormproof::{Classify, ErrorClass, Rejection};
/// let err = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound)).context("loading the profile");
/// assert_eq!(err.classify(), ErrorClass::Permanent);
/// assert_eq!(anyhow::anyhow!("something odd").classify(), ErrorClass::Transient);
/// let open = anyhow::Error::from(Rejection::CircuitOpen { breaker: "db".into() });
/// assert_eq!(open.downcast_ref::<Rejection>(), Some(&Rejection::CircuitOpen { breaker: "db".into() }));
/// // A resilient call's `Error<E>`, passed up with `?`, keeps its class.
/// let not_found = stormproof::Error::Inner(std::io::Error::from(std::io::ErrorKind::NotFound));
/// assert_eq!(anyhow::Error::from(not_found).context("loading").classify(), ErrorClass::Permanent);
/// let open = stormproof::Error::<std::io::Error>::Rejected(Rejection::CircuitOpen { breaker: "db".into() });
/// assert_eq!(anyhow::Error::from(open).classify(), ErrorClass::Permanent);
/// ```
impl Classify for anyhow::Error {
    /// A [`Stopped`](crate::stop::Stopped) context layer on top: `downcast_ref`
    /// finds it, and the last error under it, as before.
    fn mark_stopped(self, stopped: crate::stop::Stopped) -> Self {
        self.context(stopped)
    }
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.as_ref())
    }

    fn classify(&self) -> ErrorClass {
        // `anyhow!(boxed)` and `Error::from_boxed` keep a boxed error in a
        // wrapper of anyhow's own, whose `source()` is the boxed error's
        // source: the boxed error itself is not in `chain()`. Above it
        // there can only be context layers, which never decide, so the
        // box's own chain is the walk.
        if let Some(boxed) = self.downcast_ref::<Box<dyn std::error::Error + Send + Sync>>() {
            return super::classify_chain(&**boxed);
        }
        self.chain().find_map(super::known_class).unwrap_or(ErrorClass::Transient)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Error as IoError, ErrorKind};

    use super::*;
    use crate::rejection::Rejection;

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// `anyhow!(boxed)` and `Error::from_boxed` keep the box behind a
    /// wrapper of anyhow's own whose `source()` is the boxed error's
    /// source: the boxed error itself is not in `chain()`, and must still
    /// decide.
    #[test]
    fn a_boxed_error_made_into_an_anyhow_error_keeps_its_class() {
        let not_found: BoxError = Box::new(IoError::from(ErrorKind::NotFound));
        assert_eq!(anyhow::anyhow!(not_found).classify(), ErrorClass::Permanent, "anyhow!(boxed)");
        let open: BoxError = Box::new(Rejection::CircuitOpen { breaker: "db".into() });
        assert_eq!(anyhow::Error::from_boxed(open).classify(), ErrorClass::Permanent, "from_boxed");
        let open: BoxError = Box::new(Rejection::CircuitOpen { breaker: "db".into() });
        let context = anyhow::Error::from_boxed(open).context("loading");
        assert_eq!(context.classify(), ErrorClass::Permanent, "under a context too");
        let unknown: BoxError = "who knows".into();
        assert_eq!(anyhow::anyhow!(unknown).classify(), ErrorClass::Transient);
    }

    /// The other way, the README's one limit: a box made from an anyhow
    /// error holds anyhow's private wrapper, whose `source()` skips the
    /// error at its top; a context layer keeps that error reachable.
    #[test]
    fn a_box_made_from_an_anyhow_error_reaches_it_under_a_context() {
        let not_found = || anyhow::Error::from(IoError::from(ErrorKind::NotFound));
        let bare: BoxError = not_found().into();
        assert_eq!(bare.classify(), ErrorClass::Transient, "the limit: the io::Error is out of reach");
        let with_context: BoxError = not_found().context("loading").into();
        assert_eq!(with_context.classify(), ErrorClass::Permanent, "reached under a context");
    }
}
