//! `kvw serve`: preview a built site (or a bundle) on this machine.
//!
//! A deliberately small static server: tower-http's `ServeDir` behind a
//! guard, on a hyper connection loop with timeouts, bound to 127.0.0.1
//! only, so a preview is never exposed to the network by accident.
//! `--for-seconds` makes it stop by itself (for tests and scripts).
//! Responses allow cross-origin GETs so a page elsewhere can embed a replay.
//!
//! What it defends against:
//!
//! * **leaving the folder**: the root is canonicalised at start; a request
//!   path is percent-decoded and refused (404) if any component starts with
//!   a dot (`..`, `.git`, `.env`), holds a backslash or NUL, or is a
//!   symbolic link, at any depth; `/`, the home folder and its ancestors are
//!   refused as roots;
//! * **odd paths**: a request target over [`MAX_TARGET`] bytes gets 414, a
//!   component over 255 bytes 404, never a 500;
//! * **slow or idle clients**: request headers must arrive within the idle
//!   timeout (also between keep-alive requests), a connection lives at most
//!   [`MAX_CONNECTION_SECS`], and at most [`MAX_CONNECTIONS`] are open.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tower_http::cors::{Any, CorsLayer};
use tower_http::services::ServeDir;

/// Longest request target (path and query) served.
pub const MAX_TARGET: usize = 2048;
/// Longest path component (a file name).
const MAX_COMPONENT: usize = 255;
/// Most connections open at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Longest a connection may live, whatever it does.
pub const MAX_CONNECTION_SECS: u64 = 120;

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
    /// Seconds a client has to send a request's headers (also on an idle
    /// keep-alive connection) before it is closed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: u64,
}

/// Run `kvw serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.addr.ip() != Ipv4Addr::LOCALHOST {
        bail!(
            "kvw serve listens on 127.0.0.1 only, not {}",
            args.addr.ip()
        );
    }
    let root = checked_root(&args.dir)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, root))
}

/// The canonical folder to serve, refusing `/`, the home folder and any
/// folder above it.
fn checked_root(dir: &Path) -> anyhow::Result<PathBuf> {
    let meta = std::fs::metadata(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a folder", dir.display());
    }
    let root = dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    if root.parent().is_none() {
        bail!("refusing to serve the file system root {}", root.display());
    }
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = Path::new(&home)
            .canonicalize()
            .unwrap_or_else(|_| PathBuf::from(&home));
        if home.starts_with(&root) {
            bail!(
                "refusing to serve {}: it is the home folder or holds it; give the site folder",
                root.display()
            );
        }
    }
    Ok(root)
}

async fn serve(args: ServeArgs, root: PathBuf) -> anyhow::Result<()> {
    // Read-only and public by nature: let other origins fetch receipts, the
    // key and the wasm, so the embed snippet works from any host page.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::HEAD]);
    let root = Arc::new(root);
    let app = Router::new()
        .fallback_service(ServeDir::new(root.as_path()).append_index_html_on_directories(true))
        .layer(middleware::from_fn_with_state(root.clone(), guard))
        .layer(cors);
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding {}", args.addr))?;
    let local = listener.local_addr()?;
    outln!("serving {} at http://{local}/", root.display())?;

    let idle = Duration::from_secs(args.idle_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let stop = async move {
        match args.for_seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
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
    Ok(())
}

fn status(code: StatusCode) -> Response {
    (code, code.canonical_reason().unwrap_or_default()).into_response()
}

/// Refuse request paths that leave the root, name dotfiles or links, or are
/// too long; turn any server error of the file service into 404.
async fn guard(State(root): State<Arc<PathBuf>>, request: Request<Body>, next: Next) -> Response {
    let target_len = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if target_len > MAX_TARGET {
        return status(StatusCode::URI_TOO_LONG);
    }
    if !allowed(&root, request.uri().path()) {
        return status(StatusCode::NOT_FOUND);
    }
    let response = next.run(request).await;
    if response.status().is_server_error() {
        return status(StatusCode::NOT_FOUND);
    }
    response
}

/// Whether `path` (as in the request, percent-encoded) names something
/// inside `root` reachable without links or dotfiles.
fn allowed(root: &Path, path: &str) -> bool {
    let Ok(decoded) = percent_encoding::percent_decode_str(path).decode_utf8() else {
        return false;
    };
    let mut at = root.to_path_buf();
    for component in decoded.split('/').filter(|c| !c.is_empty()) {
        if component.starts_with('.')
            || component.len() > MAX_COMPONENT
            || component.contains(['\\', '\0'])
        {
            return false;
        }
        at.push(component);
        match at.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => return false,
            Ok(meta) if meta.is_dir() || meta.is_file() => {}
            Ok(_) => return false,
            Err(_) => return false,
        }
    }
    // A folder is served as its index.html: no link there either.
    if at.is_dir() {
        let index = at.join("index.html");
        if let Ok(meta) = index.symlink_metadata() {
            if !meta.is_file() {
                return false;
            }
        }
    }
    true
}
