//! Loom model checks of the throttle window's lock-free counts: every
//! interleaving of two threads (within a bound on preemptions), not just the
//! ones a stress test happens to hit.
//!
//! Run: `RUSTFLAGS="--cfg stormproof_loom" cargo test -p stormproof-runtime --test loom_throttle --release`
#![cfg(stormproof_loom)]

use std::sync::Arc;
use std::time::Duration;

use stormproof_runtime::throttle::{ThrottleConfig, ThrottleWindow};

/// Ten tenths of 10 ns.
fn config() -> ThrottleConfig {
    ThrottleConfig { k: 2.0, window: Duration::from_nanos(100), max_refusal_percent: 100 }
}

fn at(nanos: u64) -> Duration {
    Duration::from_nanos(nanos)
}

#[test]
fn two_admissions_summing_the_older_tenths_at_once_leave_one_tenths_sums() {
    // Two preemptions are enough for a torn cache (one writer stopped
    // after its first sum, the other after its second); a bound of three
    // keeps the model's twenty-odd atomic steps a thread under a second.
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(|| {
        let cfg = config();
        let window = Arc::new(ThrottleWindow::default());
        // The tenth [10, 20): ten requests, all accepted. [100, 110): ten
        // requests, none accepted. At 110 the first has left the window:
        // ten requests and no accept, refused with 10 / 11.
        for _ in 0..10 {
            window.request(&cfg, at(10));
            window.accept(&cfg, at(10));
            window.request(&cfg, at(100));
        }
        // One admission whose clock read came before 110 (its window still
        // holds [10, 20)), one from 110: both sum the older tenths for the
        // first time.
        let late = Arc::clone(&window);
        let late = loom::thread::spawn(move || late.refusal_probability(&config(), at(105)));
        // The second reading here finds the sums the first kept, unless
        // the late admission is rewriting them.
        let now = [(); 2].map(|()| window.refusal_probability(&cfg, at(110)));
        late.join().unwrap();
        assert_eq!(now, [10.0 / 11.0; 2]);
        assert_eq!(window.refusal_probability(&cfg, at(110)), 10.0 / 11.0, "the sums kept for 110");
    });
}
