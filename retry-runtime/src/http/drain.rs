//! Reading what is left of a failed response's body before a retry, so that
//! the connection it came on can carry the retry.
//!
//! An HTTP/1 client (hyper's, so reqwest's too) puts a connection back in
//! its pool only once the response on it has been read to the end; a
//! response dropped with part of its body unread closes its connection. In
//! a retry storm every retry would then open a new connection (a TCP
//! handshake, and in production a TLS one, on a server already failing):
//! the churn retries should not add. .NET's `HttpClient` drains a
//! discarded response for this reason; go-retryablehttp drains before each
//! retry.
//!
//! Draining is bounded in bytes and in time: a body longer than
//! [`MAX_BYTES`], or slower than [`MAX_TIME`], is dropped as it is, and its
//! connection closes, as it would have without the drain. A body that
//! fails mid-way is dropped too. An HTTP/2 or HTTP/3 response is dropped
//! unread: its stream is reset, its connection stays. Nothing here panics
//! on what the peer sends: byte counts saturate, and the body's errors end
//! the drain.
//!
//! The drain and the pause after it ([`POOL_RETURN`]) are taken inside the
//! wait before the retry, not after it: the retry is admitted [`lead`]
//! before its wait ends, and its request goes out when the wait ends
//! ([`until_due`]), a body in hand read and the pool given its moment in
//! between. Only a body that takes longer than that delays the request
//! (within the drain's bounds), and then the pause follows it.

use std::future::poll_fn;
use std::pin::pin;
use std::time::Duration;

use bytes::Buf;
use http::Version;
use http_body::Body;
use tokio::time::Instant;

/// The most of a failed response's body read before a retry.
///
/// Error bodies are small (a JSON problem, a proxy's HTML page: a few KiB),
/// and 64 KiB usually arrives with the head or within one round trip (it is
/// the classic TCP window). Reading more would cost more than the new
/// connection it saves; a body declared longer is not read at all.
pub(crate) const MAX_BYTES: u64 = 64 * 1024;

/// The longest a failed response's body is read before a retry (a quarter
/// of the attempt timeout, when that is shorter).
///
/// The drain delays the retry, and runs inside its attempt (after it is
/// admitted, so that a retry that cannot run returns the response with its
/// body whole): it must stay well under typical backoffs and attempt
/// timeouts (an adaptive bulkhead's latency sample, though, starts only
/// once the retry's request goes out: see `middleware::call`). An error
/// body normally arrives with its head, so a drain that
/// takes this long is a peer trickling or stalling, for which a new
/// connection is the cheaper way on. 50 ms still covers a few wide-area
/// round trips, and 64 KiB at 11 Mbit/s.
pub(crate) const MAX_TIME: Duration = Duration::from_millis(50);

/// How long the retry waits after a body drained whole, for the client to
/// put its connection back in the pool.
///
/// hyper-util's client (reqwest's too) pools a connection from a task of
/// its own once the body's end is read, and a request that finds no idle
/// connection at once opens a new one rather than wait
/// (hyperium/hyper#4134; hyper 0.14's `delayed_eof`, which held the body's
/// end back until then, is gone from hyper 1). On a multi-threaded runtime
/// that task often runs after the retry has asked the pool, even after
/// several yields; a millisecond, the timer's resolution, is enough. It is
/// taken out of the retry's backoff, not added to it (see [`lead`]).
pub(crate) const POOL_RETURN: Duration = Duration::from_millis(1);

/// How long before the end of its wait a retry after a failed response is
/// admitted, at most: the pause ([`POOL_RETURN`]) and one tick of tokio's
/// timer, which ends a wait at the first millisecond tick at or after it,
/// so up to a tick late. With both, a body already in hand is read and the
/// pause taken before the wait ends, in real time as on a paused clock.
pub(crate) const LEAD: Duration = Duration::from_millis(2);

/// How long before the end of its wait a retry after a failed response is
/// admitted, for attempts under `attempt_timeout`: [`LEAD`], at most what
/// the drain may take of the attempt ([`time_before`]; the attempt,
/// admitted that early, runs under its timeout from then), in whole
/// milliseconds: a shorter lead would be lost to the timer's tick. None
/// under a timeout shorter than 4 ms: the pause then follows the wait.
pub(crate) fn lead(attempt_timeout: Option<Duration>) -> Duration {
    let room = time_before(attempt_timeout, None).min(LEAD);
    Duration::from_millis(u64::try_from(room.as_millis()).unwrap_or(u64::MAX))
}

