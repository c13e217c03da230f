//! `kvw serve`: preview a built site (or a bundle) on this machine.
//!
//! A deliberately small static server: axum with tower-http's `ServeDir`,
//! bound to 127.0.0.1 only, so a preview is never exposed to the network by
//! accident. `--for-seconds` makes it stop by itself (for tests and scripts).
//! Responses allow cross-origin GETs so a page elsewhere can embed a replay.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::http::Method;
use axum::Router;
use tower_http::cors::{Any, CorsLayer};
use tower_http::services::ServeDir;

/// `kvw serve --dir DIR [--addr 127.0.0.1:PORT]`
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Folder to serve, e.g. the output of `kvw site build`.
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to listen on; the host must be 127.0.0.1. Port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub addr: SocketAddr,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub for_seconds: Option<u64>,
}

/// Run `kvw serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.addr.ip() != Ipv4Addr::LOCALHOST {
        bail!(
            "kvw serve listens on 127.0.0.1 only, not {}",
            args.addr.ip()
        );
    }
    if !args.dir.is_dir() {
        bail!("{} is not a folder", args.dir.display());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    // Read-only and public by nature: let other origins fetch receipts, the
    // key and the wasm, so the embed snippet works from any host page.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::HEAD]);
    let app = Router::new()
        .fallback_service(ServeDir::new(&args.dir).append_index_html_on_directories(true))
        .layer(cors);
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let local = listener.local_addr()?;
    println!("serving {} at http://{local}/", args.dir.display());
    let limit = args.for_seconds;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            match limit {
                Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        })
        .await
        .context("serving")?;
    Ok(())
}
