//! `kvw serve`: preview a built site (or a bundle) on this machine, and
//! optionally the live OpenAI-compatible endpoint.
//!
//! Flags parse here; the server lives in `kvw_server`: site serving behind
//! its guard (`kvw_server::site`), the connection loop with timeouts, a
//! connection cap and graceful shutdown (`kvw_server::listen`),
//! `POST /api/probe` (`kvw_server::probe_api`), `/healthz`, and with
//! `--openai` the endpoint on a live engine (`kvw_server::openai`). It binds
//! 127.0.0.1 only, so a preview is never exposed to the network by accident.
//! `--for-seconds` makes it stop by itself (for tests and scripts).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use axum::Router;
use kvw_server::site::checked_root;

/// `kvw serve --dir DIR [--addr 127.0.0.1:PORT]`, `kvw serve --openai --key K ...`
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Folder to serve, e.g. the output of `kvw site build`.
    #[arg(long, required_unless_present_any = ["openai", "role"])]
    pub dir: Option<PathBuf>,
    /// Address to listen on; the host must be 127.0.0.1 (any address with
    /// `--role`, whose router may be on another machine). Port 0 picks a
    /// free port. Default 127.0.0.1:8000, or 127.0.0.1:8080 with `--openai`
    /// or `--role`.
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
    /// keep-alive connection) before it is closed. Default 10, or 75 with
    /// `--role`: longer than the 50 s SGLang's router keeps an idle
    /// connection, so the router closes it first and never reuses one this
    /// side is closing.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub idle_timeout: Option<u64>,
    /// Seconds a client has to send a whole request body (408 past it).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub body_timeout: u64,
    /// Connections open at once; one more is answered 503 and closed.
    #[arg(long, default_value_t = kvw_server::listen::MAX_CONNECTIONS as u64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_connections: u64,
}

