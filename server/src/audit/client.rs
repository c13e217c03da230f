//! The audit's HTTP client: HTTP/1.1, plain or over TLS ([`super::tls`]),
//! to the one endpoint given, bounded in request count, total time and
//! concurrency, recording every exchange.
//!
//! Every request goes to the endpoint's own scheme, host and port; paths are
//! fixed by the gates, so no redirect or link can send traffic elsewhere:
//! a redirect is never followed, its `Location` is recorded with the
//! exchange ([`Reply::location`]) and discovery stops on one. API keys
//! travel only in the `Authorization` header and are recorded as tenant
//! labels; a key a server echoes back is replaced by its tenant's label in
//! everything the audit keeps ([`Client::hide_keys`]).
//!
//! A hostile server must not be able to exhaust the auditor: a request the
//! audit builds is at most [`bounds::MAX_REQUEST_BYTES`], a response body is
//! read as a stream and cut at [`bounds::MAX_RESPONSE_BYTES`], and each
//! exchange ends at the request timeout or the audit's own deadline,
//! whichever comes first. What arrived before a cut or a timeout is kept
//! ([`Reply::body`]) and searched like any answer; [`Reply::complete`] says
//! whether the whole body arrived, so a body that did not is never read as
//! an answer that said nothing.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::http::{Method, Request, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use kvw_evidence::audit::Exchange;
use sha2::{Digest, Sha256};

use super::{bounds, AuditError};

/// Characters of a recorded body kept at each end.
const KEEP: usize = 600;

/// Shortest key [`Client::hide_keys`] masks: a shorter one cannot be told
/// apart from ordinary text, and masking it would corrupt every answer.
pub const MIN_MASKED_KEY: usize = 6;

/// Characters of a redirect's `Location` kept.
const MAX_LOCATION_CHARS: usize = 300;

/// Limits of one audit.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_requests: u32,
    pub max_time: Duration,
    pub concurrency: usize,
    pub request_timeout: Duration,
}

/// A tenant of the audit: its label and its key.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub label: String,
    pub key: String,
}

/// How the audit walks away from a request it sends (the lifetime gate): it
/// drops the connection, as a client that gives up does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandon {
    /// This long after sending, whatever has arrived (mid-prefill for a
    /// long prompt).
    After(Duration),
    /// Once the first bytes of the body have arrived (mid-stream), or after
    /// the duration if none has.
    FirstBytes(Duration),
}

/// A response.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status; 0 when no response head came.
    pub status: u16,
    /// The body bytes that arrived (all of them when [`Reply::complete`]).
    pub body: String,
    /// The whole body arrived: its end was read before any time limit and
    /// within [`bounds::MAX_RESPONSE_BYTES`].
    pub complete: bool,
    pub first_byte_us: u64,
    pub total_us: u64,
    /// The `Location` of a 3xx answer, which the audit never follows.
    pub location: Option<String>,
    pub exchange: Exchange,
}

impl Reply {
    /// The body as JSON, if it arrived whole and is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        if !self.complete {
            return None;
        }
        serde_json::from_str(&self.body).ok()
    }

    /// A status and a whole body came back.
    pub fn answered(&self) -> bool {
        self.status != 0 && self.complete
    }

    /// The generated text of a completion or chat completion.
    pub fn text(&self) -> String {
        let Some(v) = self.json() else {
            return String::new();
        };
        let c = &v["choices"][0];
        c["text"]
            .as_str()
            .or_else(|| c["message"]["content"].as_str())
            .unwrap_or_default()
            .to_string()
    }
}

/// The client of one endpoint.
pub struct Client {
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// `http[s]://host:port` and the path prefix before `/v1`.
    origin: String,
    /// Keys to mask in what is kept, with the label that replaces each.
    secrets: Vec<(String, String)>,
    prefix: String,
    pub endpoint: String,
    limits: Limits,
    sent: AtomicU32,
    /// Once discovery succeeded, transport errors become status-0 replies.
    tolerant: std::sync::atomic::AtomicBool,
    started: Instant,
    /// When the audit's time (`--max-seconds`) is up.
    deadline: tokio::time::Instant,
    slots: tokio::sync::Semaphore,
}

