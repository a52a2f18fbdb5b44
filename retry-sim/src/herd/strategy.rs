//! How the simulated clients wait between attempts, and which of the
//! library's guards they run.

use stormproof_runtime::Jitter;

/// How clients wait between attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Retry at once, with no wait at all (a base of zero): the anti-pattern.
    Immediate,
    /// Capped exponential backoff with the given jitter, and nothing else.
    Backoff(Jitter),
    /// What a plain `#[resilient(max_attempts = .., base_ms = ..)]` does:
    /// full jitter (the library's default) and the operation's own retry
    /// budget and circuit breaker, shared by every client as one
    /// operation's are (the library's defaults, [`BudgetConfig::default`](stormproof_runtime::budget::BudgetConfig::default)
    /// and [`BreakerConfig::per_operation`](stormproof_runtime::breaker::BreakerConfig::per_operation),
    /// whatever [`HerdConfig::budget`](super::HerdConfig::budget) and [`HerdConfig::breaker`](super::HerdConfig::breaker) say),
    /// and nothing else.
    Defaults,
    /// What this library recommends: full jitter, plus one [`RetryBudget`](stormproof_runtime::budget::RetryBudget)
    /// and one circuit breaker shared by all clients (configured by
    /// [`HerdConfig::budget`](super::HerdConfig::budget) and [`HerdConfig::breaker`](super::HerdConfig::breaker)). An attempt the
    /// breaker refuses fails fast: it puts no load on the dependency and,
    /// as in the retry loop, ends that client's call; so does a failure
    /// after which the breaker would still be open when the wait ends.
    ///
    /// Expect a trade, not a free win: against an
    /// [`Overload`](super::Model::Overload)ed dependency the library's default
    /// breaker (5 failures) is opened by the first wave of a large herd, and
    /// the clients behind it fail fast instead of succeeding late. In the
    /// [`Contention`](super::Model::Contention) model failures are conflicts
    /// ([`ErrorClass::Conflict`](stormproof_runtime::ErrorClass::Conflict)), neutral to
    /// the breaker but paid for from the budget, which a large herd drains.
    Recommended,
    /// The adaptive protection: full jitter and a share-of-traffic budget
    /// as in `recommended`, but instead of a breaker, a bulkhead whose
    /// limit adapts, all shared by the clients as one policy's named
    /// guards would be (configured by [`HerdConfig::bulkhead`](super::HerdConfig::bulkhead),
    /// [`HerdConfig::budget`](super::HerdConfig::budget) and [`HerdConfig::throttle`](super::HerdConfig::throttle)).
    ///
    /// What it does, in the retry loop's order:
    ///
    /// - **An adaptive concurrency limit** (the library's AIMD core,
    ///   [`LimitCore`](stormproof_runtime::bulkhead::LimitCore)): by default at most 20 attempts in
    ///   flight, the limit moving within `[1, 20]`, one step up per limit's
    ///   worth of successes, times 0.7 on every overload answer. An attempt
    ///   that finds the limit reached waits for a permit, first come, first
    ///   served; a waiting client sends nothing, so the dependency never
    ///   sees more than the limit at once and a wait costs no attempt. Every
    ///   retryable failure is an overload signal, a conflict included (as
    ///   in the retry loop): fewer writers at once make fewer conflicts.
    /// - **Full jitter** on the backoff before a retry joins the queue.
    /// - **The share-of-traffic budget** ([`HerdConfig::budget`](super::HerdConfig::budget), the
    ///   library's default: retries at most 10% of first attempts over
    ///   10 s, plus 10 per second), as the backstop for a dependency that
    ///   fails everything: the limit bounds the load at any instant, the
    ///   budget the work over time.
    /// - **The SRE client-side throttle** only if [`HerdConfig::throttle`](super::HerdConfig::throttle)
    ///   is set, which it is not by default: it is for a dependency that
    ///   refuses most of what it is sent, and with the limit holding the
    ///   load to what the dependency answers these models never get there
    ///   (switched on, it refuses nothing of a herd at N = 100: requests
    ///   count once answered, so a cold start is not refused either).
    ///
    /// No breaker: in these models the dependency is never down, and a
    /// breaker opened by the first wave fails the clients behind it (see
    /// `recommended`); the limit slows them down instead. No hedging: a
    /// hedge pays when one attempt is slow for reasons of its own; here
    /// slowness is load (a brownout) or absent, so a hedge only adds load.
    ///
    /// Why it beats the fixed strategies on work and time at once: backoff
    /// spreads a herd over time by guessing, and pays for every wrong
    /// guess with an attempt; the limit measures. Against contention it
    /// settles at the few writers the row serves without conflicts;
    /// against an overloaded or browned-out dependency it sends about what
    /// the dependency can answer, and the rest queue instead of failing.
    /// Where a fixed backoff happens to match the dependency already (full
    /// jitter's 100 ms base over 100 clients fills the overload model's
    /// 10 per tick almost exactly), it can only tie on time.
    Adaptive,
}

impl Strategy {
    /// Every strategy, in the order the example's table prints them.
    pub const ALL: [Strategy; 8] = [
        Strategy::Immediate,
        Strategy::Backoff(Jitter::None),
        Strategy::Backoff(Jitter::Full),
        Strategy::Backoff(Jitter::Equal),
        Strategy::Backoff(Jitter::Decorrelated),
        Strategy::Defaults,
        Strategy::Recommended,
        Strategy::Adaptive,
    ];

    /// A short name: `immediate`, the jitter's name (`none`, `full`,
    /// `equal`, `decorrelated`) for plain backoff, `defaults`, `recommended`
    /// or `adaptive`.
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Immediate => "immediate",
            Strategy::Backoff(jitter) => jitter.name(),
            Strategy::Defaults => "defaults",
            Strategy::Recommended => "recommended",
            Strategy::Adaptive => "adaptive",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
