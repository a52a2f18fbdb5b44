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
/// ```
impl Classify for anyhow::Error {
    fn classify(&self) -> ErrorClass {
        self.chain().find_map(super::known_class).unwrap_or(ErrorClass::Transient)
    }
}