impl Client {
    /// A client of `endpoint` (`http[s]://host:port[/prefix][/v1]`) that
    /// trusts the public roots for https.
    pub fn new(endpoint: &str, limits: Limits) -> Result<Client, AuditError> {
        Client::with_roots(endpoint, limits, None)
    }

    /// A client of `endpoint`; over https its certificate must chain to the
    /// PEM certificates of `cacert` when given, else to the public roots.
    pub fn with_roots(
        endpoint: &str,
        limits: Limits,
        cacert: Option<&Path>,
    ) -> Result<Client, AuditError> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|_| AuditError(format!("'{endpoint}' is not a URL")))?;
        let scheme = match uri.scheme_str() {
            Some(s @ ("http" | "https")) => s,
            _ => {
                return Err(AuditError(format!(
                    "'{endpoint}' is not an http:// or https:// URL"
                )))
            }
        };
        if scheme == "http" && cacert.is_some() {
            return Err(AuditError(format!(
                "--cacert is for an https:// endpoint, and {endpoint} is plain http"
            )));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| AuditError(format!("'{endpoint}' has no host")))?;
        if authority.as_str().contains('@') {
            // Not repeated here: the URL holds a secret.
            return Err(AuditError(
                "the endpoint URL carries credentials (user:password@); give keys with --key"
                    .into(),
            ));
        }
        let mut prefix = uri.path().trim_end_matches('/').to_string();
        if prefix.ends_with("/v1") {
            prefix.truncate(prefix.len() - 3);
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(super::tls::client_config(cacert)?)
            .https_or_http()
            .enable_http1()
            .build();
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Client {
            http,
            origin: format!("{scheme}://{authority}"),
            secrets: Vec::new(),
            prefix,
            endpoint: endpoint.to_string(),
            slots: tokio::sync::Semaphore::new(limits.concurrency.max(1)),
            deadline: tokio::time::Instant::now() + limits.max_time,
            limits,
            sent: AtomicU32::new(0),
            tolerant: Default::default(),
            started: Instant::now(),
        })
    }

    /// Mask the keys of `tenants` (those of at least [`MIN_MASKED_KEY`]
    /// characters) by their labels in every body and `Location` kept.
    pub fn hide_keys(&mut self, tenants: &[Tenant]) {
        self.secrets = tenants
            .iter()
            .filter(|t| t.key.chars().count() >= MIN_MASKED_KEY)
            .map(|t| (t.key.clone(), format!("[key of {}]", t.label)))
            .collect();
        // A key inside another is masked after it.
        self.secrets
            .sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
    }

    /// `s` with every known key replaced by its tenant's label.
    pub fn mask(&self, s: &str) -> String {
        let mut out = s.to_string();
        for (key, label) in &self.secrets {
            if out.contains(key.as_str()) {
                out = out.replace(key.as_str(), label);
            }
        }
        out
    }

    /// From now on record a connection error as a reply with status 0
    /// instead of stopping the audit (the endpoint answered discovery).
    pub fn tolerate_resets(&self) {
        self.tolerant.store(true, Ordering::Relaxed);
    }

    /// Requests sent so far.
    pub fn sent(&self) -> u32 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Send one request; a response of any status is `Ok`.
    pub async fn send(
        &self,
        tenant: &Tenant,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Reply, AuditError> {
        self.send_with(tenant, method, path, body, false).await
    }

    /// [`Client::send`] on a connection of its own when `alone` (for
    /// requests a server may answer by breaking the connection).
    pub async fn send_with(
        &self,
        tenant: &Tenant,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
        alone: bool,
    ) -> Result<Reply, AuditError> {
        self.exchange(tenant, method, path, body, alone, None).await
    }

    /// POST `body` to `path` and drop the connection as `abandon` says; the
    /// reply holds what arrived and is never [`Reply::complete`] unless the
    /// whole answer came first.
    pub async fn abandon(
        &self,
        tenant: &Tenant,
        path: &str,
        body: &serde_json::Value,
        abandon: Abandon,
    ) -> Result<Reply, AuditError> {
        let bytes = body.to_string().into_bytes();
        self.exchange(
            tenant,
            Method::POST,
            path,
            Some(&bytes),
            true,
            Some(abandon),
        )
        .await
    }

    async fn exchange(
        &self,
        tenant: &Tenant,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
        alone: bool,
        abandon: Option<Abandon>,
    ) -> Result<Reply, AuditError> {
        if self.started.elapsed() > self.limits.max_time {
            return Err(self.out_of_time());
        }
        if self.sent.fetch_add(1, Ordering::Relaxed) >= self.limits.max_requests {
            return Err(AuditError(format!(
                "the audit needs more than {} requests (--max-requests)",
                self.limits.max_requests
            )));
        }
        let body_bytes = body.map(<[u8]>::to_vec).unwrap_or_default();
        if body_bytes.len() > bounds::MAX_REQUEST_BYTES {
            return Err(AuditError(format!(
                "a {}-byte request is above the audit's {}-byte request cap",
                body_bytes.len(),
                bounds::MAX_REQUEST_BYTES
            )));
        }
        // Waiting for a free slot ends when the audit's time is up; the
        // exchange itself at the request timeout or then, whichever is first.
        let Ok(_slot) = tokio::time::timeout_at(self.deadline, self.slots.acquire()).await else {
            return Err(self.out_of_time());
        };
        let t0 = Instant::now();
        let until = (tokio::time::Instant::now() + self.limits.request_timeout).min(self.deadline);
        // When the audit walks away, if it does.
        let walk = match abandon {
            Some(Abandon::After(d) | Abandon::FirstBytes(d)) => {
                (tokio::time::Instant::now() + d).min(until)
            }
            None => until,
        };
        let url = format!("{}{}{}", self.origin, self.prefix, path);
        let request = Request::builder()
            .method(method.clone())
            .uri(&url)
            .header("authorization", format!("Bearer {}", tenant.key))
            .header("content-type", "application/json")
            .header("connection", if alone { "close" } else { "keep-alive" })
            .body(Full::new(Bytes::from(body_bytes.clone())))
            .map_err(|e| AuditError(format!("cannot build a request to {url}: {e}")))?;
        let exchange =
            |status: u16, response: &str, received: u64, first: u64, total: u64| Exchange {
                index: 0,
                tenant: tenant.label.clone(),
                method: method.to_string(),
                path: path.to_string(),
                request: shorten(&self.mask(&String::from_utf8_lossy(&body_bytes))),
                request_sha256: hex::encode(Sha256::digest(&body_bytes)),
                request_bytes: body_bytes.len() as u64,
                status,
                response: shorten(response),
                response_bytes: received,
                first_byte_us: first,
                total_us: total,
            };
        let no_response = |why: String| {
            let us = t0.elapsed().as_micros() as u64;
            Reply {
                status: 0,
                body: String::new(),
                complete: false,
                first_byte_us: us,
                total_us: us,
                location: None,
                exchange: exchange(0, &why, 0, us, us),
            }
        };
        let response = match tokio::time::timeout_at(walk, self.http.request(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) if self.tolerant.load(Ordering::Relaxed) => {
                // Mid-audit, a reset is the server's answer: record it.
                return Ok(no_response(format!("(no response: {})", source_chain(&e))));
            }
            Ok(Err(e)) => {
                return Err(AuditError(match super::tls::tls_failure(&e) {
                    Some(why) => format!(
                        "TLS with {} failed: {why} (--cacert FILE trusts a private CA)",
                        self.endpoint
                    ),
                    None => format!("cannot reach {}: {}", self.endpoint, source_chain(&e)),
                }))
            }
            Err(_) if tokio::time::Instant::now() >= self.deadline => {
                return Err(self.out_of_time())
            }
            Err(_) if abandon.is_some() && walk < until => {
                let ms = t0.elapsed().as_millis();
                return Ok(no_response(format!(
                    "(abandoned by the audit after {ms} ms, before any response)"
                )));
            }
            Err(_) => return Ok(no_response("(no answer within the request timeout)".into())),
        };
        let first = t0.elapsed().as_micros() as u64;
        let status = response.status().as_u16();
        let location = response
            .status()
            .is_redirection()
            .then(|| response.headers().get(hyper::header::LOCATION))
            .map(|l| {
                l.map(|v| {
                    let to = String::from_utf8_lossy(v.as_bytes());
                    self.mask(&to.chars().take(MAX_LOCATION_CHARS).collect::<String>())
                })
                .unwrap_or_else(|| "(no Location)".into())
            });
        let read = match abandon {
            None => read_capped(response.into_body(), until, false).await,
            Some(Abandon::After(_)) => read_capped(response.into_body(), walk, false).await,
            Some(Abandon::FirstBytes(_)) => read_capped(response.into_body(), walk, true).await,
        };
        let total = t0.elapsed().as_micros() as u64;
        let body = self.mask(&String::from_utf8_lossy(&read.bytes));
        let mut recorded = body.clone();
        if let Some(why) = read.cut {
            recorded.push_str(&format!("…(body cut: {why})"));
        }
        if let Some(to) = &location {
            recorded.push_str(&format!("…(redirect to {to}, not followed)"));
        }
        Ok(Reply {
            exchange: exchange(status, &recorded, read.bytes.len() as u64, first, total),
            status,
            location,
            body,
            complete: read.cut.is_none(),
            first_byte_us: first,
            total_us: total,
        })
    }

    fn out_of_time(&self) -> AuditError {
        AuditError(format!(
            "the audit ran past its {} s limit (--max-seconds)",
            self.limits.max_time.as_secs()
        ))
    }

    /// POST a JSON body.
    pub async fn post(
        &self,
        tenant: &Tenant,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Reply, AuditError> {
        let bytes = body.to_string().into_bytes();
        self.send(tenant, Method::POST, path, Some(&bytes)).await
    }
}

/// A response body as far as it was read.
struct Read {
    bytes: Vec<u8>,
    /// Why reading stopped before the end, if it did.
    cut: Option<&'static str>,
}

/// Read `body` frame by frame until its end, [`bounds::MAX_RESPONSE_BYTES`]
/// or `until` (or its first data when `first_only`), keeping what arrived.
async fn read_capped(
    mut body: hyper::body::Incoming,
    until: tokio::time::Instant,
    first_only: bool,
) -> Read {
    let mut bytes = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(until, body.frame()).await {
            Err(_) => {
                return Read {
                    bytes,
                    cut: Some("no end within the time limit"),
                }
            }
            Ok(None) => return Read { bytes, cut: None },
            Ok(Some(Err(_))) => {
                return Read {
                    bytes,
                    cut: Some("the connection broke"),
                }
            }
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let room = bounds::MAX_RESPONSE_BYTES - bytes.len();
        if data.len() > room {
            bytes.extend_from_slice(&data[..room]);
            return Read {
                bytes,
                cut: Some("longer than the audit's response cap"),
            };
        }
        bytes.extend_from_slice(&data);
        if first_only && !bytes.is_empty() {
            return Read {
                bytes,
                cut: Some("abandoned by the audit after its first bytes"),
            };
        }
    }
}

/// Keep the first and last [`KEEP`] characters of a long body.
fn shorten(s: &str) -> String {
    let n = s.chars().count();
    if n <= 2 * KEEP {
        return s.to_string();
    }
    let head: String = s.chars().take(KEEP).collect();
    let tail: String = s.chars().skip(n - KEEP).collect();
    format!("{head}…[{} characters]…{tail}", n - 2 * KEEP)
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}
