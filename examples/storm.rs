//! Compares retry strategies on a herd of clients, the way the AWS study
//! "Exponential Backoff and Jitter" and the source story do, and draws the
//! load each strategy puts on the dependency over time.
//!
//! ```text
//! cargo run --example storm
//! ```
//!
//! Prints one row per (model, clients, strategy): the work (attempts that
//! reached the dependency), completion times of the clients that
//! succeeded, the peak load (attempts in the busiest 10 ms), and how many
//! clients gave up. Then the findings the README quotes, and how `adaptive`
//! fares against full jitter on the targets of issue 15. Then writes
//! `storm.svg` and `storm-brownout.svg` into the target directory
//! (`$CARGO_TARGET_DIR`, else `target/`): arrivals per 10 ms for every
//! strategy, 100 clients, overload and brownout models.
//!
//! Every number is deterministic (seeded, virtual time): run it twice, get
//! the same table.
//!
//! What to look for: in the contention model, work grows with the square of
//! the herd without backoff, and backoff without jitter is the slowest to
//! drain (the herd stays in lockstep); the jittered strategies need well
//! under half its work (which of them needs least depends on the herd's
//! size). The findings printed under the table are the README's. In
//! the overload model, immediate and unjittered retries come back in waves
//! (`retry` peak) that land in full ticks, so at 190 clients they burn their
//! attempts and give up while full jitter serves everyone. `recommended`
//! adds a shared budget and breaker with the library's defaults: the breaker
//! opens on the first wave of failures and the clients behind it fail fast,
//! so the dependency sees barely more than one attempt per client. That is
//! the trade a breaker makes: right for a dependency that is down, costly for
//! one that is merely busy or contended. `adaptive` replaces the breaker
//! with a bulkhead whose limit adapts (see `Strategy::Adaptive`): the herd
//! queues for permits instead of failing, so it does a fraction of full
//! jitter's work and finishes no later. The brownout model is a dependency
//! that slows down under load until attempts time out.

use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use plotters::prelude::*;
use stormproof::sim::{HerdConfig, HerdReport, Strategy, simulate};
use stormproof::{Jitter, budget::RatioBudget};

const CLIENTS: [u32; 4] = [10, 50, 100, 190];
/// The herd size the findings (and the README) are about.
const FINDINGS_CLIENTS: u32 = 100;
/// The herd sizes issue 15 sets `adaptive`'s targets for.
const TARGET_CLIENTS: [u32; 3] = [50, 100, 190];
const SEED: u64 = 2015;

fn main() -> Result<(), Box<dyn Error>> {
    println!(
        "{:<10} {:<12} {:>4} {:>6} {:>7} {:>7} {:>7} {:>5} {:>6} {:>7} {:>7} {:>6}",
        "model",
        "strategy",
        "N",
        "work",
        "p50 ms",
        "p99 ms",
        "max ms",
        "peak",
        "retry",
        "gave up",
        "breaker",
        "limit"
    );
    let mut for_findings = Vec::new();
    let mut for_targets = Vec::new();
    for preset in [HerdConfig::contention(), HerdConfig::overload(), HerdConfig::brownout()] {
        for clients in CLIENTS {
            let config = HerdConfig { clients, seed: SEED, ..preset };
            for strategy in Strategy::ALL {
                let report = simulate(&config, strategy)?;
                print_row(&report);
                let target = matches!(strategy, Strategy::Backoff(Jitter::Full) | Strategy::Adaptive);
                if target && TARGET_CLIENTS.contains(&clients) {
                    for_targets.push(report.clone());
                }
                if clients == FINDINGS_CLIENTS {
                    for_findings.push(report);
                }
            }
        }
    }
    println!();
    println!("work: attempts that reached the dependency. p50/p99/max: completion times of the clients");
    println!("that succeeded. peak: most attempts in one 10 ms; retry: the same, retries only (every");
    println!("strategy sends the same first wave at t = 0). gave up: clients without a success;");
    println!("breaker: of those, stopped by the shared breaker (failed fast, no load). limit: the");
    println!("lowest and highest concurrency limit of adaptive's bulkhead.");
    println!();
    print_findings(&for_findings)?;
    println!();
    print_targets(&for_targets)?;
    println!();

    for (preset, file) in
        [(HerdConfig::overload(), "storm.svg"), (HerdConfig::brownout(), "storm-brownout.svg")]
    {
        let config = HerdConfig { clients: 100, seed: SEED, ..preset };
        let reports = Strategy::ALL.iter().map(|&s| simulate(&config, s)).collect::<Result<Vec<_>, _>>()?;
        let path = chart_path(file)?;
        std::fs::write(&path, chart(&reports, config.clients)?)?;
        println!("chart: {}", path.display());
    }
    Ok(())
}

