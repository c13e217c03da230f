//! The audit's HTTP client: plain HTTP/1.1 to the one endpoint given, bounded
//! in request count, total time and concurrency, recording every exchange.
//!
//! Every request goes to the endpoint's own host and port; paths are fixed
//! by the gates, so no redirect or link can send traffic elsewhere
//! (redirects are not followed). API keys travel only in the
//! `Authorization` header and are recorded as tenant labels.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::http::{Method, Request, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::rt::TokioExecutor;
use kvw_evidence::audit::Exchange;
use sha2::{Digest, Sha256};

use super::AuditError;

/// Characters of a recorded body kept at each end.
const KEEP: usize = 600;

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

/// A response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub first_byte_us: u64,
    pub total_us: u64,
    pub exchange: Exchange,
}

impl Reply {
    /// The body as JSON, if it is.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.body).ok()
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
    http: HyperClient<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    /// `http://host:port` and the path prefix before `/v1`.
    origin: String,
    prefix: String,
    pub endpoint: String,
    limits: Limits,
    sent: AtomicU32,
    /// Once discovery succeeded, transport errors become status-0 replies.
    tolerant: std::sync::atomic::AtomicBool,
    started: Instant,
    slots: tokio::sync::Semaphore,
}

impl Client {
    /// A client of `endpoint` (`http://host:port[/prefix][/v1]`).
    pub fn new(endpoint: &str, limits: Limits) -> Result<Client, AuditError> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|_| AuditError(format!("'{endpoint}' is not a URL")))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(AuditError(format!(
                    "{endpoint}: https is not supported; audit over plain http (a local port or an ssh tunnel)"
                )))
            }
            _ => return Err(AuditError(format!("'{endpoint}' is not an http:// URL"))),
        }
        let authority = uri
            .authority()
            .ok_or_else(|| AuditError(format!("'{endpoint}' has no host")))?;
        let mut prefix = uri.path().trim_end_matches('/').to_string();
        if prefix.ends_with("/v1") {
            prefix.truncate(prefix.len() - 3);
        }
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build_http();
        Ok(Client {
            http,
            origin: format!("http://{authority}"),
            prefix,
            endpoint: endpoint.to_string(),
            slots: tokio::sync::Semaphore::new(limits.concurrency.max(1)),
            limits,
            sent: AtomicU32::new(0),
            tolerant: Default::default(),
            started: Instant::now(),
        })
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
        if self.started.elapsed() > self.limits.max_time {
            return Err(AuditError(format!(
                "the audit ran past its {} s limit (--max-seconds)",
                self.limits.max_time.as_secs()
            )));
        }
        if self.sent.fetch_add(1, Ordering::Relaxed) >= self.limits.max_requests {
            return Err(AuditError(format!(
                "the audit needs more than {} requests (--max-requests)",
                self.limits.max_requests
            )));
        }
        let _slot = self.slots.acquire().await;
        let url = format!("{}{}{}", self.origin, self.prefix, path);
        let body_bytes = body.map(<[u8]>::to_vec).unwrap_or_default();
        let request = Request::builder()
            .method(method.clone())
            .uri(&url)
            .header("authorization", format!("Bearer {}", tenant.key))
            .header("content-type", "application/json")
            .header("connection", if alone { "close" } else { "keep-alive" })
            .body(Full::new(Bytes::from(body_bytes.clone())))
            .map_err(|e| AuditError(format!("cannot build a request to {url}: {e}")))?;
        let t0 = Instant::now();
        let exchange = |status: u16, response: &str, first: u64, total: u64| Exchange {
            index: 0,
            tenant: tenant.label.clone(),
            method: method.to_string(),
            path: path.to_string(),
            request: shorten(&String::from_utf8_lossy(&body_bytes)),
            request_sha256: hex::encode(Sha256::digest(&body_bytes)),
            request_bytes: body_bytes.len() as u64,
            status,
            response: shorten(response),
            response_bytes: response.len() as u64,
            first_byte_us: first,
            total_us: total,
        };
        let timeout = self.limits.request_timeout;
        let response = match tokio::time::timeout(timeout, self.http.request(request)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) if self.tolerant.load(Ordering::Relaxed) => {
                // Mid-audit, a reset is the server's answer: record it.
                let us = t0.elapsed().as_micros() as u64;
                let why = format!("(no response: {})", source_chain(&e));
                return Ok(Reply {
                    status: 0,
                    body: String::new(),
                    first_byte_us: us,
                    total_us: us,
                    exchange: exchange(0, &why, us, us),
                });
            }
            Ok(Err(e)) => {
                return Err(AuditError(format!(
                    "cannot reach {}: {}",
                    self.endpoint,
                    source_chain(&e)
                )))
            }
            Err(_) => {
                let us = t0.elapsed().as_micros() as u64;
                return Ok(Reply {
                    status: 0,
                    body: String::new(),
                    first_byte_us: us,
                    total_us: us,
                    exchange: exchange(0, "(no answer within the request timeout)", us, us),
                });
            }
        };
        let first = t0.elapsed().as_micros() as u64;
        let status = response.status().as_u16();
        let bytes = match tokio::time::timeout(timeout, response.into_body().collect()).await {
            Ok(Ok(b)) => b.to_bytes(),
            _ => Bytes::new(),
        };
        let total = t0.elapsed().as_micros() as u64;
        let body = String::from_utf8_lossy(&bytes).into_owned();
        Ok(Reply {
            exchange: exchange(status, &body, first, total),
            status,
            body,
            first_byte_us: first,
            total_us: total,
        })
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
