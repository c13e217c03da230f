//! The connection loop of `kvw serve`: hyper HTTP/1.1 on 127.0.0.1 with
//! timeouts and a connection cap, and a graceful shutdown.
//!
//! Slow or idle clients: request headers must arrive within the idle
//! timeout (also between keep-alive requests), a body within the guard's
//! time limit ([`crate::guard`]), a connection lives at most
//! [`MAX_CONNECTION_SECS`], and at most [`Limits::max_connections`]
//! (default [`MAX_CONNECTIONS`]) are open: one more is answered
//! `503 Service Unavailable` and closed, so a full server says so rather
//! than dropping the connection unanswered. On stop (a deadline, Ctrl-C or
//! SIGTERM) the loop stops accepting and lets open connections finish for a
//! bounded time.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;

/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest a connection may live, whatever it does.
pub const MAX_CONNECTION_SECS: u64 = 120;
/// Connections being told "503" at once; past that a connection over the
/// cap is closed unanswered.
const MAX_REFUSING: usize = 64;
/// Longest the 503 answer may take to write.
const REFUSE_WRITE: Duration = Duration::from_secs(1);

/// The answer to a connection over the cap.
fn full_answer() -> Vec<u8> {
    let body = crate::api_error::ApiError::new(
        hyper::StatusCode::SERVICE_UNAVAILABLE,
        "the server is at its connection limit; retry shortly",
    )
    .body()
    .to_string();
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The connection loop's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time a client has to send a request's headers.
    pub idle: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

/// Serve `app` on `listener` until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let idle = limits.idle;
    let max_connections = limits.max_connections.max(1);
    let slots = Arc::new(tokio::sync::Semaphore::new(max_connections));
    let refusing = Arc::new(tokio::sync::Semaphore::new(MAX_REFUSING));
    tokio::pin!(stop);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // A failed accept (out of descriptors, reset) is the client's
                // problem; wait a little and go on.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            if let Ok(refusal) = refusing.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    let mut stream = stream;
                    let _ = tokio::time::timeout(REFUSE_WRITE, async {
                        use tokio::io::AsyncWriteExt as _;
                        let _ = stream.write_all(&full_answer()).await;
                        let _ = stream.shutdown().await;
                    })
                    .await;
                    drop(refusal);
                });
            }
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle)
                .max_buf_size(128 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            let _ =
                tokio::time::timeout(Duration::from_secs(MAX_CONNECTION_SECS), connection).await;
            drop(permit);
        });
    }
    // Graceful shutdown: stop accepting, let open connections finish (an
    // idle keep-alive one closes at its idle timeout), for a bounded time.
    tracing::info!("shutting down");
    let _ = tokio::time::timeout(
        idle.min(Duration::from_secs(10)),
        slots.acquire_many(max_connections as u32),
    )
    .await;
}

/// Ctrl-C, or SIGTERM on Unix.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
