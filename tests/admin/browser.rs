//! The dashboard page in a real browser: Debian's Chromium, headless,
//! driven by its own flags (`--dump-dom`), so the test needs no driver
//! process and no crate of its own.
//!
//! How it stays deterministic: `--virtual-time-budget` dumps the DOM once
//! the page has been idle for that long in virtual time, and virtual time
//! stands still while a request is open. The event stream is such a
//! request; so the test connects the page, sends it what it must show,
//! then closes the stream (`EventStreams::close`): the page has applied
//! every event before the stream's end lets virtual time run out.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stormproof::Policy;
use stormproof::admin::{self, Snapshot};
use stormproof::breaker::BreakerConfig;
use stormproof::rate_limit::RateLimitConfig;
use tokio::sync::mpsc;
use tower::ServiceExt;

#[cfg(feature = "redis")]
use super::support::snapshot;
use super::support::{Events, Flaky, PATIENCE, TOKEN, call, guards, post, serve, shed_over_the_rate};

/// The browser, as Debian installs it; `STORMPROOF_CHROMIUM` overrides.
fn chromium() -> String {
    let path = std::env::var("STORMPROOF_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned());
    assert!(
        std::path::Path::new(&path).exists(),
        "Chromium is not installed at {path}: the dashboard test renders the page in it. \
         Run `scripts/ensure-chromium.sh` (installs Debian's `chromium` package), \
         or point STORMPROOF_CHROMIUM at a Chromium binary."
    );
    path
}

pub async fn renders_each_breaker_and_its_state() {
    let chromium = chromium();
    let registry = guards();
    registry.declare_breaker("gamma", BreakerConfig::default()).unwrap();
    registry.breaker("gamma").unwrap().force_closed();
    // A breaker judging slow calls, one of them slow: the card says so.
    let slow_calls = BreakerConfig {
        failure_rate_percent: Some(50),
        slow_call_duration: Some(std::time::Duration::from_secs(2)),
        slow_call_rate_percent: Some(40),
        ..Default::default()
    };
    registry.declare_breaker("delta", slow_calls).unwrap();
    let delta = registry.breaker("delta").unwrap();
    delta.try_acquire().unwrap().record(stormproof::breaker::Outcome::Slow);
    // A window of the last calls, and retries that cost by what they follow.
    let last_calls = BreakerConfig {
        failure_rate_percent: Some(50),
        minimum_calls: 20,
        window_calls: Some(100),
        ..Default::default()
    };
    registry.declare_breaker("epsilon", last_calls).unwrap();
    let costs = stormproof::budget::TokenBucket {
        capacity: 50,
        retry_cost: 5,
        timeout_cost: Some(10),
        throttled_cost: Some(2),
        refund_on_success: true,
        ..Default::default()
    };
    registry.declare_budget("costs", costs).unwrap();
    let throttling = stormproof::budget::RetryThrottling { max_tokens: 10, token_ratio: 0.1 };
    registry.declare_budget("grpc", throttling).unwrap();
    for _ in 0..5 {
        registry.budget("grpc").unwrap().record_failure();
    }
    // A breaker per key with one tenant cut off: the card names it.
    registry
        .breaker_for("tenants", "zed")
        .try_acquire()
        .unwrap()
        .record(stormproof::breaker::Outcome::Success);
    registry.breaker_for("tenants", "acme").force_open();
    // An operation whose attempts a file sets: the page says where from.
    registry.load_toml("[operations.\"admin::quote\"]\nmax_attempts = 3\n").unwrap();
    let shed = shed_over_the_rate(&registry).await;
    // A rate limit per key, one of whose keys refused calls.
    let quota = RateLimitConfig { per_second: 1, burst: 1, max_wait: None, ..Default::default() };
    registry.declare_rate_limit("api", quota).unwrap();
    let per_key = Policy::builder().max_attempts(1).rate_limit_per("api").build().unwrap();
    for _ in 0..3 {
        let _ = registry.scope(per_key.per("acme").run(|| async { Ok::<(), Flaky>(()) })).await;
    }
    let acme = registry.keyed_rate_limits("api").unwrap().peek("acme").unwrap().refusals().total();
    let admin = admin::router(&registry).with_token(TOKEN).unwrap();
    let streams = admin.event_streams();
    let (router, mut page_connected) = signalling_event_streams(admin.into_router());
    let addr = serve(router).await;
    for _ in 0..3 {
        call(&registry, "beta", Ok(())).await.unwrap();
    }
    // Ticks first, until the calls are in one, so the page gets them to chart.
    let mut watcher = Events::connect(addr).await;
    page_connected.recv().await.unwrap(); // the watcher's own
    let mut charted = 0;
    while charted < 3 {
        let tick: Snapshot = watcher.next_named("tick").await;
        charted += tick.breakers.iter().find(|b| b.name == "beta").unwrap().per_second[0].calls;
    }

    let mut page = Page::open(&chromium, addr, 1000);
    page.connected(&mut page_connected).await;
    // Live, after the page connected: a transition it must apply.
    let (status, body) = post(addr, "alpha", "force-open", Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(status, 200, "{body}");
    // And one of a key's breaker: listed with its key, not applied to its set's template.
    registry.breaker_for("tenants", "bravo").force_open();
    streams.close();

    let dom = page.dom().await;

    let alpha = card(&dom, "breaker", "alpha");
    assert!(
        alpha.opening.contains(r#"data-state="open""#) && alpha.opening.contains(r#"data-forced="open""#),
        "{}",
        alpha.html
    );
    assert!(alpha.html.contains(">forced open<"), "the forced state shows: {}", alpha.html);
    let beta = card(&dom, "breaker", "beta");
    assert!(
        beta.opening.contains(r#"data-state="closed""#) && beta.opening.contains(r#"data-forced="""#),
        "{}",
        beta.html
    );
    assert!(beta.html.contains(r#"<span class="state closed">closed</span>"#), "{}", beta.html);
    assert!(beta.html.contains(r#"data-series="ok""#), "a bar of the successful calls: {}", beta.html);
    assert!(beta.html.contains("open period 1.0 s (1.0 s doubling to 30.0 s)"), "{}", beta.html);
    assert!(alpha.html.contains("open period 60.0 s (fixed)"), "{}", alpha.html);
    let gamma = card(&dom, "breaker", "gamma");
    assert!(
        gamma.opening.contains(r#"data-forced="closed""#) && gamma.html.contains(">forced closed<"),
        "{}",
        gamma.html
    );
    let delta = card(&dom, "breaker", "delta");
    assert!(
        delta.html.contains("opens at 50% failures or 40% slower than 2.0 s of ≥10 in 10.0 s"),
        "{}",
        delta.html
    );
    assert!(delta.html.contains("1 calls, 0 failed, 1 slow, 0 rejected"), "{}", delta.html);
    assert!(
        !beta.html.contains(" slow"),
        "a breaker judging no slow calls says nothing of them: {}",
        beta.html
    );
    let epsilon = card(&dom, "breaker", "epsilon");
    assert!(epsilon.html.contains("opens at 50% failures of ≥20 in the last 100 calls"), "{}", epsilon.html);
    card(&dom, "budget", "alpha");
    let costs = card(&dom, "budget", "costs");
    assert!(costs.html.contains("50 / 50 tokens left"), "{}", costs.html);
    let charged = "token bucket: a retry takes 5, 10 after a timeout, 2 after a throttle, a success returns 1, a retry that succeeds what it took";
    assert!(costs.html.contains(charged), "{}", costs.html);
    let grpc = card(&dom, "budget", "grpc");
    assert!(grpc.html.contains("5 / 10 tokens: retries stopped"), "{}", grpc.html);
    assert!(
        grpc.html.contains("gRPC retry throttling: a failure takes 1, a success returns 0.1"),
        "{}",
        grpc.html
    );
    card(&dom, "bulkhead", "alpha");
    let adaptive = card(&dom, "bulkhead", "beta");
    assert!(adaptive.html.contains("adaptive (aimd): limit 8 within 2..8"), "{}", adaptive.html);
    let throttle = card(&dom, "throttle", "alpha");
    assert!(throttle.html.contains("refuses 0% of requests now"), "{}", throttle.html);
    assert!(dom.contains("tenants[bravo]</b> closed → open (forced open)"), "the key's transition:\n{dom}");
    let template = card(&dom, "breaker", "tenants");
    assert!(template.opening.contains(r#"data-state="closed""#), "{}", template.html);
    assert!(template.html.contains("the settings of its breakers per key"), "{}", template.html);
    assert!(!beta.html.contains("breakers per key"), "{}", beta.html);
    let tenants = card(&dom, "keyed-breaker", "tenants");
    assert!(tenants.html.contains("2 of 1024 keys held"), "{}", tenants.html);
    assert!(tenants.html.contains("open: acme<"), "the key cut off: {}", tenants.html);
    assert!(tenants.html.contains("forgotten after 600.0 s unused"), "{}", tenants.html);
    let keyed = card(&dom, "keyed-set", "rate limit:api");
    assert!(keyed.html.contains("1 of 1024 keys held"), "{}", keyed.html);
    assert!(acme > 0 && keyed.html.contains(&format!("refused most: acme ({acme})")), "{}", keyed.html);
    assert!(keyed.html.contains("a rate limit per key: least recently used out past 1024"), "{}", keyed.html);
    let rate = card(&dom, "rate-limit", "alpha");
    assert!(rate.html.contains("50 per second, bursts of 5"), "{}", rate.html);
    let refused = format!("refused: 0 critical · 0 default · {shed} sheddable");
    assert!(rate.html.contains(&refused), "{}", rate.html);
    assert!(
        !throttle.html.contains("refused:"),
        "a guard that refused nothing says nothing: {}",
        throttle.html
    );
    assert!(dom.contains("alpha</b> closed → open (forced open)"), "the transition is listed:\n{dom}");
    let quote = card(&dom, "operation", "admin::quote");
    let from_file = r#"<tr class="from-file" data-key="max_attempts"><td>max_attempts</td><td>3</td><td class="source">&lt;toml&gt;:2</td></tr>"#;
    assert!(quote.html.contains(from_file), "the file's value and its line: {}", quote.html);
    let compiled =
        r#"<tr class="" data-key="base_ms"><td>base_ms</td><td>25</td><td class="source">compiled</td></tr>"#;
    assert!(quote.html.contains(compiled), "a compiled value: {}", quote.html);
}

/// The page of a service that restarts while it is open: the new process
/// numbers its transitions from 1 again, and the page, which reconnects by
/// itself, must show them (it skips a transition it already has by number).
///
/// One address serves the service before its restart, then after it (a
/// switch in front of two routers). The page loads from the first, which
/// has four transitions to list; its stream then ends, the browser
/// reconnects (3 s of virtual time later) to the second, which sends its
/// snapshot, then one transition live. The budget (4.5 s) runs out before
/// the next reconnection would bring a snapshot listing it anyway.
pub async fn shows_the_transitions_of_a_restarted_service() {
    let chromium = chromium();
    let before = guards();
    let old = admin::router(&before);
    let old_streams = old.event_streams();
    let old = old.into_router();
    let alpha = before.breaker("alpha").unwrap();
    for _ in 0..2 {
        alpha.force_open();
        alpha.reset();
    }
    let after = guards();
    let restarted = admin::router(&after);
    let new_streams = restarted.event_streams();
    let restarted = restarted.into_router();
    let switched = Arc::new(AtomicBool::new(false));
    let switch = switched.clone();
    let service = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let router = if switch.load(Ordering::SeqCst) { restarted.clone() } else { old.clone() };
        async move { router.oneshot(request).await }
    });
    let (service, mut page_connected) = signalling_event_streams(service);
    let addr = serve(service).await;

    let mut page = Page::open(&chromium, addr, 4500);
    page.connected(&mut page_connected).await;
    switched.store(true, Ordering::SeqCst);
    old_streams.close();
    page.connected(&mut page_connected).await;
    after.breaker("beta").unwrap().force_open();
    new_streams.close();
    let dom = page.dom().await;
    assert!(
        dom.contains("beta</b> closed → open (forced open)"),
        "the restarted service's first transition is listed:\n{dom}"
    );
    assert!(!dom.contains("alpha</b> closed → open"), "the old service's are gone:\n{dom}");
}

/// The fleet the registry is in, on the dashboard: a string at its
/// breaker's state (another program's), replaced by the flush that found
/// it, is a line on the fleet's card naming it, and `/snapshot` counts it.
/// Before, the page showed no fleet, and such a key was dropped unheard (or,
/// at a bucket, failed every flush for good).
#[cfg(feature = "redis")]
pub async fn shows_a_key_of_the_fleets_of_another_type_replaced(server: &super::server::Server) {
    use stormproof::Registry;
    use stormproof::fleet::{Fleet, FleetConfig};
    let chromium = chromium();
    server.command(&["SET", "dash:breaker:dep", "x"]);
    let registry = Registry::new();
    registry.declare_breaker("dep", BreakerConfig::default()).unwrap();
    let fleet = Fleet::join(
        &registry,
        FleetConfig {
            url: server.url(),
            prefix: "dash".into(),
            // Long enough that a busy machine's slow flush is no loss.
            store_timeout: std::time::Duration::from_secs(2),
            breakers: vec!["dep".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let replaced = async {
        while !(fleet.is_linked() && fleet.replaced_keys() == 1) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(PATIENCE, replaced).await.expect("the key replaced, the fleet linked");
    let admin = admin::router(&registry);
    let streams = admin.event_streams();
    let (router, mut page_connected) = signalling_event_streams(admin.into_router());
    let addr = serve(router).await;

    let shown = snapshot(addr).await.fleet.expect("the registry is in a fleet");
    let key = shown.last_replaced_key.as_deref();
    assert_eq!((shown.prefix.as_str(), shown.linked, shown.replaced_keys), ("dash", true, 1), "{shown:?}");
    assert_eq!((key, shown.failed_flushes), (Some("dash:breaker:dep"), 0), "{shown:?}");
    let mut page = Page::open(&chromium, addr, 1000);
    page.connected(&mut page_connected).await;
    streams.close();
    let dom = page.dom().await;
    let card = card(&dom, "fleet", "dash");
    assert!(card.opening.contains(r#"data-linked="true""#), "{}", card.html);
    assert!(
        card.html.contains("1 key of another type replaced (another program's value), last dash:breaker:dep"),
        "the line naming the key: {}",
        card.html
    );
    fleet.leave().await;
    assert_eq!(snapshot(addr).await.fleet, None, "left: in no fleet");
}

/// `router`, telling the receiver each time a page subscribes to its events
/// (the handler subscribes before it answers).
fn signalling_event_streams(router: axum::Router) -> (axum::Router, mpsc::UnboundedReceiver<()>) {
    let (connected, page_connected) = mpsc::unbounded_channel();
    let router = router.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let connected = connected.clone();
            async move {
                let events = request.uri().path() == "/events";
                let response = next.run(request).await;
                if events {
                    let _ = connected.send(());
                }
                response
            }
        },
    ));
    (router, page_connected)
}

/// Chromium, headless, on a page it dumps once `budget_ms` of virtual
/// time has run (see the module docs).
struct Page {
    browser: Child,
    pid: u32,
    output: std::thread::JoinHandle<std::io::Result<String>>,
    errors: Option<std::thread::JoinHandle<std::io::Result<String>>>,
    profile: std::path::PathBuf,
}

impl Page {
    fn open(chromium: &str, addr: SocketAddr, budget_ms: u32) -> Page {
        let profile = tempdir();
        let mut browser = Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--dump-dom",
            ])
            .arg(format!("--virtual-time-budget={budget_ms}"))
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("http://{addr}/"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {chromium}: {e}"));
        let pid = browser.id();
        let stdout = browser.stdout.take().unwrap();
        let stderr = browser.stderr.take().unwrap();
        let output = std::thread::spawn(move || std::io::read_to_string(stdout));
        let errors = std::thread::spawn(move || std::io::read_to_string(stderr));
        Page { browser, pid, output, errors: Some(errors), profile }
    }

    /// Waits until the page has (again) opened the event stream.
    async fn connected(&mut self, page_connected: &mut mpsc::UnboundedReceiver<()>) {
        if tokio::time::timeout(PATIENCE, page_connected.recv()).await.is_err() {
            let _ = self.browser.kill();
            let errors = self.errors.take().map(|e| e.join().unwrap().unwrap_or_default());
            panic!(
                "Chromium (pid {}) never opened the event stream; its stderr:\n{}",
                self.pid,
                errors.unwrap_or_default()
            );
        }
    }

    /// The page's DOM once the browser has dumped it and exited.
    async fn dom(self) -> String {
        let Page { mut browser, pid, output, errors, profile } = self;
        let finished = tokio::task::spawn_blocking(move || {
            let status = browser.wait();
            let errors = errors.map(|e| e.join().unwrap().unwrap_or_default());
            (status, output.join().unwrap(), errors.unwrap_or_default())
        });
        let (status, dom, errors) = match tokio::time::timeout(PATIENCE, finished).await {
            Ok(joined) => joined.unwrap(),
            Err(_) => panic!("Chromium (pid {pid}) did not dump the page within {PATIENCE:?}"),
        };
        let _ = std::fs::remove_dir_all(&profile);
        assert!(status.is_ok_and(|s| s.success()), "Chromium failed; its stderr:\n{errors}");
        dom.unwrap()
    }
}

/// A card's opening tag and its whole HTML, found by its `data-<kind>` name.
struct Card {
    opening: String,
    html: String,
}

fn card(dom: &str, kind: &str, name: &str) -> Card {
    let marker = format!(r#"data-{kind}="{name}""#);
    let at = dom.find(&marker).unwrap_or_else(|| panic!("no {kind} card for {name} in the page:\n{dom}"));
    let start = dom[..at].rfind("<article").unwrap();
    let end = at + dom[at..].find("</article>").unwrap() + "</article>".len();
    let opening_end = at + dom[at..].find('>').unwrap();
    Card { opening: dom[start..opening_end].to_owned(), html: dom[start..end].to_owned() }
}

/// A fresh, empty directory for the browser's profile.
fn tempdir() -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let dir = std::env::temp_dir().join(format!("stormproof-chromium-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