fn print_row(r: &HerdReport) {
    println!(
        "{:<10} {:<12} {:>4} {:>6} {:>7} {:>7} {:>7} {:>5} {:>6} {:>7} {:>7} {:>6}",
        r.model.name(),
        r.strategy.name(),
        r.clients,
        r.attempts,
        ms(r.p50()),
        ms(r.p99()),
        ms(r.max_completion()),
        r.peak_load,
        r.retry_peak,
        r.gave_up(),
        r.breaker_stopped,
        limit_range(r),
    );
}

/// The lowest and highest limit an adaptive bulkhead took (`-` without one).
fn limit_range(r: &HerdReport) -> String {
    let limits = r.limits.iter().map(|&(_, limit)| limit);
    match (limits.clone().min(), limits.max()) {
        (Some(low), Some(high)) => format!("{low}-{high}"),
        _ => "-".to_owned(),
    }
}

/// The comparisons the README makes, computed from the table's rows, so
/// that its sentences can be generated rather than typed.
fn print_findings(reports: &[HerdReport]) -> Result<(), Box<dyn Error>> {
    let find = |model: &str, strategy: Strategy| {
        reports
            .iter()
            .find(|r| r.model.name() == model && r.strategy == strategy)
            .ok_or_else(|| format!("no {model} {} row", strategy.name()))
    };
    let none = find("contention", Strategy::Backoff(Jitter::None))?;
    let full = find("contention", Strategy::Backoff(Jitter::Full))?;
    let last = |r: &HerdReport| {
        r.max_completion().ok_or_else(|| format!("no client of {} succeeded", r.strategy.name()))
    };
    let (last_none, last_full) = (last(none)?, last(full)?);
    println!("findings ({FINDINGS_CLIENTS} clients, seed {SEED}):");
    println!(
        "- contention: full jitter does {:.0}% of the work of no jitter ({} vs {} attempts), \
         and its last client finishes {:.1}x sooner ({} ms vs {} ms)",
        100.0 * full.attempts as f64 / none.attempts as f64,
        full.attempts,
        none.attempts,
        last_none.as_secs_f64() / last_full.as_secs_f64(),
        last_full.as_millis(),
        last_none.as_millis(),
    );
    let immediate = find("overload", Strategy::Immediate)?;
    let full = find("overload", Strategy::Backoff(Jitter::Full))?;
    println!(
        "- overload: immediate retries peak at {} retries in 10 ms, full jitter at {}",
        immediate.retry_peak, full.retry_peak,
    );
    let full = find("brownout", Strategy::Backoff(Jitter::Full))?;
    let immediate = find("brownout", Strategy::Immediate)?;
    println!(
        "- brownout: full jitter needs {} attempts for {} clients and its p99 is {} ms; \
         immediate retries need {} and {} clients give up",
        full.attempts,
        full.clients,
        ms(full.p99()),
        immediate.attempts,
        immediate.gave_up(),
    );
    Ok(())
}

/// `adaptive` against full jitter on the three targets of issue 15, per
/// model and herd size: no client gives up, at most 0.8 times the work,
/// a p99 completion no later. One line each, saying which target is missed
/// and by how much; then the same with a looser budget where the default
/// one stops clients, and how often the targets hold on other seeds.
fn print_targets(reports: &[HerdReport]) -> Result<(), Box<dyn Error>> {
    println!(
        "targets (adaptive against full jitter, seed {SEED}: nobody gives up, work <= 0.8x, p99 <= full's):"
    );
    for full in reports.iter().filter(|r| r.strategy == Strategy::Backoff(Jitter::Full)) {
        let adaptive = reports
            .iter()
            .find(|r| r.strategy == Strategy::Adaptive && r.model == full.model && r.clients == full.clients)
            .ok_or_else(|| format!("no adaptive row for {} N={}", full.model, full.clients))?;
        print_target_line(&format!("N={}", full.clients), full, adaptive);
    }

    // The default budget stops some of 190 contending clients; a looser one does not.
    let budget = RatioBudget { ratio: 0.5, ..Default::default() };
    let config = HerdConfig { clients: 190, seed: SEED, budget: budget.into(), ..HerdConfig::contention() };
    let full = simulate(&config, Strategy::Backoff(Jitter::Full))?;
    let adaptive = simulate(&config, Strategy::Adaptive)?;
    print_target_line(&format!("N=190, budget ratio {}", budget.ratio), &full, &adaptive);

    // One seed proves little: how often do the targets hold at N = 100 on others?
    for preset in [HerdConfig::contention(), HerdConfig::overload(), HerdConfig::brownout()] {
        let (mut met, mut worst, mut work) = (0, Vec::<String>::new(), Vec::new());
        for seed in OTHER_SEEDS {
            let config = HerdConfig { clients: 100, seed, ..preset };
            let full = simulate(&config, Strategy::Backoff(Jitter::Full))?;
            let adaptive = simulate(&config, Strategy::Adaptive)?;
            work.push((100 * adaptive.attempts).div_ceil(full.attempts));
            let missed = missed(&full, &adaptive);
            if missed.is_empty() {
                met += 1;
            } else {
                worst.push(format!("{seed} ({})", missed.join(", ")));
            }
        }
        println!(
            "- {:<10} N=100, seeds {}-{}: work {}-{}% of full jitter's; targets met on {met} of {}{}",
            preset.model.name(),
            OTHER_SEEDS.start(),
            OTHER_SEEDS.end(),
            work.iter().min().ok_or("no seeds")?,
            work.iter().max().ok_or("no seeds")?,
            OTHER_SEEDS.count(),
            if worst.is_empty() { String::new() } else { format!("; missed on seed {}", worst.join(", ")) },
        );
    }
    Ok(())
}

