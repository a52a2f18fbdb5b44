//! The library's logs are under its name: `RUST_LOG=stormproof=debug` shows
//! a call's retries and its breaker's transitions, and every event and span
//! the library makes has a target under `stormproof::` (one per concern:
//! `stormproof::call`, `stormproof::breaker`, ...), whichever module makes it.
//!
//! Its own binary: tracing caches each callsite's interest globally.

use std::sync::{Arc, Mutex};

use stormproof::{Registry, breaker::BreakerConfig, resilient};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// What a layer saw: (target, module path, message or span name) per event and span.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, String, String)>>>);

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Seen {
    fn push(&self, metadata: &Metadata<'_>, what: String) {
        let module = metadata.module_path().unwrap_or_default().to_owned();
        self.0.lock().unwrap().push((metadata.target().to_owned(), module, what));
    }

    fn all(&self) -> Vec<(String, String, String)> {
        self.0.lock().unwrap().clone()
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Seen {
    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.push(attrs.metadata(), attrs.metadata().name().to_owned());
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        self.push(event.metadata(), message.0);
    }
}

#[derive(Debug)]
struct Down;

impl stormproof::Classify for Down {
    fn classify(&self) -> stormproof::ErrorClass {
        stormproof::ErrorClass::Transient
    }
}

impl From<stormproof::Rejection> for Down {
    fn from(_: stormproof::Rejection) -> Self {
        Down
    }
}

#[resilient(max_attempts = 3, base_ms = 10, jitter = "none", breaker = "logged")]
async fn always_down() -> Result<(), Down> {
    Err(Down)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn rust_log_stormproof_debug_shows_the_retries_and_the_breaker_opening_under_stormproof_targets() {
    let filtered = Seen::default();
    let everything = Seen::default();
    let subscriber = tracing_subscriber::registry()
        .with(filtered.clone().with_filter(EnvFilter::new("stormproof=debug")))
        .with(everything.clone().with_filter(tracing::level_filters::LevelFilter::TRACE));
    let _installed = tracing::subscriber::set_default(subscriber);
    tracing::callsite::rebuild_interest_cache();

    let registry = Registry::new();
    registry.declare_breaker("logged", BreakerConfig { failure_threshold: 3, ..Default::default() }).unwrap();
    registry.scope(always_down()).await.unwrap_err();

    let seen = filtered.all();
    let with =
        |target: &str, message: &str| seen.iter().filter(|(t, _, m)| t == target && m == message).count();
    assert_eq!(with("stormproof::call", "retrying"), 2, "two retries of three attempts: {seen:#?}");
    assert_eq!(with("stormproof::breaker", "circuit breaker opened"), 1, "{seen:#?}");
    assert_eq!(with("stormproof::call", "stormproof.call"), 1, "the call's span: {seen:#?}");

    let library: Vec<_> =
        everything.all().into_iter().filter(|(_, module, _)| module.starts_with("stormproof")).collect();
    assert!(!library.is_empty());
    for (target, module, what) in library {
        assert!(target.starts_with("stormproof::"), "{what:?} from {module} has the target {target}");
    }
}
