//! `GET /events`: a snapshot first, then every transition and tick as the
//! router sends them.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use futures_util::Stream;
use tokio::sync::broadcast::{self, error::RecvError};

use super::{Shared, WeakShared};

/// Where one client's stream is.
enum Feed {
    /// The snapshot is still to send; then the channel (`None`: closed).
    First { snapshot: Event, events: Option<broadcast::Receiver<Event>>, router: WeakShared },
    /// Forwarding the channel.
    Live { events: broadcast::Receiver<Event>, router: WeakShared },
    /// Ended.
    Done,
}

pub(super) async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    shared.ensure_sampler();
    // Subscribed before the snapshot is taken, so nothing falls between them
    // (an event may repeat what the snapshot already shows; the page
    // applies both the same way).
    let events = shared.channel.subscribe();
    let feed = Feed::First { snapshot: shared.snapshot_event(), events, router: Arc::downgrade(&shared) };
    // The stream holds the router weakly: an open page does not keep a
    // dropped router's sampler alive, and the stream ends with the router.
    Sse::new(futures_util::stream::unfold(feed, next))
}

async fn next(feed: Feed) -> Option<(Result<Event, Infallible>, Feed)> {
    match feed {
        Feed::First { snapshot, events: Some(events), router } => {
            Some((Ok(snapshot), Feed::Live { events, router }))
        }
        // Closed: the snapshot, then the end.
        Feed::First { snapshot, events: None, .. } => Some((Ok(snapshot), Feed::Done)),
        Feed::Live { mut events, router } => match events.recv().await {
            Ok(event) => Some((Ok(event), Feed::Live { events, router })),
            // Too slow to follow: a fresh snapshot instead of what it
            // missed, and only what comes after it (the backlog is older).
            Err(RecvError::Lagged(_)) => {
                let events = events.resubscribe();
                let snapshot = router.upgrade()?.snapshot_event();
                Some((Ok(snapshot), Feed::Live { events, router }))
            }
            Err(RecvError::Closed) => None,
        },
        Feed::Done => None,
    }
}