/// The seeds the robustness lines of the targets try besides [`SEED`].
const OTHER_SEEDS: std::ops::RangeInclusive<u64> = 1..=8;

/// Which of the targets `adaptive` misses against `full`, and by how much.
fn missed(full: &HerdReport, adaptive: &HerdReport) -> Vec<String> {
    let mut missed = Vec::new();
    if adaptive.gave_up() > 0 {
        missed.push(format!("{} gave up", adaptive.gave_up()));
    }
    let work = adaptive.attempts as f64 / full.attempts as f64;
    if work > 0.8 {
        missed.push(format!("work {work:.2}x"));
    }
    let p99 = |r: &HerdReport| r.p99().map_or(f64::INFINITY, |d| d.as_secs_f64());
    if p99(adaptive) > p99(full) {
        missed.push(format!("p99 {:+.1}%", 100.0 * (p99(adaptive) / p99(full) - 1.0)));
    }
    missed
}

fn print_target_line(label: &str, full: &HerdReport, adaptive: &HerdReport) {
    let missed = missed(full, adaptive);
    println!(
        "- {:<10} {:<8}  work {:>4} vs {:>4} ({:>3.0}%)  p99 {:>5} vs {:>5} ms  gave up {:>2} vs {:>2}  {}",
        full.model.name(),
        label,
        adaptive.attempts,
        full.attempts,
        100.0 * adaptive.attempts as f64 / full.attempts as f64,
        ms(adaptive.p99()),
        ms(full.p99()),
        adaptive.gave_up(),
        full.gave_up(),
        if missed.is_empty() { "met".to_owned() } else { format!("missed: {}", missed.join(", ")) },
    );
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".to_owned(), |d| d.as_millis().to_string())
}

/// `$CARGO_TARGET_DIR/<file>`, else `target/<file>` in this package.
fn chart_path(file: &str) -> std::io::Result<PathBuf> {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    std::fs::create_dir_all(&dir)?;
    Ok(dir.join(file))
}

const WIDTH: u32 = 1000;
const HEIGHT: u32 = 820;
const LEGEND_WIDTH: u32 = 250;
const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),   // immediate
    RGBColor(255, 127, 14),  // none
    RGBColor(44, 160, 44),   // full
    RGBColor(31, 119, 180),  // equal
    RGBColor(148, 103, 189), // decorrelated
    RGBColor(140, 86, 75),   // defaults
    RGBColor(23, 23, 23),    // recommended
    RGBColor(227, 119, 194), // adaptive
];

/// Arrivals per bucket over time, one line per strategy: the whole run on
/// top, its first 400 ms (where most strategies do all their work) below.
///
/// Plotters draws the lines and the grid; every piece of text is an SVG
/// `<text>` element written here, so making the chart needs no font
/// (plotters' own text rendering would need a system font), and the viewer
/// renders the labels with whatever sans-serif font it has.
fn chart(reports: &[HerdReport], clients: u32) -> Result<String, Box<dyn Error>> {
    let bucket = reports[0].bucket;
    let bucket_ms = bucket.as_secs_f64() * 1000.0;
    let last = reports.iter().filter_map(|r| r.arrivals.last()).max().copied().unwrap_or_default();
    let last_ms = last.as_secs_f64() * 1000.0 + bucket_ms;
    let peak = reports.iter().map(|r| r.peak_load).max().unwrap_or(0).max(1) as f64;

    let mut svg = String::new();
    let mut labels = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        labels.push(text(
            (WIDTH - LEGEND_WIDTH) as i32 / 2 + 30,
            28,
            "middle",
            17,
            &format!(
                "Attempts arriving at the dependency per {bucket_ms} ms: {clients} clients, {} model",
                reports[0].model.name()
            ),
        ));
        let (top, bottom) = root.split_vertically(HEIGHT / 2);
        let full_range = format!("the whole run ({} ms)", last_ms.round());
        panel(&top, reports, last_ms, peak, &full_range, &mut labels)?;
        panel(&bottom, reports, 400f64.min(last_ms), peak, "the first 400 ms", &mut labels)?;

        // The legend, right of the top panel.
        let x = (WIDTH - LEGEND_WIDTH) as i32 + 16;
        for (i, report) in reports.iter().enumerate() {
            let y = 80 + 44 * i as i32;
            let color = COLORS[i % COLORS.len()];
            root.draw(&PathElement::new([(x, y), (x + 26, y)], color.stroke_width(3)))?;
            labels.push(text(x + 34, y + 5, "start", 14, report.strategy.name()));
            let detail = format!(
                "work {}, retry peak {}, gave up {}",
                report.attempts,
                report.retry_peak,
                report.gave_up()
            );
            labels.push(text(x + 34, y + 22, "start", 11, &detail));
        }
        root.present()?;
    }
    let end = svg.rfind("</svg>").ok_or("plotters wrote no closing </svg>")?;
    svg.insert_str(end, &(labels.join("\n") + "\n"));
    Ok(svg)
}

