//! `anyhow::Error` works as it is (feature `anyhow`): `From<Rejection>` is
//! anyhow's own, and classification walks its `chain()`.

use crate::classify::{Classify, ErrorClass};

/// Classified by the first error of its chain that knows its class (a
/// [`Rejection`](crate::Rejection), `io::Error`, `reqwest::Error`,
/// `tonic::Status`); transient when none does. See the module docs of
/// [`Error`](crate::Error)'s home for the rule.
///
/// ```
/// # use retry_runtime as resilient;
/// use resilient::{Classify, ErrorClass, Rejection};
/// let err = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound)).context("loading the profile");
/// assert_eq!(err.classify(), ErrorClass::Permanent);
/// assert_eq!(anyhow::anyhow!("something odd").classify(), ErrorClass::Transient);
/// let open = anyhow::Error::from(Rejection::CircuitOpen { breaker: "db".into() });
/// assert_eq!(open.downcast_ref::<Rejection>(), Some(&Rejection::CircuitOpen { breaker: "db".into() }));
/// // A resilient call's `Error<E>`, passed up with `?`, keeps its class.
/// let not_found = resilient::Error::Inner(std::io::Error::from(std::io::ErrorKind::NotFound));
/// assert_eq!(anyhow::Error::from(not_found).context("loading").classify(), ErrorClass::Permanent);
/// let open = resilient::Error::<std::io::Error>::Rejected(Rejection::CircuitOpen { breaker: "db".into() });
/// assert_eq!(anyhow::Error::from(open).classify(), ErrorClass::Permanent);
/// ```
impl Classify for anyhow::Error {
    fn classify(&self) -> ErrorClass {
        self.chain().find_map(super::known_class).unwrap_or(ErrorClass::Transient)
    }
}
