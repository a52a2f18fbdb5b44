//! How many attempts a call made, as the tower layer and the reqwest
//! middleware report it in a response's extensions.

/// The number of attempts a call made, the first included; the tower layer
/// and the reqwest middleware put it in the extensions of every response
/// they return (a success, or the last failed response).
///
/// OpenTelemetry's `http.request.resend_count` is [`resends`](Self::resends).
///
/// Read it with `response.extensions().get::<Attempts>()`; the modules
/// `tower` and `reqwest_middleware` (features of the same names) show it
/// in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Attempts(u32);

impl Attempts {
    #[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
    pub(crate) fn new(attempts: u32) -> Self {
        Attempts(attempts)
    }

    /// Attempts made, the first included (at least 1 on a response).
    pub fn get(self) -> u32 {
        self.0
    }

    /// Attempts after the first: OpenTelemetry's `http.request.resend_count`.
    pub fn resends(self) -> u32 {
        self.0.saturating_sub(1)
    }
}

impl std::fmt::Display for Attempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
