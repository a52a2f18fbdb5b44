//! Each call's DEBUG span, `stormproof.call` with the operation's name: opened
//! when a subscriber enables DEBUG for the runtime, entered while an attempt
//! runs (so what the body logs is inside it), and not built at all otherwise.
//!
//! One test at a time (its own binary, and a lock): tracing caches each
//! callsite's interest globally, and the span is one callsite for every call.

use std::sync::{Arc, Mutex};

use stormproof::{Classify, ErrorClass, Rejection, resilient};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug)]
struct ApiError;

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        ErrorClass::Permanent
    }
}

impl From<Rejection> for ApiError {
    fn from(_: Rejection) -> Self {
        ApiError
    }
}

#[resilient]
async fn traced(x: u64) -> Result<u64, ApiError> {
    tracing::info!("inside the attempt");
    Ok(x)
}

/// What a layer saw: spans opened (name, `operation` field) and, for each
/// event, the name of the span it was in.
#[derive(Clone, Default)]
struct Seen {
    spans: Arc<Mutex<Vec<(String, String)>>>,
    events_in: Arc<Mutex<Vec<Option<String>>>>,
}

struct Operation(String);

impl Visit for Operation {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "operation" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Seen {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        let mut operation = Operation(String::new());
        attrs.record(&mut operation);
        self.spans.lock().unwrap().push((attrs.metadata().name().to_owned(), operation.0));
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let span = ctx.event_span(event).map(|span| span.name().to_owned());
        self.events_in.lock().unwrap().push(span);
    }
}

/// Two calls of `traced` under a layer filtered at `level`: what it saw.
async fn two_calls_at(level: tracing::level_filters::LevelFilter) -> Seen {
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ONE_AT_A_TIME.lock().await;
    let seen = Seen::default();
    let subscriber = tracing_subscriber::registry().with(seen.clone().with_filter(level));
    let _installed = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();
    assert_eq!(traced(1).await.unwrap(), 1);
    assert_eq!(traced(2).await.unwrap(), 2);
    seen
}

#[tokio::test(flavor = "current_thread")]
async fn each_call_opens_a_debug_span_named_stormproof_call_with_its_operation() {
    let seen = two_calls_at(tracing::level_filters::LevelFilter::DEBUG).await;
    let operation = concat!(module_path!(), "::traced").to_owned();
    let call = ("stormproof.call".to_owned(), operation);
    assert_eq!(*seen.spans.lock().unwrap(), [call.clone(), call]);
}

#[tokio::test(flavor = "current_thread")]
async fn what_the_attempt_logs_is_inside_its_calls_span() {
    let seen = two_calls_at(tracing::level_filters::LevelFilter::DEBUG).await;
    let inside = Some("stormproof.call".to_owned());
    assert_eq!(*seen.events_in.lock().unwrap(), [inside.clone(), inside]);
}

#[tokio::test(flavor = "current_thread")]
async fn below_debug_a_call_opens_no_span() {
    let seen = two_calls_at(tracing::level_filters::LevelFilter::INFO).await;
    assert_eq!(*seen.spans.lock().unwrap(), []);
    assert_eq!(*seen.events_in.lock().unwrap(), [None, None], "the events themselves are INFO: recorded");
}