/// How long a drain before an attempt with this timeout, in a call with
/// this `deadline`, may take now: at most [`MAX_TIME`], and at most a
/// quarter of the attempt timeout and of what is left before the deadline:
/// the attempt runs under both, and a slow body must not spend either, or
/// the retry it stands before would never be sent.
pub(crate) fn time_before(attempt_timeout: Option<Duration>, deadline: Option<Instant>) -> Duration {
    let timeout = attempt_timeout.map_or(MAX_TIME, |timeout| timeout / 4);
    let left = deadline.map_or(Duration::MAX, |deadline| deadline.saturating_duration_since(Instant::now()));
    MAX_TIME.min(timeout).min(left / 4)
}

/// How a drain ended.
///
/// `pub` but unreachable from outside the crate: named by
/// [`Transport::discard`](super::exchange::Transport::discard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Read to the end: the connection can be reused.
    Whole,
    /// Not HTTP/1: its connection outlives the response, so not read.
    NotNeeded,
    /// Longer than [`MAX_BYTES`] (declared or read): dropped.
    TooLong,
    /// Not over within the time allowed: dropped.
    TooSlow,
    /// The body failed: dropped.
    Failed,
}

/// Discards a failed response of this HTTP `version` with this `body`
/// before a retry: an HTTP/1 body is read to its end (see [`drain`]),
/// within `within`; any other is dropped unread.
pub(crate) async fn discard<B: Body>(version: Version, body: B, within: Duration) -> Drained {
    if !matches!(version, Version::HTTP_10 | Version::HTTP_11) {
        return Drained::NotNeeded;
    }
    let drained = drain(body, within).await;
    tracing::trace!(target: crate::observe::target::HTTP, ?drained, "a failed response discarded before a retry");
    drained
}

/// Waits, after a failed response was discarded (`drained`, within
/// `within`), until the retry's request may go out: when its wait ends
/// (`due`; now, when it has none), and, after a body drained whole, no
/// sooner than [`POOL_RETURN`] (at most `within`) after the drain, for its
/// connection to be pooled. The retry was admitted [`lead`] before `due`,
/// so a body in hand and the pause fit in the wait, and the request goes
/// out exactly when it ends.
pub(crate) async fn until_due(drained: Drained, within: Duration, due: Option<Instant>) {
    let now = Instant::now();
    let pause = if drained == Drained::Whole { POOL_RETURN.min(within) } else { Duration::ZERO };
    let at = due.map_or(now, |due| due.max(now)).max(now + pause);
    // No timer for no wait: one would last until the timer's next tick.
    if at > now {
        tokio::time::sleep_until(at).await;
    }
}

