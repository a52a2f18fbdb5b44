//! The order a page's stream sends ticks and transitions in: the order of
//! their numbers (see `Numbered`), and no tick older than what it sent.

use std::time::Duration;

use super::super::tests::{calls, named_events, registry_with};
use super::super::{Shared, router};

/// Everything a stream has ready now (the sampler's next tick is far off).
async fn waiting(body: &mut axum::body::BodyDataStream) -> Vec<(String, String)> {
    use futures_util::StreamExt;
    let mut text = String::new();
    while let Ok(Some(chunk)) = tokio::time::timeout(Duration::from_millis(10), body.next()).await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    named_events(&text)
}

/// A tick sent before a transition reaches the page before it, as on one
/// queue: the page takes a tick's states as they are, so a tick that came
/// after the transition would show the state the transition left (here
/// closed, the breaker being open) until the next tick, and for good when
/// the streams close. Read late or at once, and when the streams close.
#[tokio::test(start_paused = true)]
async fn a_tick_sent_before_a_transition_is_not_sent_after_it() {
    use axum::response::IntoResponse;

    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let stream = super::events(axum::extract::State(shared.clone())).await;
    let mut body = stream.into_response().into_body().into_data_stream();
    assert_eq!(waiting(&mut body).await[0].0, "snapshot");
    // A tick sent while the page waits reaches it at once.
    let sampled = async {
        tokio::task::yield_now().await;
        shared.sample();
    };
    let (chunk, ()) = tokio::join!(futures_util::StreamExt::next(&mut body), sampled);
    let chunk = chunk.unwrap().unwrap();
    assert_eq!(named_events(std::str::from_utf8(&chunk).unwrap())[0].0, "tick");
    for closing in [false, true] {
        shared.sample();
        calls(&registry, "db", 0, 3);
        if closing {
            drop(shared.channel.lock().take());
        }
        let events = waiting(&mut body).await;
        let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["tick", "transition"], "closing: {closing}");
        assert!(events[0].1.contains(r#""state":"closed""#), "{}", events[0].1);
        assert!(events[1].1.contains(r#""from":"closed","to":"open""#), "{}", events[1].1);
        registry.breaker("db").unwrap().reset();
        if !closing {
            assert_eq!(waiting(&mut body).await[0].0, "transition", "the reset");
        }
    }
}

/// A tick shows the states it read, and a transition can be made between
/// that read and the tick's sending: the tick is then older than the
/// transition, and must not reach the page after it (the page would show
/// the state the transition left, here closed with the breaker open, until
/// the next tick). Before it: the page has not read the transition yet.
#[tokio::test(start_paused = true)]
async fn a_tick_whose_states_were_read_before_a_transition_is_not_sent_after_it() {
    use axum::response::IntoResponse;

    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let stream = super::events(axum::extract::State(shared.clone())).await;
    let mut body = stream.into_response().into_body().into_data_stream();
    assert_eq!(waiting(&mut body).await[0].0, "snapshot");
    shared.sample_with(|| calls(&registry, "db", 0, 3));
    let events = waiting(&mut body).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["tick", "transition"]);
    assert!(events[0].1.contains(r#""state":"closed""#), "{}", events[0].1);
    assert!(events[1].1.contains(r#""from":"closed","to":"open""#), "{}", events[1].1);
}

/// The same when the page read the transition before the tick was sent:
/// the tick, older, is not sent at all (the next one is a second away).
#[tokio::test(start_paused = true)]
async fn a_tick_older_than_a_transition_the_page_has_is_not_sent() {
    use axum::response::IntoResponse;
    use futures_util::FutureExt;

    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let stream = super::events(axum::extract::State(shared.clone())).await;
    let mut body = stream.into_response().into_body().into_data_stream();
    assert_eq!(waiting(&mut body).await[0].0, "snapshot");
    shared.sample_with(|| {
        calls(&registry, "db", 0, 3);
        let chunk = futures_util::StreamExt::next(&mut body).now_or_never().flatten().unwrap().unwrap();
        assert_eq!(named_events(std::str::from_utf8(&chunk).unwrap())[0].0, "transition");
    });
    assert_eq!(waiting(&mut body).await, Vec::<(String, String)>::new(), "the tick shows it closed");
    shared.sample();
    let events = waiting(&mut body).await;
    assert_eq!(events[0].0, "tick");
    assert!(events[0].1.contains(r#""state":"open""#), "{}", events[0].1);
}

/// A page that opens while a tick is being made gets a snapshot newer than
/// that tick (it lists a transition made since the tick read its states):
/// the tick is not sent after it.
#[tokio::test(start_paused = true)]
async fn a_tick_older_than_the_first_snapshot_is_not_sent() {
    use axum::response::IntoResponse;
    use futures_util::FutureExt;

    let registry = registry_with("db");
    let shared = Shared::start(router(&registry));
    let mut stream = None;
    shared.sample_with(|| {
        calls(&registry, "db", 0, 3);
        let events = super::events(axum::extract::State(shared.clone())).now_or_never().unwrap();
        stream = Some(events.into_response().into_body().into_data_stream());
    });
    let mut body = stream.unwrap();
    let events = waiting(&mut body).await;
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["snapshot"], "{events:?}");
    assert!(events[0].1.contains(r#""state":"open""#), "{}", events[0].1);
}
