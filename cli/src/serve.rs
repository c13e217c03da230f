//! `kvw serve`: preview a built site (or a bundle) on this machine.
//!
//! A deliberately small static server: tower-http's `ServeDir` behind a
//! guard, on a hyper connection loop with timeouts, bound to 127.0.0.1
//! only, so a preview is never exposed to the network by accident.
//! `--for-seconds` makes it stop by itself (for tests and scripts).
//! Responses allow cross-origin GETs so a page elsewhere can embed a replay.
//! A file with a precompressed twin (`x.js.br`, `x.js.gz`) is answered with
//! the twin when the client accepts that encoding; pages are sent with
//! `Cache-Control: no-cache`, other files with a short max-age. With
//! `--openai` the same server carries the OpenAI endpoint
//! (`kvw_server::openai`); it always carries `POST /api/probe`
//! (`kvw_server::probe_api`) and `/healthz`, and shuts down gracefully.
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
use axum::http::{header, HeaderValue, Method, StatusCode};
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

/// `kvw serve --dir DIR [--addr 127.0.0.1:PORT]`, `kvw serve --openai --key K ...`
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Folder to serve, e.g. the output of `kvw site build`.
    #[arg(long, required_unless_present = "openai")]
    pub dir: Option<PathBuf>,
    /// Address to listen on; the host must be 127.0.0.1. Port 0 picks a free
    /// port. Default 127.0.0.1:8000, or 127.0.0.1:8080 with `--openai`.
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    #[command(flatten)]
    pub openai: OpenAiArgs,
    /// Key that signs the receipts of `POST /api/probe` (default: the local
    /// key, loaded on the first probe).
    #[arg(long)]
    pub signing_key: Option<PathBuf>,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub for_seconds: Option<u64>,
    /// Seconds a client has to send a request's headers (also on an idle
    /// keep-alive connection) before it is closed.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: u64,
}

/// `kvw serve --openai`: a live multi-tenant endpoint on the engine.
#[derive(Debug, clap::Args)]
pub struct OpenAiArgs {
    /// Serve the OpenAI-compatible endpoint backed by a live engine cluster.
    #[arg(long)]
    pub openai: bool,
    /// An API key; its tenant is the key itself (repeatable).
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// File of `tenant:key` lines.
    #[arg(long)]
    pub keys_file: Option<PathBuf>,
    /// Fix switches of the cluster: none, all, or a comma list.
    #[arg(long, default_value = "none")]
    pub fixes: String,
    /// Prefix cache: off, shared (across tenants) or per-tenant.
    #[arg(long, default_value = "off")]
    pub prefix_cache: String,
    /// Model name the endpoint answers to.
    #[arg(long, default_value = "kvw-echo")]
    pub model: String,
    /// Context length in tokens (one token per character).
    #[arg(long, default_value_t = 8192)]
    pub context_len: u64,
    /// Prefill KV pool in tokens.
    #[arg(long, default_value_t = 4096)]
    pub pool_tokens: u64,
    /// Decode KV pool in tokens.
    #[arg(long, default_value_t = 32768)]
    pub decode_pool_tokens: u64,
    /// model-assumption `early-reject`: relay prefill's 4xx at once (on) or
    /// wait for decode's answer like upstream's PD router (off).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub early_reject: String,
    /// Seconds decode waits for a KV handoff before answering 500
    /// (upstream's default is 300; the live cluster's pools are small).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub waiting_timeout: u64,
}

/// The OpenAI endpoint's router from its flags.
fn openai_router(a: &OpenAiArgs) -> anyhow::Result<Router> {
    let fixes = kvw_engine::config::parse_fixes(&a.fixes).map_err(anyhow::Error::msg)?;
    let prefix_cache =
        kvw_engine::live::PrefixCacheMode::parse(&a.prefix_cache).with_context(|| {
            format!(
                "unknown --prefix-cache '{}' (off, shared or per-tenant)",
                a.prefix_cache
            )
        })?;
    let keys = kvw_server::keys::Keys::load(&a.keys, a.keys_file.as_deref())?;
    let shape = kvw_server::service::ClusterShape {
        context_len: a.context_len,
        prefill_pool_tokens: a.pool_tokens,
        decode_pool_tokens: a.decode_pool_tokens,
        fixes,
        prefix_cache,
        early_reject: a.early_reject == "on",
        waiting_timeout_s: a.waiting_timeout,
        ..Default::default()
    };
    let service = kvw_server::service::EngineService::start(shape)?;
    let state = kvw_server::openai::OpenAi::new(service, keys, a.model.clone());
    Ok(kvw_server::openai::router(Arc::new(state)))
}

/// Run `kvw serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let addr = args.addr.unwrap_or(if args.openai.openai {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 8080))
    } else {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 8000))
    });
    if addr.ip() != Ipv4Addr::LOCALHOST {
        bail!("kvw serve listens on 127.0.0.1 only, not {}", addr.ip());
    }
    let root = args.dir.as_deref().map(checked_root).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, addr, root))
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

async fn serve(args: ServeArgs, addr: SocketAddr, root: Option<PathBuf>) -> anyhow::Result<()> {
    let mut app = Router::new();
    if let Some(root) = &root {
        // Read-only and public by nature: let other origins fetch receipts, the
        // key and the wasm, so the embed snippet works from any host page.
        let cors = CorsLayer::new()
            .allow_origin(Any)
            .allow_methods([Method::GET, Method::HEAD]);
        let root = Arc::new(root.clone());
        app = app
            .fallback_service(
                ServeDir::new(root.as_path())
                    .append_index_html_on_directories(true)
                    .precompressed_br()
                    .precompressed_gzip(),
            )
            .layer(middleware::from_fn_with_state(root.clone(), guard))
            .layer(cors);
    }
    let probe_api = kvw_server::probe_api::ProbeApi::new(args.signing_key.clone());
    app = kvw_server::probe_api::router(Arc::new(probe_api)).merge(app);
    if args.openai.openai {
        app = openai_router(&args.openai)?.merge(app);
    } else {
        app = app.route("/healthz", axum::routing::get(|| async { "ok\n" }));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    match &root {
        Some(root) => outln!("serving {} at http://{local}/", root.display())?,
        None => outln!("serving the OpenAI endpoint at http://{local}/v1")?,
    }

    let idle = Duration::from_secs(args.idle_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let for_seconds = args.for_seconds;
    let stop = async move {
        match for_seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => shutdown_signal().await,
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
    // Graceful shutdown: stop accepting, let open connections finish (an
    // idle keep-alive one closes at its idle timeout), for a bounded time.
    tracing::info!("shutting down");
    let _ = tokio::time::timeout(
        idle.min(Duration::from_secs(10)),
        slots.acquire_many(MAX_CONNECTIONS as u32),
    )
    .await;
    Ok(())
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
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
    let html = {
        let p = request.uri().path();
        p.ends_with('/') || p.ends_with(".html")
    };
    let mut response = next.run(request).await;
    if response.status().is_server_error() {
        return status(StatusCode::NOT_FOUND);
    }
    // Pages revalidate on every visit; other files may be reused briefly.
    // A precompressed twin (`.br`, `.gz`) makes the answer vary by encoding.
    let cache = if html {
        "no-cache"
    } else {
        "public, max-age=300"
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if !headers.contains_key(header::VARY) {
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
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