/// Reads `body` to its end, unless it is longer than [`MAX_BYTES`] or takes
/// longer than `within`, and drops it.
pub(crate) async fn drain<B: Body>(body: B, within: Duration) -> Drained {
    if body.is_end_stream() {
        return Drained::Whole;
    }
    // A declared length over the bound: reading it would cost more than
    // the connection is worth, so none of it is read.
    if body.size_hint().lower() > MAX_BYTES {
        return Drained::TooLong;
    }
    let mut body = pin!(body);
    let read_to_end = async {
        let mut read: u64 = 0;
        loop {
            match poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                None => return Drained::Whole,
                Some(Err(_)) => return Drained::Failed,
                Some(Ok(frame)) => {
                    // Trailers carry no data; a data frame's length is the
                    // peer's. A frame counts one byte at least: a body of
                    // endless empty frames, always ready, would otherwise be
                    // read for ever (the time bound fires only while it waits).
                    let len = frame.data_ref().map_or(0, Buf::remaining);
                    read = read.saturating_add(u64::try_from(len).unwrap_or(u64::MAX).max(1));
                    if read > MAX_BYTES {
                        return Drained::TooLong;
                    }
                }
            }
        }
    };
    tokio::time::timeout(within, read_to_end).await.unwrap_or(Drained::TooSlow)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::task::{Context, Poll};

    use bytes::Bytes;
    use http_body::{Frame, SizeHint};

    use super::*;

    /// A body of `chunks` chunks of `chunk` bytes (`None`: without end),
    /// then the end, or an error, or nothing ever (`stall`); it counts the
    /// bytes read and may declare a length.
    struct Script {
        chunk: usize,
        chunks: Option<u64>,
        then: Then,
        declared: Option<u64>,
        ended: bool,
        read: Arc<AtomicU64>,
    }

    #[derive(Clone, Copy)]
    enum Then {
        End,
        Fail,
        Stall,
    }

    impl Script {
        fn new(chunk: usize, chunks: Option<u64>, then: Then) -> (Script, Arc<AtomicU64>) {
            let read = Arc::new(AtomicU64::new(0));
            (Script { chunk, chunks, then, declared: None, ended: false, read: read.clone() }, read)
        }

        /// This body, saying it has ended (`is_end_stream`).
        fn ended(self) -> Script {
            Script { ended: true, ..self }
        }
    }

    impl Body for Script {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            match &mut self.chunks {
                Some(0) => match self.then {
                    Then::End => Poll::Ready(None),
                    Then::Fail => Poll::Ready(Some(Err(std::io::ErrorKind::ConnectionReset.into()))),
                    Then::Stall => Poll::Pending,
                },
                left => {
                    if let Some(left) = left {
                        *left -= 1;
                    }
                    self.read.fetch_add(self.chunk as u64, Ordering::SeqCst);
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![0; self.chunk])))))
                }
            }
        }

        fn is_end_stream(&self) -> bool {
            self.ended
        }

        fn size_hint(&self) -> SizeHint {
            self.declared.map_or_else(SizeHint::default, SizeHint::with_exact)
        }
    }

    const WITHIN: Duration = MAX_TIME;

    #[tokio::test(start_paused = true)]
    async fn a_short_body_is_read_to_its_end() {
        let (body, read) = Script::new(1024, Some(4), Then::End);
        assert_eq!(drain(body, WITHIN).await, Drained::Whole);
        assert_eq!(read.load(Ordering::SeqCst), 4096);
        let (empty, _) = Script::new(0, Some(0), Then::Stall);
        assert_eq!(drain(empty.ended(), WITHIN).await, Drained::Whole, "an ended body is not polled");
        // Exactly the bound is not over it.
        let (body, _) = Script::new(1024, Some(64), Then::End);
        assert_eq!(drain(body, WITHIN).await, Drained::Whole);
    }

    #[tokio::test(start_paused = true)]
    async fn an_endless_body_is_read_only_up_to_the_bound() {
        let (body, read) = Script::new(8192, None, Then::End);
        assert_eq!(drain(body, WITHIN).await, Drained::TooLong);
        assert_eq!(read.load(Ordering::SeqCst), MAX_BYTES + 8192, "the bound, and the frame that crossed it");
    }

    /// Empty data frames without end, always ready; it panics past what a
    /// bounded drain can read, rather than hang the test.
    struct EmptyFrames(u64);

    impl Body for EmptyFrames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            self.0 += 1;
            assert!(self.0 <= 10 * MAX_BYTES, "read for ever: {} empty frames", self.0);
            Poll::Ready(Some(Ok(Frame::data(Bytes::new()))))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn endless_empty_frames_are_bounded_too() {
        assert_eq!(drain(EmptyFrames(0), WITHIN).await, Drained::TooLong);
    }

    /// Data that says it holds this many bytes.
    struct Claims(usize);

    impl Buf for Claims {
        fn remaining(&self) -> usize {
            self.0
        }
        fn chunk(&self) -> &[u8] {
            &[]
        }
        fn advance(&mut self, _: usize) {}
    }

    /// A frame of one byte, then frames claiming `usize::MAX` bytes.
    struct Boasting(bool);

    impl Body for Boasting {
        type Data = Claims;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Claims>, Infallible>>> {
            let len = if std::mem::replace(&mut self.0, true) { usize::MAX } else { 1 };
            Poll::Ready(Some(Ok(Frame::data(Claims(len)))))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_claiming_any_length_is_counted_without_overflow() {
        assert_eq!(drain(Boasting(false), WITHIN).await, Drained::TooLong);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_declared_longer_than_the_bound_is_not_read() {
        let (mut body, read) = Script::new(1024, Some(65), Then::End);
        body.declared = Some(MAX_BYTES + 1);
        assert_eq!(drain(body, WITHIN).await, Drained::TooLong);
        assert_eq!(read.load(Ordering::SeqCst), 0);
        let (mut body, read) = Script::new(1024, Some(64), Then::End);
        body.declared = Some(MAX_BYTES);
        assert_eq!(drain(body, WITHIN).await, Drained::Whole);
        assert_eq!(read.load(Ordering::SeqCst), MAX_BYTES);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_given_up_on_in_time() {
        let (body, read) = Script::new(100, Some(3), Then::Stall);
        let started = tokio::time::Instant::now();
        assert_eq!(drain(body, ms(20)).await, Drained::TooSlow);
        assert_eq!(started.elapsed(), ms(20));
        assert_eq!(read.load(Ordering::SeqCst), 300);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_body_ends_the_drain() {
        let (body, _) = Script::new(100, Some(2), Then::Fail);
        assert_eq!(drain(body, WITHIN).await, Drained::Failed);
    }

    #[tokio::test(start_paused = true)]
    async fn only_an_http1_body_is_drained() {
        let started = tokio::time::Instant::now();
        for version in [Version::HTTP_10, Version::HTTP_11] {
            let (body, read) = Script::new(10, Some(2), Then::End);
            assert_eq!(discard(version, body, WITHIN).await, Drained::Whole, "{version:?}");
            assert_eq!(read.load(Ordering::SeqCst), 20);
        }
        for version in [Version::HTTP_09, Version::HTTP_2, Version::HTTP_3] {
            let (body, read) = Script::new(10, Some(2), Then::Stall);
            assert_eq!(discard(version, body, WITHIN).await, Drained::NotNeeded, "{version:?}");
            assert_eq!(read.load(Ordering::SeqCst), 0, "{version:?}");
        }
        let (body, _) = Script::new(8192, None, Then::End);
        assert_eq!(discard(Version::HTTP_11, body, WITHIN).await, Drained::TooLong);
        assert_eq!(started.elapsed(), Duration::ZERO, "no pause in the discard itself");
    }

    /// How long `until_due` waits, on the paused clock, for a drain that
    /// ended as `drained`, within `within`, before a retry due `due` from now.
    async fn waited(drained: Drained, within: Duration, due: Option<Duration>) -> Duration {
        let started = Instant::now();
        until_due(drained, within, due.map(|due| started + due)).await;
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn the_retry_goes_when_due_and_a_pause_after_a_whole_drain_only_when_the_wait_has_no_room_for_it() {
        // The retry was admitted the lead before it is due: the pause fits.
        assert_eq!(waited(Drained::Whole, WITHIN, Some(POOL_RETURN)).await, POOL_RETURN);
        assert_eq!(waited(Drained::Whole, WITHIN, Some(ms(30))).await, ms(30), "due, and no later");
        // The drain took longer than the lead: the pause follows it.
        assert_eq!(waited(Drained::Whole, WITHIN, Some(Duration::ZERO)).await, POOL_RETURN);
        assert_eq!(waited(Drained::Whole, WITHIN, None).await, POOL_RETURN);
        // No pause when the connection closes anyway, or was never read.
        for drained in [Drained::NotNeeded, Drained::TooLong, Drained::TooSlow, Drained::Failed] {
            assert_eq!(waited(drained, WITHIN, None).await, Duration::ZERO, "{drained:?}");
            assert_eq!(waited(drained, WITHIN, Some(ms(5))).await, ms(5), "{drained:?}: due");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_pause_and_the_lead_fit_in_the_time_allowed() {
        assert_eq!(waited(Drained::Whole, Duration::ZERO, None).await, Duration::ZERO);
        assert_eq!(lead(None), LEAD);
        assert_eq!(lead(Some(Duration::from_secs(1))), LEAD);
        assert_eq!(lead(Some(ms(8))), LEAD, "a quarter holds it");
        assert_eq!(lead(Some(ms(6))), ms(1), "a quarter, in whole milliseconds");
        assert_eq!(lead(Some(ms(3))), Duration::ZERO, "no room for a tick");
    }

    #[tokio::test(start_paused = true)]
    async fn the_time_bound_is_a_quarter_of_a_short_attempt_timeout() {
        assert_eq!(time_before(None, None), MAX_TIME);
        assert_eq!(time_before(Some(Duration::from_secs(10)), None), MAX_TIME);
        assert_eq!(time_before(Some(ms(40)), None), ms(10));
        assert_eq!(time_before(Some(Duration::ZERO), None), Duration::ZERO);
        let now = Instant::now();
        assert_eq!(time_before(None, Some(now + ms(40))), ms(10), "a quarter of what is left");
        assert_eq!(time_before(None, Some(now + ms(1000))), MAX_TIME);
        assert_eq!(time_before(Some(ms(20)), Some(now + ms(1000))), ms(5));
        assert_eq!(time_before(None, Some(now)), Duration::ZERO, "past the deadline: none");
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
}
