//! What a run means: load and goodput before, during and after the
//! trigger, amplification, and the time to recover; as a table row and as
//! a line of the chart.

use std::time::Duration;

use super::metrics::{BUCKET, index, sum};
use super::run::RunCounts;

/// The first second is the warm-up (connections opening): "before" starts after it.
pub const WARM_UP: Duration = Duration::from_secs(1);
/// Goodput counts as back when one second of it is within this share of before's.
pub const RECOVERED: f64 = 0.95;

/// One run's figures.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Attempts received per call offered, during the trigger and after it.
    pub amplification_during: f64,
    pub amplification_after: f64,
    /// Successful calls per second before, during and after the trigger.
    pub goodput_before: f64,
    pub goodput_during: f64,
    pub goodput_after: f64,
    /// From the trigger's end until a second's goodput is back within 95 %
    /// of before's; `None`: not within the run.
    pub recovered_after: Option<Duration>,
}

impl Summary {
    /// The figures of `counts`, whose trigger has a stretch.
    pub fn of(counts: &RunCounts) -> Summary {
        let length = counts.config.length;
        let (from, to) = counts.config.trigger.stretch().unwrap_or((length, length));
        let rate = |c: &[u64], a: Duration, b: Duration| {
            if b > a { sum(c, a, b) as f64 / (b - a).as_secs_f64() } else { 0.0 }
        };
        let ratio = |a: Duration, b: Duration| {
            let offered = sum(&counts.offered, a, b);
            if offered == 0 { 0.0 } else { sum(&counts.received, a, b) as f64 / offered as f64 }
        };
        let goodput_before = rate(&counts.goodput, WARM_UP, from);
        let second = index(Duration::from_secs(1));
        let recovered_after = (index(to)..index(length).saturating_sub(second) + 1)
            .find(|&i| counts.goodput[i..i + second].iter().sum::<u64>() as f64 >= RECOVERED * goodput_before)
            .map(|i| BUCKET * i as u32 - to);
        Summary {
            amplification_during: ratio(from, to),
            amplification_after: ratio(to, length),
            goodput_before,
            goodput_during: rate(&counts.goodput, from, to),
            goodput_after: rate(&counts.goodput, to, length),
            recovered_after,
        }
    }

    /// The time to recover as the table says it.
    pub fn recovery(&self) -> String {
        match self.recovered_after {
            Some(after) => format!("{:.1} s", after.as_secs_f64()),
            None => "did not recover".to_owned(),
        }
    }
}

/// The table's header, in Markdown.
pub const HEADER: &str = "| trigger | strategy | received / offered during | after | goodput before /s | during /s | after /s | back within 95 % after |\n|---|---|---:|---:|---:|---:|---:|---:|";

/// One row of the table, in Markdown.
pub fn row(counts: &RunCounts, summary: &Summary) -> String {
    format!(
        "| {} | {} | {:.2}x | {:.2}x | {:.0} | {:.0} | {:.0} | {} |",
        counts.config.trigger.name(),
        counts.config.strategy.name(),
        summary.amplification_during,
        summary.amplification_after,
        summary.goodput_before,
        summary.goodput_during,
        summary.goodput_after,
        summary.recovery()
    )
}
