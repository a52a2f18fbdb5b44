//! A scripted HTTP server on 127.0.0.1 (an ephemeral port) for the tower
//! and reqwest-middleware tests: each path answers from its script of
//! statuses, then 200; `/charges` makes a charge per request and
//! deduplicates by `Idempotency-Key`. It records every request it sees and
//! counts the TCP connections it accepts.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use futures_util::StreamExt;
use tokio::net::TcpListener;
use tokio::time::Instant;

/// One scripted answer.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<&'static str>,
    pub payload: Payload,
    /// How long the server takes before it answers (on tokio's clock).
    pub delay_ms: u64,
}

/// What a scripted answer's body is.
#[derive(Debug, Clone, Copy)]
pub enum Payload {
    /// `answer N` (the Nth request to the path), or `charge N`.
    Answer,
    /// This many bytes, with a `Content-Length`.
    Sized(usize),
    /// This many bytes in chunks of 1 KiB, without a `Content-Length`.
    Chunked(usize),
    /// Chunks of 8 KiB without end.
    // This and `Stalled`: only the reqwest-middleware tests use them.
    #[allow(dead_code)]
    Endless,
    /// This many bytes, without a `Content-Length`, then nothing: the body
    /// never ends, and the connection stays open.
    #[allow(dead_code)]
    Stalled(usize),
    /// This many KiB, without a `Content-Length`, one KiB every this many
    /// ms (on tokio's clock): a body that arrives slowly, then ends.
    Trickled(usize, u64),
}

impl Reply {
    /// This answer with this body.
    pub fn with(self, payload: Payload) -> Reply {
        Reply { payload, ..self }
    }

    /// This answer, sent this many ms after the request arrived.
    // Only the reqwest-middleware tests use it.
    #[allow(dead_code)]
    pub fn after(self, delay_ms: u64) -> Reply {
        Reply { delay_ms, ..self }
    }
}

/// A scripted status.
pub fn status(status: u16) -> Reply {
    Reply { status, retry_after: None, payload: Payload::Answer, delay_ms: 0 }
}

/// A 429 with this `Retry-After` (a `\n` in it separates two lines).
pub fn throttled(retry_after: &'static str) -> Reply {
    Reply { status: 429, retry_after: Some(retry_after), payload: Payload::Answer, delay_ms: 0 }
}

/// A 503 with this `Retry-After`.
pub fn unavailable(retry_after: &'static str) -> Reply {
    Reply { status: 503, retry_after: Some(retry_after), payload: Payload::Answer, delay_ms: 0 }
}

/// A request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub key: Option<String>,
    pub body: Bytes,
    /// When it arrived, on tokio's clock (virtual under a paused clock).
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
    seen: Mutex<Vec<Seen>>,
    /// Charge id per idempotency key.
    charged_keys: Mutex<HashMap<String, u64>>,
    charges_made: AtomicU64,
    deduplicated: AtomicU64,
    /// TCP connections accepted.
    connections: Arc<AtomicUsize>,
}

/// A running server.
pub struct Server {
    pub addr: SocketAddr,
    inner: Arc<Inner>,
}

impl Server {
    /// Starts a server whose paths answer from these scripts.
    pub async fn start(scripts: &[(&str, &[Reply])]) -> Server {
        let inner = Arc::new(Inner::default());
        {
            let mut map = inner.scripts.lock().unwrap();
            for (path, replies) in scripts {
                map.insert((*path).to_owned(), replies.iter().copied().collect());
            }
        }
        let app = Router::new().fallback(answer).with_state(inner.clone());
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = inner.connections.clone();
        // TCP_NODELAY: each chunk of a body goes out as written. With
        // Nagle's algorithm, a chunk smaller than a segment waits for the
        // ACK of what was sent before it; on a kept-alive connection the
        // client's kernel delays that ACK (40 ms on Linux), so a trickled
        // body's chunks went out together, only as it ended.
        let listener = listener.tap_io(move |tcp| {
            connections.fetch_add(1, Ordering::SeqCst);
            tcp.set_nodelay(true).unwrap();
        });
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { addr, inner }
    }

    /// The absolute URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests to `path`, in arrival order.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().iter().filter(|s| s.path == path).cloned().collect()
    }

    /// How many requests reached `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.seen(path).len()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.inner.connections.load(Ordering::SeqCst)
    }

    /// Charges made (a replayed key makes none).
    pub fn charges_made(&self) -> u64 {
        self.inner.charges_made.load(Ordering::SeqCst)
    }

    /// Charge requests answered from an earlier charge with the same key.
    pub fn deduplicated(&self) -> u64 {
        self.inner.deduplicated.load(Ordering::SeqCst)
    }
}

async fn answer(State(inner): State<Arc<Inner>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let path = uri.path().to_owned();
    let key = headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let nth = {
        let mut seen = inner.seen.lock().unwrap();
        seen.push(Seen { path: path.clone(), key: key.clone(), body, at: Instant::now() });
        seen.iter().filter(|s| s.path == path).count()
    };
    let reply =
        inner.scripts.lock().unwrap().get_mut(&path).and_then(VecDeque::pop_front).unwrap_or(status(200));
    if reply.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(reply.delay_ms)).await;
    }
    let text = if path == "/charges" {
        // The charge is made (or found) before the status is decided: a
        // scripted failure is an answer lost after the charge.
        let id = match key {
            Some(key) => {
                let mut charged = inner.charged_keys.lock().unwrap();
                match charged.get(&key) {
                    Some(&id) => {
                        inner.deduplicated.fetch_add(1, Ordering::SeqCst);
                        id
                    }
                    None => {
                        let id = inner.charges_made.fetch_add(1, Ordering::SeqCst) + 1;
                        charged.insert(key, id);
                        id
                    }
                }
            }
            None => inner.charges_made.fetch_add(1, Ordering::SeqCst) + 1,
        };
        format!("charge {id}")
    } else {
        format!("answer {nth}")
    };
    let body = match reply.payload {
        Payload::Answer => Body::from(text),
        Payload::Sized(len) => Body::from(vec![b'x'; len]),
        Payload::Chunked(len) => {
            let chunks =
                (0..len).step_by(1024).map(move |at| Ok::<_, Infallible>(vec![b'x'; (len - at).min(1024)]));
            Body::from_stream(futures_util::stream::iter(chunks))
        }
        Payload::Endless => Body::from_stream(futures_util::stream::repeat(Ok::<_, Infallible>(
            Bytes::from_static(&[b'x'; 8192]),
        ))),
        Payload::Stalled(len) => Body::from_stream(
            futures_util::stream::iter([Ok::<_, Infallible>(vec![b'x'; len])])
                .chain(futures_util::stream::pending()),
        ),
        Payload::Trickled(kib, every) => {
            Body::from_stream(futures_util::stream::iter(0..kib).then(move |_| async move {
                tokio::time::sleep(std::time::Duration::from_millis(every)).await;
                Ok::<_, Infallible>(vec![b'x'; 1024])
            }))
        }
    };
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), body).into_response();
    if let Some(retry_after) = reply.retry_after {
        // A `\n` separates header lines: `"1\n2"` sends the field twice.
        for line in retry_after.split('\n') {
            response.headers_mut().append(header::RETRY_AFTER, line.parse().unwrap());
        }
    }
    response
}