/// `kvw serve --openai`: a live multi-tenant endpoint on the engine.
#[derive(Debug, clap::Args)]
pub struct OpenAiArgs {
    /// Serve the OpenAI-compatible endpoint backed by a live engine cluster.
    #[arg(long)]
    pub openai: bool,
    /// Serve one worker of a PD pair, to run behind SGLang's router
    /// (`python -m sglang_router.launch_router --pd-disaggregation --prefill
    /// URL PORT --decode URL`): `prefill` or `decode`. Its OpenAI routes,
    /// `/generate`, `/health`, `/server_info` and `/model_info` take the
    /// router's requests; KV moves over the prefill's bootstrap port.
    #[arg(long, value_parser = ["prefill", "decode"], conflicts_with_all = ["openai", "dir"])]
    pub role: Option<String>,
    /// The prefill's bootstrap port, on the host of `--addr` (give the
    /// router the same number after the prefill's URL). Port 0 picks a free
    /// one and prints it.
    #[arg(long, default_value_t = 8998)]
    pub bootstrap_port: u16,
    /// An API key; its tenant is the key itself (repeatable). Keys also
    /// guard `POST /api/probe`.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// File of `tenant:key` lines.
    #[arg(long)]
    pub keys_file: Option<PathBuf>,
    /// Fix switches of the cluster: none, all, or a comma list.
    #[arg(long, default_value = "none")]
    pub fixes: kvw_evidence::FixSet,
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
    /// Tokens of one KV page.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub page_size: u32,
    /// Fault injection (SGLang #24527): the last page write of every
    /// request's prompt lands this many milliseconds late (cluster time),
    /// even after the request was aborted; without `deferred-release` an
    /// aborted request's pages are reused before it lands.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub late_write_ms: Option<u64>,
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

/// The OpenAI endpoint's router from its flags; `host` is where a prefill
/// worker's bootstrap server listens.
fn openai_router(
    a: &OpenAiArgs,
    keys: kvw_server::tenant_keys::Keys,
    body_time: Duration,
    host: std::net::IpAddr,
) -> anyhow::Result<Router> {
    let fixes = a.fixes.list();
    let prefix_cache =
        kvw_engine::live::PrefixCacheMode::parse(&a.prefix_cache).with_context(|| {
            format!(
                "unknown --prefix-cache '{}' (off, shared or per-tenant)",
                a.prefix_cache
            )
        })?;
    if keys.is_open() {
        errln!("note: no --key given; any bearer key is accepted and names its own tenant");
    }
    let shape = kvw_server::service::ClusterShape {
        context_len: a.context_len,
        prefill_pool_tokens: a.pool_tokens,
        decode_pool_tokens: a.decode_pool_tokens,
        fixes,
        prefix_cache,
        early_reject: a.early_reject == "on",
        waiting_timeout_s: a.waiting_timeout,
        page_size: a.page_size,
        late_write: a.late_write_ms.map(|ms| kvw_engine::live::LateWrite {
            pages: 1,
            us: ms * 1000,
        }),
        role: a.role.as_deref().and_then(kvw_engine::sim::Role::parse),
        ..Default::default()
    };
    let service = match shape.role {
        None => kvw_server::service::EngineService::start(shape)?,
        Some(role) => {
            let bootstrap = (role == kvw_engine::sim::Role::Prefill)
                .then(|| {
                    let at = SocketAddr::new(host, a.bootstrap_port);
                    let l = std::net::TcpListener::bind(at)
                        .with_context(|| format!("binding the bootstrap port {at}"))?;
                    outln!("bootstrap server at {}", l.local_addr()?)?;
                    anyhow::Ok(l)
                })
                .transpose()?;
            kvw_server::service::EngineService::start_split(shape, bootstrap)?
        }
    };
    let mut state = kvw_server::openai::OpenAi::new(service, keys, a.model.clone());
    state.body_time = body_time;
    Ok(kvw_server::openai::router(Arc::new(state)))
}

/// Run `kvw serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let worker = args.openai.role.is_some();
    let addr = args.addr.unwrap_or(if args.openai.openai || worker {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 8080))
    } else {
        SocketAddr::from((Ipv4Addr::LOCALHOST, 8000))
    });
    if addr.ip() != Ipv4Addr::LOCALHOST && !worker {
        bail!("kvw serve listens on 127.0.0.1 only, not {}", addr.ip());
    }
    if !addr.ip().is_loopback() {
        errln!(
            "note: this {} worker listens on {}, reachable from other machines",
            args.openai.role.as_deref().unwrap_or_default(),
            addr.ip()
        );
    }
    let root = args.dir.as_deref().map(checked_root).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, addr, root))
}

async fn serve(args: ServeArgs, addr: SocketAddr, root: Option<PathBuf>) -> anyhow::Result<()> {
    let mut app = match &root {
        Some(root) => kvw_server::site::router(root.clone(), kvw_explorer::csp::policy()),
        None => Router::new(),
    };
    let keys =
        kvw_server::tenant_keys::Keys::load(&args.openai.keys, args.openai.keys_file.as_deref())?;
    let body_time = Duration::from_secs(args.body_timeout);
    let probe_api = kvw_server::probe_api::ProbeApi::new(args.signing_key.clone())
        .with_keys(keys.clone())
        .with_body_time(body_time);
    app = kvw_server::probe_api::router(Arc::new(probe_api)).merge(app);
    if args.openai.openai || args.openai.role.is_some() {
        app = openai_router(&args.openai, keys, body_time, addr.ip())?.merge(app);
    } else {
        app = app.route("/healthz", axum::routing::get(|| async { "ok\n" }));
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    match (&root, args.openai.role.as_deref()) {
        (Some(root), _) => outln!("serving {} at http://{local}/", root.display())?,
        (None, Some(role)) => outln!("serving the PD {role} worker at http://{local}")?,
        (None, None) => outln!("serving the OpenAI endpoint at http://{local}/v1")?,
    }

    let for_seconds = args.for_seconds;
    let stop = async move {
        match for_seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => kvw_server::listen::shutdown_signal().await,
        }
    };
    let limits = kvw_server::listen::Limits {
        idle: Duration::from_secs(args.idle_timeout.unwrap_or(if args.openai.role.is_some() {
            75
        } else {
            10
        })),
        max_connections: args.max_connections as usize,
    };
    kvw_server::listen::serve(listener, app, limits, stop).await;
    Ok(())
}
