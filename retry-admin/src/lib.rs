//! A live dashboard and manual control for every guard of a registry, as
//! an [`axum::Router`] (feature `axum`).
//!
//! During an incident people look at states and rates, not at logs: that
//! is what Hystrix's dashboard was for, and what resilience4j's actuator
//! endpoints and Polly's manual circuit control offer. [`router`] gives the
//! same for a [`Registry`]:
//!
//! | route | what |
//! |---|---|
//! | `GET /` | one self-contained HTML page (inline CSS and JS, nothing fetched from elsewhere, works offline) that follows `/events`: a card per breaker (state, forced state, calls, failures and rejections per second over the last 60 s, time left open, probes in flight), budgets, bulkheads (with their adaptive limit), throttles, rate limits, the last transitions, and the fleet the registry is in (feature `fleet`, the facade's `redis`: linked or not, flushes, and a line for the keys of the fleet's found holding another type, the last one named) |
//! | `GET /snapshot` | the same data as JSON: a [`Snapshot`] (its docs list every field) |
//! | `GET /events` | server-sent events: `snapshot` (a [`Snapshot`], first, and again whenever this client fell more than 1024 transitions behind), `transition` (a [`TransitionView`], as it happens) and `tick` (a [`Snapshot`] once a second, each breaker's `per_second` holding the second just ended; a client that cannot keep up gets the latest tick, not every one it missed) |
//! | `POST /breakers/{name}/force-open` | holds the breaker open until reset: every call fails fast |
//! | `POST /breakers/{name}/force-closed` | holds it closed until reset: every call runs, no failure counts |
//! | `POST /breakers/{name}/reset` | ends a forced state (or any state): closed, with a clean history |
//!
//! **Manual control needs a token.** A `POST` is refused with `401` unless
//! the router was built [`with_token`](Admin::with_token) and the request
//! carries `Authorization: Bearer <token>` (compared in constant time). An
//! unknown breaker is a `404` whose JSON body lists the known names; an
//! unknown action is a `404` naming the three. A successful `POST` answers
//! the breaker's [`BreakerView`]. A forced state shows on the page and in
//! `/snapshot` (`forced`) until reset.
//!
//! ```no_run
//! # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_admin as admin; }
//! # async fn serve() -> std::io::Result<()> {
//! use stormproof::{admin, registry};
//! let token = std::env::var("ADMIN_TOKEN").expect("a long random token");
//! let router = admin::router(registry()).with_token(token).expect("a printable token").into_router();
//! // Your own server (axum's `tokio` and `http1` features), on loopback or
//! // behind your own access control: the page and the snapshot need no token.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9000").await?;
//! axum::serve(listener, router).await
//! # }
//! ```
//!
//! The router can also be nested into an application's own router, at any
//! path (`Router::new().nest("/resilience", admin.into())`): the page finds
//! its data relative to where it is served. axum's `nest` routes
//! `/resilience` but not `/resilience/`, the form people type; the README
//! shows the one-line redirect that sends it to the page.
//!
//! # The sampler
//!
//! The per-second counts cost the calls nothing they did not already pay:
//! each breaker keeps monotonic totals ([`CircuitBreaker::totals`]; a
//! success is one plain increment of a per-thread slot, no locked
//! instruction). One task per router reads them once a second and keeps the
//! differences, 60 per breaker. It starts when the router is built inside a
//! tokio runtime (else with its first request), runs on that runtime, and
//! ends when the router is dropped (all its clones: when the server stops)
//! or the runtime shuts down. No request waits for it: a request reads what
//! it last wrote. The first second a breaker shows counts from when the
//! router was built, or from when the breaker was made if later.
//!
//! # Shutting down
//!
//! An event stream never ends by itself, so a server shutting down
//! gracefully would wait for every open page. [`EventStreams::close`]
//! (from [`Admin::event_streams`]) ends them; call it when shutdown starts.
//!
//! [`CircuitBreaker::totals`]: stormproof_runtime::breaker::CircuitBreaker::totals
// docs.rs marks what feature `fleet` adds.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod breaker_view;
mod clock;
mod control;
mod events;
mod fleet_view;
mod keyed_view;
mod operations_view;
mod page;
mod sampler;
mod snapshot;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, OnceLock, Weak};

use axum::Router;
use axum::response::sse::Event;
use axum::routing::{get, post};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

use stormproof_runtime::Registry;
use stormproof_runtime::breaker::TransitionHook;

pub use keyed_view::{KEYS_LISTED, KeyRefused, KeyedSetView};
pub use operations_view::SettingView;
pub use snapshot::{
    AdaptiveView, BreakerConfigView, BreakerView, BudgetConfigView, BudgetView, BulkheadView, Counts,
    FleetView, KeyedBreakersView, OperationView, RateLimitView, RefusedView, Snapshot, State,
    TRANSITIONS_KEPT, ThrottleView, TransitionView,
};

use sampler::History;

