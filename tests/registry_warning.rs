//! A guard name used but never declared is created with the defaults, with
//! one `tracing` warning (not one per call). Its own test binary, because
//! it installs a subscriber.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use stormproof::{Policy, Registry};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

#[derive(Clone, Default)]
struct Warnings(Arc<AtomicU32>);

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target() == "stormproof::registry" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn an_undeclared_name_warns_once_and_gets_the_defaults() {
    let warnings = Warnings::default();
    let subscriber = tracing_subscriber::registry().with(warnings.clone());
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            let registry = Registry::new();
            let policy = Policy::builder().breaker("never-declared").build().unwrap();
            for _ in 0..5 {
                registry.scope(policy.run(|| async { Ok::<_, std::io::Error>(()) })).await.unwrap();
            }
            assert_eq!(registry.breaker("never-declared").unwrap().config(), Default::default());
        });
    });
    assert_eq!(warnings.0.load(Ordering::SeqCst), 1, "one warning for the name, not one per call");
}
