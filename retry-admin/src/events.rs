//! `GET /events`: a snapshot first, then every transition as the router
//! sends it, and the latest tick, in the order they were made.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use futures_util::future::{Either, select};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::{Numbered, Shared, Subscription, WeakShared};

#[cfg(test)]
mod tests;

/// Where one client's stream is.
enum Feed {
    /// The snapshot is still to send; then the channels (`None`: closed).
    First { snapshot: Event, live: Option<Live> },
    /// Forwarding the channels.
    Live(Live),
    /// Ended.
    Done,
}

/// One client's receivers, what it read from them and has not sent yet,
/// and the router for a fresh snapshot.
struct Live {
    channels: Subscription,
    router: WeakShared,
    /// The next transition, held while a tick sent before it goes first.
    transition: Option<Numbered>,
    /// The latest tick, held while transitions sent before it go first.
    tick: Option<Numbered>,
    /// The transitions' channel closed (the streams were closed).
    closed: bool,
    /// The number of the last transition or snapshot sent: a tick numbered
    /// below it is older, and not sent (see [`Numbered`]).
    sent: u64,
}

pub(super) async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    shared.ensure_sampler();
    // Subscribed before the snapshot is taken, so nothing falls between them
    // (an event may repeat what the snapshot already shows; the page
    // applies both the same way).
    let router = Arc::downgrade(&shared);
    let channels = shared.channel.subscribe();
    let snapshot = shared.snapshot_event();
    let live = channels.map(|channels| Live {
        channels,
        router,
        transition: None,
        tick: None,
        closed: false,
        sent: snapshot.seq,
    });
    let feed = Feed::First { snapshot: snapshot.event, live };
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
    Transition(Result<Numbered, RecvError>),
    /// A tick was sent; `false`: its channel closed.
    Tick(bool),
}

impl Live {
    /// The next event, in the order of their numbers (see [`Numbered`]): a
    /// transition made before the tick read the states first, then the
    /// tick, the latest one whatever ticks came before it unread (none
    /// older than a transition sent already), then the transitions made
    /// after it. `None`: the channels closed, and what they held was sent.
    async fn next(&mut self) -> Option<Event> {
        loop {
            // The tick first: the transitions sent before it are in their
            // channel by then, and the one read below is the first of them.
            if let Some(tick) = self.latest_tick() {
                self.tick = Some(tick);
            }
            if self.transition.is_none() {
                match self.channels.transitions.try_recv() {
                    Ok(transition) => self.transition = Some(transition),
                    Err(TryRecvError::Lagged(_)) => return self.lagged(),
                    Err(TryRecvError::Closed) => self.closed = true,
                    Err(TryRecvError::Empty) => {}
                }
            }
            let tick_first = match (&self.tick, &self.transition) {
                (Some(tick), Some(transition)) => tick.seq < transition.seq,
                (tick, _) => tick.is_some(),
            };
            let next = if tick_first { self.tick.take() } else { self.transition.take() };
            match next {
                // Its states were read before a transition this page has.
                Some(tick) if tick_first && tick.seq < self.sent => continue,
                Some(next) => {
                    self.sent = self.sent.max(next.seq);
                    return Some(next.event);
                }
                None => {}
            }
            if self.closed {
                return None;
            }
            // Nothing waiting: until either channel has something. (The
            // tick channel closes with the transitions' and is dropped
            // after it: their end is what is waited for then.)
            let Subscription { transitions, ticks } = &mut self.channels;
            let woken = match select(pin!(transitions.recv()), pin!(ticks.changed())).await {
                Either::Left((received, _)) => Woken::Transition(received),
                Either::Right((changed, _)) => Woken::Tick(changed.is_ok()),
            };
            match woken {
                Woken::Transition(Ok(transition)) => self.transition = Some(transition),
                Woken::Transition(Err(RecvError::Lagged(_))) => return self.lagged(),
                Woken::Transition(Err(RecvError::Closed)) | Woken::Tick(false) => self.closed = true,
                // `changed` marked it read: taken here, sent from the top
                // after the transitions sent before it.
                Woken::Tick(true) => {
                    self.tick = self.channels.ticks.borrow_and_update().clone().or(self.tick.take())
                }
            }
        }
    }

    /// The latest tick, if this client has not read it (never the first
    /// value, none, which no tick follows but its channel starts with).
    fn latest_tick(&mut self) -> Option<Numbered> {
        let latest = self.channels.ticks.borrow_and_update();
        if latest.has_changed() { latest.clone() } else { None }
    }

    /// Too slow to follow: a fresh snapshot instead of what it missed, and
    /// only what comes after it (the backlog, and any tick not sent yet,
    /// are older).
    fn lagged(&mut self) -> Option<Event> {
        self.channels.transitions = self.channels.transitions.resubscribe();
        self.channels.ticks.mark_unchanged();
        (self.transition, self.tick) = (None, None);
        let snapshot = self.router.upgrade()?.snapshot_event();
        self.sent = snapshot.seq;
        Some(snapshot.event)
    }
}
