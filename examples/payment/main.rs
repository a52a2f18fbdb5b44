//! The main example: a real payment service on loopback that fails on a
//! schedule (503 bursts, 429 with Retry-After in seconds and as a date, slow
//! responses past the attempt timeout, an outage long enough to open the
//! breaker), and a few hundred concurrent orders placed through
//! `#[resilient]` functions. It ends with a summary and the verdict that
//! every order was charged exactly once; it exits non-zero otherwise.
//!
//! Run: `cargo run --example payment` (ORDERS=... to change the count;
//! `RUST_LOG=stormproof=debug` to see every retry).
//! With `--dashboard` (or `STORMPROOF_DASHBOARD=1`) it also serves the live
//! admin page on 127.0.0.1, prints its URL, and keeps serving after the
//! scenario until Ctrl-C (see `dashboard.rs`).

mod dashboard;
mod scenario;
#[allow(dead_code)] // `FaultPlan::small` serves the integration test.
mod server;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use scenario::{Api, OrderOutcome, Tally};
use stormproof::{breaker::BreakerState, registry};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

#[tokio::main]
async fn main() -> ExitCode {
    let options = match dashboard::options() {
        Ok(options) => options,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let orders: usize = std::env::var("ORDERS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let tally = Tally::default();
    // `RUST_LOG=stormproof=debug` prints every retry, stop and transition
    // (the library's targets are all under `stormproof`); without RUST_LOG,
    // only the summary.
    let logs = tracing_subscriber::EnvFilter::try_from_default_env()
        .ok()
        .map(|filter| tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(filter));
    let subscriber = tracing_subscriber::registry().with(tally.clone()).with(logs);
    if tracing::subscriber::set_global_default(subscriber).is_err() {
        eprintln!("a tracing subscriber was already installed; the tally will be empty");
    }

    let transitions = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = transitions.clone();
    registry().on_transition(move |t| log.lock().unwrap().push((t.from, t.to)));
    if let Err(e) = scenario::declare_guards(registry()) {
        eprintln!("refusing to start: {e}");
        return ExitCode::FAILURE;
    }
    reload_on_sighup();

    if !options.enabled {
        return run(orders, tally, transitions).await;
    }
    let dashboard = match dashboard::start(options.port).await {
        Ok(dashboard) => dashboard,
        Err(e) => {
            eprintln!("cannot serve the dashboard: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("dashboard on {} (Ctrl-C stops it)", dashboard.url);
    let code = tokio::select! {
        code = run(orders, tally, transitions) => code,
        _ = tokio::signal::ctrl_c() => {
            println!("interrupted");
            dashboard.stop().await;
            return ExitCode::from(130);
        }
    };
    println!("the scenario is over; the dashboard stays on {} until Ctrl-C", dashboard.url);
    let _ = tokio::signal::ctrl_c().await;
    dashboard.stop().await;
    code
}

/// The scenario: the orders against the faulty server, then the summary.
async fn run(
    orders: usize,
    tally: Tally,
    transitions: Arc<std::sync::Mutex<Vec<(BreakerState, BreakerState)>>>,
) -> ExitCode {
    let server = match server::start(server::FaultPlan::example()).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("cannot start the loopback server: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("payment service on http://{} — placing {orders} orders", server.addr);
    let api = Arc::new(Api::new(server.addr));
    let started = std::time::Instant::now();

    let bar = ProgressBar::new(orders as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} orders  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut tasks = Vec::with_capacity(orders);
    for i in 0..orders {
        let api = api.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            let outcome = scenario::place_order(
                &api,
                format!("order-{i:04}"),
                format!("sku-{}", i % 17),
                Duration::from_secs(25),
            )
            .await;
            bar.inc(1);
            outcome
        }));
    }
    let ticker = {
        let (bar, api, ledger) = (bar.clone(), api.clone(), server.ledger.clone());
        tokio::spawn(async move {
            loop {
                let breaker =
                    registry().breaker("payments").map(|b| b.state()).unwrap_or(BreakerState::Closed);
                bar.set_message(format!(
                    "attempts {:>4}  charges {:>4}  breaker {breaker}",
                    api.quote_attempts.load(Ordering::Relaxed) + api.charge_attempts.load(Ordering::Relaxed),
                    ledger.charges(),
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let mut lost = 0;
    let mut failed = Vec::new();
    for task in tasks {
        match task.await {
            Ok(OrderOutcome::Charged) => {}
            Ok(OrderOutcome::Failed(reason)) => failed.push(reason),
            Ok(OrderOutcome::Lost) | Err(_) => lost += 1,
        }
    }
    ticker.abort();
    bar.finish_and_clear();
    let elapsed = started.elapsed();

    let per_order = server.ledger.charges_per_order();
    let twice = per_order.values().filter(|&&n| n > 1).count();
    let charged = per_order.len();
    let counts = tally.counts();
    println!();
    println!("elapsed            {:.1} s", elapsed.as_secs_f64());
    println!(
        "attempts           quote {}, charge {} ({} requests reached the server)",
        api.quote_attempts.load(Ordering::Relaxed),
        api.charge_attempts.load(Ordering::Relaxed),
        server.ledger.requests.load(Ordering::Relaxed),
    );
    let by = |prefix: &str| {
        let parts: Vec<String> = counts
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(prefix).map(|class| format!("{class} {v}")))
            .collect();
        if parts.is_empty() { "none".to_owned() } else { parts.join(", ") }
    };
    println!("retries by class   {}", by("retry/"));
    println!("calls gave up      {}", by("stop/"));
    println!("budget exhausted   {} times", tally.get("stop/budget_exhausted"));
    let transitions = transitions.lock().unwrap();
    let mut kinds = std::collections::BTreeMap::<String, u32>::new();
    for (from, to) in transitions.iter() {
        *kinds.entry(format!("{from}->{to}")).or_default() += 1;
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} x{n}")).collect();
    println!("breaker            {} transitions: {}", transitions.len(), kinds.join(", "));
    let keys = server.ledger.keys_per_order();
    let bad_keys = server.ledger.orders_with_inconsistent_keys();
    println!(
        "idempotency        {} charge requests for {} orders, {} orders with a missing or changing key",
        keys.values().map(Vec::len).sum::<usize>(),
        keys.len(),
        bad_keys.len(),
    );
    println!(
        "                   {} retried charges answered from the ledger instead of charging again",
        server.ledger.deduplicated.load(Ordering::Relaxed)
    );
    for (order, sent) in bad_keys.iter().take(3) {
        println!("                   {order} sent keys {sent:?}");
    }
    for reason in failed.iter().take(3) {
        println!("failed order       {reason}");
    }
    println!(
        "server charges     {} for {orders} orders ({charged} orders charged, {twice} twice, {lost} lost, {} failed)",
        server.ledger.charges(),
        failed.len()
    );
    let exactly_once = twice == 0 && lost == 0 && failed.is_empty() && charged == orders;
    if exactly_once && server.ledger.charges() == orders as u64 && bad_keys.is_empty() {
        println!(
            "verdict            every order was charged exactly once, every attempt with its order's key"
        );
        ExitCode::SUCCESS
    } else {
        println!(
            "verdict            FAILED: orders must be charged exactly once, each attempt with its order's key"
        );
        ExitCode::FAILURE
    }
}

/// Reloads the guards' file on SIGHUP and prints what changed.
#[cfg(unix)]
fn reload_on_sighup() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        eprintln!("cannot listen for SIGHUP: the guards' file will not be reloaded");
        return;
    };
    println!("guards from {} (pid {}: `kill -HUP` reloads it)", scenario::GUARDS_FILE, std::process::id());
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match registry().reload_file(scenario::GUARDS_FILE) {
                Ok(report) => println!("reloaded {}:\n{report}", scenario::GUARDS_FILE),
                Err(e) => eprintln!("not reloaded, nothing changed:\n{e}"),
            }
        }
    });
}

#[cfg(not(unix))]
fn reload_on_sighup() {}