/// One panel: grid, axes, a line per report from 0 to `x_max` ms; its
/// labels go to `labels` as SVG text.
fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    reports: &[HerdReport],
    x_max: f64,
    peak: f64,
    title: &str,
    labels: &mut Vec<String>,
) -> Result<(), Box<dyn Error>> {
    let x_step = nice_step(x_max / 8.0);
    let x_max = (x_max / x_step).ceil() * x_step;
    let y_step = nice_step(peak / 5.0);
    let y_max = ((peak / y_step).floor() + 1.0) * y_step;
    let mut chart = ChartBuilder::on(area)
        .margin_top(60)
        .margin_bottom(44)
        .margin_left(70)
        .margin_right(LEGEND_WIDTH + 10)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    let grid = RGBColor(228, 228, 228);
    let axis = RGBColor(90, 90, 90);
    for i in 0..=((x_max / x_step).round() as u32) {
        let x = f64::from(i) * x_step;
        chart.draw_series(LineSeries::new([(x, 0.0), (x, y_max)], grid))?;
        let (px, py) = chart.backend_coord(&(x, 0.0));
        labels.push(text(px, py + 18, "middle", 12, &format!("{x}")));
    }
    for i in 0..=((y_max / y_step).round() as u32) {
        let y = f64::from(i) * y_step;
        chart.draw_series(LineSeries::new([(0.0, y), (x_max, y)], grid))?;
        let (px, py) = chart.backend_coord(&(0.0, y));
        labels.push(text(px - 8, py + 4, "end", 12, &format!("{y}")));
    }
    chart.draw_series(LineSeries::new([(0.0, y_max), (0.0, 0.0), (x_max, 0.0)], axis))?;
    let bucket = reports[0].bucket;
    // Drawn in reverse, so the first strategies end up on top.
    for (i, report) in reports.iter().enumerate().rev() {
        let color = COLORS[i % COLORS.len()];
        let points = dense(report, bucket, x_max).into_iter().map(|(t, n)| (t, n as f64));
        chart.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
    }
    let (left, bottom) = chart.backend_coord(&(0.0, 0.0));
    let (right, top) = chart.backend_coord(&(x_max, y_max));
    labels.push(text(left, top - 12, "start", 14, title));
    labels.push(text((left + right) / 2, bottom + 38, "middle", 13, "time (ms)"));
    labels.push(format!(
        r##"<text x="{x}" y="{y}" transform="rotate(-90 {x} {y})" text-anchor="middle" font-family="sans-serif" font-size="13" fill="#333">attempts</text>"##,
        x = left - 46,
        y = (top + bottom) / 2,
    ));
    Ok(())
}

/// Arrivals per bucket from 0 to `x_max` ms, empty buckets included, as
/// `(bucket start in ms, arrivals)`.
fn dense(report: &HerdReport, bucket: Duration, x_max: f64) -> Vec<(f64, usize)> {
    let width = bucket.as_secs_f64() * 1000.0;
    let buckets = (x_max / width).ceil() as usize;
    let mut counts = vec![0; buckets + 1];
    for (start, n) in report.load_by_bucket() {
        let i = (start.as_secs_f64() * 1000.0 / width).round() as usize;
        if let Some(slot) = counts.get_mut(i) {
            *slot = n;
        }
    }
    counts.into_iter().enumerate().map(|(i, n)| (i as f64 * width, n)).collect()
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = raw.max(1.0);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * magnitude).find(|&s| s >= raw).unwrap_or(10.0 * magnitude)
}

fn text(x: i32, y: i32, anchor: &str, size: u32, content: &str) -> String {
    let escaped = content.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    format!(
        r##"<text x="{x}" y="{y}" text-anchor="{anchor}" font-family="sans-serif" font-size="{size}" fill="#333">{escaped}</text>"##
    )
}
