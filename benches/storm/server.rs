//! The dependency of the storm benchmark: an HTTP server on loopback of
//! fixed capacity. `WORKERS` requests are worked on at once, each for the
//! service time; the others wait in a queue with no bound (a deep queue, as
//! a thread pool's or a listen backlog's), first come first served, and
//! work a client gave up on is still done (the server cannot tell). Triggers change what it does for a
//! stretch of time: answer every request 503 after working on it, or work
//! four times as long.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::time::Instant;

use super::metrics::Buckets;

/// Requests worked on at once.
pub const WORKERS: usize = 8;
/// The time one request takes a worker, when nothing is wrong.
pub const SERVICE_TIME: Duration = Duration::from_millis(5);

/// What goes wrong, and when (from the run's start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// Nothing: the baseline.
    None,
    /// Every request worked on in the stretch is answered 503.
    Unavailable { from: Duration, lasting: Duration },
    /// Every request started in the stretch takes `factor` times as long.
    Slowdown { from: Duration, lasting: Duration, factor: u32 },
}

impl Trigger {
    /// The stretch, if any.
    pub fn stretch(self) -> Option<(Duration, Duration)> {
        match self {
            Trigger::None => None,
            Trigger::Unavailable { from, lasting } | Trigger::Slowdown { from, lasting, .. } => {
                Some((from, from + lasting))
            }
        }
    }

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::None => "none",
            Trigger::Unavailable { .. } => "503s",
            Trigger::Slowdown { .. } => "slowdown",
        }
    }

    fn covers(self, since_start: Duration) -> bool {
        self.stretch().is_some_and(|(from, to)| (from..to).contains(&since_start))
    }
}

struct Server {
    /// When each worker is next free: a request takes the one free first
    /// (so the queue is first come, first served) from when it is free.
    /// Kept as deadlines rather than as a semaphore and a sleep each, so
    /// that the capacity is exact: a sleep ends on the timer's next tick,
    /// a schedule of deadlines does not drift by it.
    free_at: Mutex<BinaryHeap<Reverse<Instant>>>,
    trigger: Trigger,
    start: Instant,
    /// Requests that arrived, per bucket.
    received: Arc<Buckets>,
    /// The most requests that were waiting for a worker at once.
    max_queued: AtomicU64,
}

/// A running server: where it listens, and what it counts.
pub struct Running {
    pub addr: SocketAddr,
    server: Arc<Server>,
}

impl Running {
    /// The longest the queue was, in requests (counted in the time a
    /// request waited, at the normal service time).
    pub fn max_queued(&self) -> u64 {
        self.server.max_queued.load(Ordering::Relaxed)
    }
}

/// Starts a fresh server on 127.0.0.1 (an ephemeral port); its clock starts
/// at `start`, the run's.
pub async fn start(trigger: Trigger, start: Instant, received: Arc<Buckets>) -> std::io::Result<Running> {
    let server = Arc::new(Server {
        free_at: Mutex::new((0..WORKERS).map(|_| Reverse(start)).collect()),
        trigger,
        start,
        received,
        max_queued: AtomicU64::new(0),
    });
    let app = Router::new().route("/", get(handle)).with_state(server.clone());
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        // The server lives as long as the run's runtime.
        let _ = axum::serve(listener, app).await;
    });
    Ok(Running { addr, server })
}

async fn handle(State(server): State<Arc<Server>>) -> StatusCode {
    let now = Instant::now();
    server.received.add(now - server.start, 1);
    // The request's worker and when it works on it: the work is booked at
    // once, so a client that gives up (its attempt timed out, the
    // connection closed) does not take it back.
    let (begins, ends) = {
        let mut free_at = server.free_at.lock().unwrap_or_else(|e| e.into_inner());
        let Some(Reverse(free)) = free_at.pop() else { return StatusCode::INTERNAL_SERVER_ERROR };
        let begins = free.max(now);
        let service = match server.trigger {
            Trigger::Slowdown { factor, .. } if server.trigger.covers(begins - server.start) => {
                SERVICE_TIME * factor
            }
            _ => SERVICE_TIME,
        };
        free_at.push(Reverse(begins + service));
        (begins, begins + service)
    };
    // Requests ahead of this one, in worker-times: how long the queue is.
    let queued = ((begins - now).as_nanos() / SERVICE_TIME.as_nanos()) as u64 * WORKERS as u64;
    server.max_queued.fetch_max(queued, Ordering::Relaxed);
    tokio::time::sleep_until(ends).await;
    match server.trigger {
        Trigger::Unavailable { .. } if server.trigger.covers(ends - server.start) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::OK,
    }
}
