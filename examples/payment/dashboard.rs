//! `--dashboard`: the admin page of the example's registry on 127.0.0.1,
//! to watch the breaker open and recover while the orders run.
//!
//! ```sh
//! cargo run --example payment -- --dashboard [--dashboard-port 8080]
//! STORMPROOF_DASHBOARD=1 STORMPROOF_DASHBOARD_PORT=8080 cargo run --example payment
//! STORMPROOF_DASHBOARD_TOKEN=... # also enables the page's force-open / force-closed / reset buttons
//! ```

use std::sync::Arc;
use std::time::Duration;

use stormproof::admin::{self, EventStreams};
use stormproof::registry;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Whether to serve the dashboard, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// `--dashboard`, or `STORMPROOF_DASHBOARD=1`.
    pub enabled: bool,
    /// `--dashboard-port N` or `STORMPROOF_DASHBOARD_PORT`; 0 (the default) lets the system pick.
    pub port: u16,
}

const USAGE: &str = "usage: payment [--dashboard] [--dashboard-port PORT]";

/// Reads the options from the command line, then the environment.
pub fn options() -> Result<Options, String> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut options = Options {
        enabled: env("STORMPROOF_DASHBOARD").is_some_and(|v| v != "0"),
        port: match env("STORMPROOF_DASHBOARD_PORT") {
            Some(port) => parse_port(&port)?,
            None => 0,
        },
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dashboard" => options.enabled = true,
            "--dashboard-port" => {
                let port = args.next().ok_or_else(|| format!("--dashboard-port needs a port\n{USAGE}"))?;
                options.port = parse_port(&port)?;
                options.enabled = true;
            }
            other => match other.strip_prefix("--dashboard-port=") {
                Some(port) => {
                    options.port = parse_port(port)?;
                    options.enabled = true;
                }
                None => return Err(format!("unknown argument `{other}`\n{USAGE}")),
            },
        }
    }
    Ok(options)
}

fn parse_port(port: &str) -> Result<u16, String> {
    port.parse().map_err(|_| format!("`{port}` is not a port (0 to 65535)\n{USAGE}"))
}

/// The dashboard being served.
pub struct Dashboard {
    /// Where to open it.
    pub url: String,
    streams: EventStreams,
    shutdown: Arc<Notify>,
    server: JoinHandle<()>,
}

/// Serves the global registry's admin routes on 127.0.0.1:`port`.
pub async fn start(port: u16) -> std::io::Result<Dashboard> {
    let mut admin = admin::router(registry());
    let token = std::env::var("STORMPROOF_DASHBOARD_TOKEN").ok().filter(|t| !t.is_empty());
    if let Some(token) = token {
        admin =
            admin.with_token(token).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    }
    let streams = admin.event_streams();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let shutdown = Arc::new(Notify::new());
    let server = tokio::spawn({
        let shutdown = shutdown.clone();
        let router = admin.into_router();
        async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move { shutdown.notified().await })
                .await;
        }
    });
    Ok(Dashboard { url, streams, shutdown, server })
}

impl Dashboard {
    /// Ends the open pages' event streams, then the server.
    pub async fn stop(self) {
        // An open event stream would hold the graceful shutdown forever.
        self.streams.close();
        self.shutdown.notify_one();
        if tokio::time::timeout(Duration::from_secs(5), self.server).await.is_err() {
            eprintln!("the dashboard's server did not stop within 5 s; leaving it");
        }
    }
}
