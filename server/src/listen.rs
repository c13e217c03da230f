//! The connection loop of `kvw serve`: hyper HTTP/1.1 on 127.0.0.1 with
//! timeouts and a connection cap, and a graceful shutdown.
//!
//! Slow or idle clients: request headers must arrive within the idle
//! timeout (also between keep-alive requests), a connection lives at most
//! [`MAX_CONNECTION_SECS`], and at most [`MAX_CONNECTIONS`] are open. On
//! stop (a deadline, Ctrl-C or SIGTERM) the loop stops accepting and lets
//! open connections finish for a bounded time.

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

/// Serve `app` on `listener` until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    idle: Duration,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
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
            drop(stream);
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
        slots.acquire_many(MAX_CONNECTIONS as u32),
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
