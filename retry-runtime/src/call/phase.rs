//! The states an attempt moves through ([`Phase`]), what only some of
//! them hold ([`Rare`], behind a box), and the parts of a running attempt
//! its out-of-line steps work on ([`Fields`]): shared by the attempt's
//! future (`running`) and its rare steps (`admit`).

use std::future::Future;
use std::pin::Pin;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

use super::Call;
use crate::guards::{GuardPermits, Shape, ShapedPermits};
use crate::rejection::Rejection;

/// Admission's wait for a place or a turn: the attempt's permits, or the
/// rejection that ends the call.
pub(super) type Waiting<'p> =
    Pin<Box<dyn Future<Output = Result<GuardPermits, Rejection>> + Send + Sync + 'p>>;

/// Where an attempt is. `Copy`: moving between phases is a plain write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// The attempt runs, holding its permits; under its timeout or the
    /// deadline when `timer` is armed.
    Running,
    /// Not polled yet: the guards have not been asked.
    Admitting,
    /// A hedged function's attempt, not polled yet: a round, unless the
    /// call does not hedge (then made and admitted as any attempt).
    Hedged,
    /// As `Admitting`, for the first attempt of a hedging round.
    AdmittingRound,
    /// Waiting for a bulkhead place or a rate-limit turn (`Rare::Waiting`).
    Waiting,
    /// As `Waiting`, for the first attempt of a hedging round.
    WaitingRound,
    /// A hedging round runs (`Rare::Round`).
    Hedging,
    /// The attempt failed and a retry is planned: waiting out `timer`.
    BackingOff,
    /// Waiting out, in `timer`, the backoff a plain first attempt's failure
    /// left (see `Call::after_plain`), then `Admitting`.
    Delayed,
    /// As `Delayed`, then `Hedged`.
    DelayedHedged,
    /// The step is over.
    Finished,
}

impl Phase {
    /// This starting phase, after the backoff a plain first attempt left.
    #[inline]
    pub(super) fn delayed(self) -> Phase {
        if self == Phase::Hedged { Phase::DelayedHedged } else { Phase::Delayed }
    }
}

pin_project! {
    /// What only some attempts need, behind a box (pinned: a round's timer
    /// is polled where it lies).
    #[project = RareProj]
    pub(super) enum Rare<'p, R> {
        /// Admission waits for a place or a turn.
        Waiting { waiting: Waiting<'p> },
        /// A hedging round (see `Hedges::Round`).
        Round { #[pin] round: R },
    }
}

/// The parts of an attempt its rare states work on.
pub(super) struct Fields<'a, 'p, S, H, Fut: Future, M, V: Shape, R> {
    pub(super) call: &'a mut Call<'p, S, H, V>,
    pub(super) phase: &'a mut Phase,
    pub(super) permits: &'a mut Option<ShapedPermits<V>>,
    pub(super) attempt: Pin<&'a mut Option<Fut>>,
    pub(super) timer: Pin<&'a mut Option<Sleep>>,
    pub(super) rare: &'a mut Option<Pin<Box<Rare<'p, R>>>>,
    pub(super) hedges: &'a mut M,
}