/// Transitions a slow page may fall behind by before it is sent a fresh
/// snapshot instead of the ones it missed: small events (a name, two
/// states, a time), so a page that stopped reading holds at most this many
/// of them. Ticks are not queued (see [`Senders`]).
const TRANSITIONS_QUEUED: usize = 1024;

/// The admin routes for every guard of `registry`; see the module docs.
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_admin as admin; }
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use stormproof::{Registry, admin};
/// let registry = Registry::new();
/// let read_only: axum::Router = admin::router(&registry).into_router();
/// let with_control: axum::Router = admin::router(&registry).with_token("s3cr3t-t0ken").unwrap().into();
/// # let _ = (read_only, with_control);
/// # }
/// ```
pub fn router(registry: &Registry) -> Admin {
    Admin { registry: registry.clone(), token: None, channel: Arc::new(Channel::new()) }
}

/// The admin routes being built: [`router`] makes one, [`with_token`]
/// enables manual control, [`into_router`] (or `.into()`) gives the
/// [`axum::Router`].
///
/// [`with_token`]: Admin::with_token
/// [`into_router`]: Admin::into_router
#[derive(Debug)]
#[must_use = "serve it with `.into_router()`"]
pub struct Admin {
    registry: Registry,
    token: Option<Token>,
    channel: Arc<Channel>,
}

/// Why a token was refused by [`Admin::with_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is empty: anyone could send it.
    Empty,
    /// The token holds a character a header value cannot carry after
    /// `Bearer ` (a space, a control character, or anything not ASCII).
    NotPrintable {
        /// Where in the token (a byte offset).
        at: usize,
    },
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::Empty => f.write_str("the admin token is empty; use a long random string"),
            TokenError::NotPrintable { at } => write!(
                f,
                "the admin token has a space, control or non-ASCII character at byte {at}; \
                 use printable ASCII (a random hex or base64 string)"
            ),
        }
    }
}

impl std::error::Error for TokenError {}

/// The bearer token, never printed.
#[derive(Clone)]
struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Admin {
    /// Enables `POST /breakers/{name}/...` for requests carrying
    /// `Authorization: Bearer <token>`. The token must be non-empty
    /// printable ASCII without spaces; use a long random one.
    ///
    /// ```
    /// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_admin as admin; }
    /// use stormproof::{Registry, admin::{self, TokenError}};
    /// let registry = Registry::new();
    /// assert_eq!(admin::router(&registry).with_token("").unwrap_err(), TokenError::Empty);
    /// assert!(admin::router(&registry).with_token("4f1c 9a").is_err(), "no spaces");
    /// assert!(admin::router(&registry).with_token("4f1c9a0b7e2d").is_ok());
    /// ```
    pub fn with_token(mut self, token: impl Into<String>) -> Result<Self, TokenError> {
        let token = token.into();
        if token.is_empty() {
            return Err(TokenError::Empty);
        }
        if let Some(at) = token.bytes().position(|b| !b.is_ascii_graphic()) {
            return Err(TokenError::NotPrintable { at });
        }
        self.token = Some(Token(token.into_bytes().into()));
        Ok(self)
    }

    /// A handle that ends the router's open event streams; see
    /// [`EventStreams::close`].
    pub fn event_streams(&self) -> EventStreams {
        EventStreams(self.channel.clone())
    }

    /// The routes, ready to serve or to nest. Inside a tokio runtime this
    /// starts the sampler (see the module docs).
    pub fn into_router(self) -> Router {
        self.into()
    }
}

impl<S: Clone + Send + Sync + 'static> From<Admin> for Router<S> {
    fn from(admin: Admin) -> Self {
        routes(Shared::start(admin))
    }
}

fn routes<S: Clone + Send + Sync + 'static>(shared: Arc<Shared>) -> Router<S> {
    Router::new()
        .route("/", get(page::page))
        .route("/snapshot", get(snapshot_route))
        .route("/events", get(events::events))
        .route("/breakers/{name}/{action}", post(control::control))
        .with_state(shared)
}

async fn snapshot_route(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
) -> axum::Json<Snapshot> {
    shared.ensure_sampler();
    axum::Json(shared.snapshot())
}

/// Ends the event streams of one admin router: from [`Admin::event_streams`].
///
/// ```
/// # mod stormproof { pub use stormproof_runtime::*; pub use stormproof_admin as admin; }
/// use stormproof::{Registry, admin};
/// let admin = admin::router(&Registry::new());
/// let streams = admin.event_streams();
/// let router = admin.into_router();
/// // ... serve `router` with graceful shutdown, and when shutdown starts:
/// streams.close();
/// # drop(router);
/// ```
#[derive(Debug, Clone)]
pub struct EventStreams(Arc<Channel>);

impl EventStreams {
    /// Ends every open `/events` stream once it has sent what it holds, and
    /// makes later ones end after their first snapshot. (A browser's page
    /// reconnects after a few seconds; a server shutting down no longer
    /// accepts it.) The page and the rest of the routes keep working.
    pub fn close(&self) {
        drop(self.0.lock().take());
    }
}

