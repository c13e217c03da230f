//! Site serving: a built site folder behind a guard.
//!
//! tower-http's `ServeDir` serves the files; [`guard`] runs first and
//! refuses what would leave the folder. What it defends against:
//!
//! * **leaving the folder**: the root is canonicalised at start; a request
//!   path is percent-decoded and refused (404) if any component starts with
//!   a dot (`..`, `.git`, `.env`), holds a backslash or NUL, or is a
//!   symbolic link, at any depth; `/`, the home folder and its ancestors are
//!   refused as roots;
//! * **odd paths**: a request target over [`MAX_TARGET`] bytes gets 414, a
//!   component over 255 bytes 404, never a 500.
//!
//! A file with a precompressed twin (`x.js.br`, `x.js.gz`) is answered with
//! the twin when the client accepts that encoding and every twin is a
//! regular file no older than the file itself; a file changed after the
//! build (or a twin that is a link) is sent as it is, so one URL never
//! serves two different contents. Pages are sent with
//! `Cache-Control: no-cache`, other files with a short max-age. Responses
//! allow cross-origin GETs so a page elsewhere can embed a replay, and carry
//! the site's Content-Security-Policy (the one its pages also state in a
//! `<meta>` element; the site builder owns it and the caller passes it in).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower_http::cors::{Any, CorsLayer};
use tower_http::services::ServeDir;

/// Longest request target (path and query) served.
pub const MAX_TARGET: usize = 2048;
/// Longest path component (a file name).
const MAX_COMPONENT: usize = 255;

/// The site folder's router: files of `root` behind the guard, every
/// response with `Content-Security-Policy: csp`.
pub fn router(root: PathBuf, csp: &'static str) -> Router {
    // Read-only and public by nature: let other origins fetch receipts, the
    // key and the wasm, so the embed snippet works from any host page.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::GET, Method::HEAD]);
    let root = Arc::new(root);
    Router::new()
        .fallback_service(
            ServeDir::new(root.as_path())
                .append_index_html_on_directories(true)
                .precompressed_br()
                .precompressed_gzip(),
        )
        .layer(middleware::from_fn_with_state(root.clone(), guard))
        .layer(middleware::map_response(
            move |mut response: Response| async move {
                let policy = HeaderValue::from_static(csp);
                response
                    .headers_mut()
                    .insert(header::CONTENT_SECURITY_POLICY, policy);
                response
            },
        ))
        .layer(cors)
}

/// The canonical folder to serve, refusing `/`, the home folder and any
/// folder above it.
pub fn checked_root(dir: &Path) -> anyhow::Result<PathBuf> {
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

fn status(code: StatusCode) -> Response {
    (code, code.canonical_reason().unwrap_or_default()).into_response()
}

/// Refuse request paths that leave the root, name dotfiles or links, or are
/// too long; turn any server error of the file service into 404.
async fn guard(
    State(root): State<Arc<PathBuf>>,
    mut request: Request<Body>,
    next: Next,
) -> Response {
    let target_len = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if target_len > MAX_TARGET {
        return status(StatusCode::URI_TOO_LONG);
    }
    let Some(file) = resolved(&root, request.uri().path()) else {
        return status(StatusCode::NOT_FOUND);
    };
    if !twins_current(&file) {
        request.headers_mut().remove(header::ACCEPT_ENCODING);
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

/// The precompressed twins the file service may answer for a file.
const TWINS: [&str; 2] = ["br", "gz"];

/// Whether every precompressed twin of `file` that exists is a regular file
/// at least as new as `file` (the site builder writes twins after their
/// file). A file edited after the build, or a twin that is a link or a
/// folder, makes the file be served as it is.
fn twins_current(file: &Path) -> bool {
    let Ok(made) = file.metadata().and_then(|m| m.modified()) else {
        return true;
    };
    TWINS.iter().all(|ext| {
        let mut name = file.as_os_str().to_owned();
        name.push(".");
        name.push(ext);
        match Path::new(&name).symlink_metadata() {
            Err(_) => true,
            Ok(meta) => meta.is_file() && meta.modified().is_ok_and(|t| t >= made),
        }
    })
}

/// What `path` (as in the request, percent-encoded) names inside `root`
/// (a folder's `index.html` for a folder), when it is reachable without
/// links or dotfiles.
fn resolved(root: &Path, path: &str) -> Option<PathBuf> {
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    let mut at = root.to_path_buf();
    for component in decoded.split('/').filter(|c| !c.is_empty()) {
        if component.starts_with('.')
            || component.len() > MAX_COMPONENT
            || component.contains(['\\', '\0'])
        {
            return None;
        }
        at.push(component);
        match at.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => return None,
            Ok(meta) if meta.is_dir() || meta.is_file() => {}
            Ok(_) | Err(_) => return None,
        }
    }
    // A folder is served as its index.html: no link there either.
    if at.is_dir() {
        let index = at.join("index.html");
        if let Ok(meta) = index.symlink_metadata() {
            if !meta.is_file() {
                return None;
            }
        }
        return Some(index);
    }
    Some(at)
}
