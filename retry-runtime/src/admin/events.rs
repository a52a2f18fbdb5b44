//! `GET /events`: a snapshot first, then every transition as the router
//! sends it, and the latest tick.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use futures_util::future::{Either, select};
use tokio::sync::broadcast::error::RecvError;

use super::{Shared, Subscription, WeakShared};

/// Where one client's stream is.
enum Feed {
    /// The snapshot is still to send; then the channels (`None`: closed).
    First { snapshot: Event, live: Option<Live> },
    /// Forwarding the channels.
    Live(Live),
    /// Ended.
    Done,
}

/// One client's receivers, and the router for a fresh snapshot.
struct Live {
    channels: Subscription,
    router: WeakShared,
}

pub(super) async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    shared.ensure_sampler();
    // Subscribed before the snapshot is taken, so nothing falls between them
    // (an event may repeat what the snapshot already shows; the page
    // applies both the same way).
    let live = shared.channel.subscribe().map(|channels| Live { channels, router: Arc::downgrade(&shared) });
    let feed = Feed::First { snapshot: shared.snapshot_event(), live };
    // The stream holds the router weakly: an open page does not keep a
    // dropped router's sampler alive, and the stream ends with the router.
    Sse::new(futures_util::stream::unfold(feed, next))
}

async fn next(feed: Feed) -> Option<(Result<Event, Infallible>, Feed)> {
    match feed {
        Feed::First { snapshot, live: Some(live) } => Some((Ok(snapshot), Feed::Live(live))),
        // Closed: the snapshot, then the end.
        Feed::First { snapshot, live: None } => Some((Ok(snapshot), Feed::Done)),
        Feed::Live(mut live) => {
            let event = live.next().await?;
            Some((Ok(event), Feed::Live(live)))
        }
        Feed::Done => None,
    }
}

/// What woke a client's stream.
enum Woken {
    Transition(Result<Event, RecvError>),
    /// The tick changed; `false`: its channel closed.
    Tick(bool),
}

impl Live {
    /// The next event: a waiting transition first (`select` polls it
    /// first), so that a tick never goes out ahead of a transition made
    /// before it; else the latest tick, whatever ticks came before it
    /// unread. `None`: the channels closed.
    async fn next(&mut self) -> Option<Event> {
        loop {
            let Subscription { transitions, ticks } = &mut self.channels;
            let woken = match select(pin!(transitions.recv()), pin!(ticks.changed())).await {
                Either::Left((received, _)) => Woken::Transition(received),
                Either::Right((changed, _)) => Woken::Tick(changed.is_ok()),
            };
            match woken {
                Woken::Transition(Ok(event)) => return Some(event),
                // Too slow to follow: a fresh snapshot instead of what it
                // missed, and only what comes after it (the backlog, and
                // any tick not read yet, are older).
                Woken::Transition(Err(RecvError::Lagged(_))) => {
                    self.channels.transitions = self.channels.transitions.resubscribe();
                    self.channels.ticks.mark_unchanged();
                    return Some(self.router.upgrade()?.snapshot_event());
                }
                // Closed: the tick not read yet, if any, then the end.
                Woken::Transition(Err(RecvError::Closed)) => {
                    let latest = self.channels.ticks.borrow_and_update();
                    return if latest.has_changed() { latest.clone() } else { None };
                }
                // The channel starts with no tick and is only ever sent one.
                Woken::Tick(true) => match self.channels.ticks.borrow_and_update().clone() {
                    Some(tick) => return Some(tick),
                    None => continue,
                },
                Woken::Tick(false) => return None,
            }
        }
    }
}