/// The router's event channels; `None` once closed.
#[derive(Debug)]
struct Channel {
    senders: Mutex<Option<Senders>>,
}

/// Where the events go. Each transition goes to every page, in order (the
/// page lists them). A tick is a whole snapshot, and a page wants the state
/// now, not the seconds it missed: only the latest is kept, once for every
/// page, so a page that stopped reading holds no tick, and when it reads
/// again it gets the latest one. (On one queue, a stalled page held up to
/// [`TRANSITIONS_QUEUED`] snapshots.) Both are [`Numbered`], so that a
/// page's stream sends them in the order they were sent.
#[derive(Debug)]
struct Senders {
    transitions: broadcast::Sender<Numbered>,
    ticks: watch::Sender<Option<Numbered>>,
}

/// An event and where it stands among the transitions: a transition's own
/// `seq`, and for a tick (or a snapshot) the `seq` of the last transition
/// numbered before it read the guards' states. A transition numbered at
/// most a tick's number was made before the tick read the states, and is
/// in its channel before the tick is in its own; one numbered above it may
/// not show in the tick's states. A page's stream, reading two channels,
/// orders them by it, and sends no tick numbered below a transition (or a
/// snapshot) it sent already: the page takes a tick's states as they are,
/// and would show a state older than the transition's until the next tick
/// (for good once the streams closed).
#[derive(Debug, Clone)]
struct Numbered {
    seq: u64,
    event: Event,
}

/// What one page's stream reads: the transitions, and the latest tick.
struct Subscription {
    transitions: broadcast::Receiver<Numbered>,
    ticks: watch::Receiver<Option<Numbered>>,
}

impl Channel {
    fn new() -> Self {
        let senders =
            Senders { transitions: broadcast::channel(TRANSITIONS_QUEUED).0, ticks: watch::channel(None).0 };
        Channel { senders: Mutex::new(Some(senders)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Senders>> {
        self.senders.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Transition `seq`; called with the history's lock held (see [`Numbered`]).
    fn send_transition(&self, seq: u64, event: Event) {
        if let Some(senders) = &*self.lock() {
            // No receiver (no page open) is not an error.
            let _ = senders.transitions.send(Numbered { seq, event });
        }
    }

    /// A tick that read the states after transition `seq` (0: none yet),
    /// see [`Numbered`].
    fn send_tick(&self, seq: u64, event: Event) {
        if let Some(senders) = &*self.lock() {
            // Without a receiver it is not kept: nobody is behind.
            let _ = senders.ticks.send(Some(Numbered { seq, event }));
        }
    }

    /// A new page's receivers: from now on, the tick in place seen.
    fn subscribe(&self) -> Option<Subscription> {
        self.lock().as_ref().map(|senders| Subscription {
            transitions: senders.transitions.subscribe(),
            ticks: senders.ticks.subscribe(),
        })
    }
}

/// What the routes, the sampler and the transition hook share.
struct Shared {
    registry: Registry,
    token: Option<Token>,
    channel: Arc<Channel>,
    history: Mutex<History>,
    /// The sampler task, once started.
    sampler: OnceLock<AbortHandle>,
    /// Its transition hook in the registry, removed with it.
    hook: TransitionHook,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(task) = self.sampler.get() {
            task.abort();
        }
        // A registry outlives its routers (the global one lives for good):
        // a service that builds a router per reload or per test would
        // otherwise leave one dead hook per router, each called on every
        // transition.
        self.registry.remove_transition_hook(&self.hook);
    }
}

impl Shared {
    fn start(admin: Admin) -> Arc<Self> {
        let Admin { registry, token, channel } = admin;
        let history = Mutex::new(History::new(&registry));
        let shared = Arc::new_cyclic(|weak: &WeakShared| {
            // The hook holds the router weakly, so that the router's drop
            // (which removes the hook) is not held up by it.
            let weak = weak.clone();
            let hook: TransitionHook = Arc::new(move |t| {
                if let Some(shared) = weak.upgrade() {
                    shared.on_transition(t);
                }
            });
            registry.add_transition_hook(hook.clone());
            Shared { registry, token, channel, history, sampler: OnceLock::new(), hook }
        });
        shared.ensure_sampler();
        shared
    }

    /// Starts the sampler on the current runtime, once; outside a runtime,
    /// leaves it to the first request.
    fn ensure_sampler(self: &Arc<Self>) {
        if self.sampler.get().is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        self.sampler.get_or_init(|| runtime.spawn(sampler::run(Arc::downgrade(self))).abort_handle());
    }

    fn lock_history(&self) -> std::sync::MutexGuard<'_, History> {
        self.history.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The sampler and the event stream hold the router weakly, so that
/// dropping the router ends them.
type WeakShared = Weak<Shared>;
