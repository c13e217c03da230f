//! The live engine behind the endpoint, seen from async code.
//!
//! [`kvw_engine::live::LiveEngine`] runs the PD cluster on its own thread and
//! answers through a callback; [`EngineService::complete`] turns that into a
//! future with a deadline, so a handler never blocks the async runtime.

use std::time::Duration;

use std::sync::atomic::{AtomicU64, Ordering};

use kvw_engine::live::{
    BootstrapFields, LateWrite, LiveAnswer, LiveConfig, LiveEngine, PrefixCacheMode, Submit,
};
use kvw_engine::sim::Role;
use kvw_evidence::{Fix, PoisonMode, Scale};

/// The live cluster's shape, as `kvw serve --openai` flags set it.
#[derive(Debug, Clone)]
pub struct ClusterShape {
    pub context_len: u64,
    pub prefill_pool_tokens: u64,
    pub decode_pool_tokens: u64,
    pub page_size: u32,
    pub fixes: Vec<Fix>,
    pub prefix_cache: PrefixCacheMode,
    /// Seconds decode waits for a handoff before answering 500.
    pub waiting_timeout_s: u64,
    pub early_reject: bool,
    /// Real microseconds per virtual microsecond of the cluster's clock.
    pub clock_scale: u64,
    /// The transfer fault of SGLang #24527 (`--late-write-ms`), if any.
    pub late_write: Option<LateWrite>,
    /// The worker this process is of a split pair (`kvw serve --role`);
    /// `None` runs the whole cluster.
    pub role: Option<Role>,
}

impl Default for ClusterShape {
    /// Small pools so an over-pool prompt is a few KiB: context 8,192,
    /// prefill pool 4,096, decode pool 32,768 tokens (decode larger than
    /// prefill, as in the incident).
    fn default() -> Self {
        ClusterShape {
            context_len: 8192,
            prefill_pool_tokens: 4096,
            decode_pool_tokens: 32768,
            page_size: 16,
            fixes: Vec::new(),
            prefix_cache: PrefixCacheMode::Off,
            waiting_timeout_s: 1,
            early_reject: true,
            clock_scale: 2,
            late_write: None,
            role: None,
        }
    }
}

/// The engine behind the endpoint.
pub struct EngineService {
    engine: LiveEngine,
    pub shape: ClusterShape,
    next_handle: AtomicU64,
}

/// Aborts its request in the cluster when dropped armed: the handler's
/// future is dropped when the client's connection closes (or the request
/// timed out), and the cluster must hear of it as upstream's
/// `abort_request` does.
struct AbortOnDrop<'a> {
    engine: &'a LiveEngine,
    handle: u64,
    armed: bool,
}

impl Drop for AbortOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.engine.abort(self.handle);
        }
    }
}

/// Why a completion got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceError {
    Stopped,
    TimedOut,
}

impl EngineService {
    /// The whole cluster in this process.
    pub fn start(shape: ClusterShape) -> anyhow::Result<Self> {
        anyhow::ensure!(
            shape.role.is_none(),
            "a worker of a split pair starts with start_split"
        );
        Self::start_with(shape, None)
    }

    /// One worker of a split pair (`shape.role`); a prefill serves its
    /// bootstrap server on `bootstrap`.
    pub fn start_split(
        shape: ClusterShape,
        bootstrap: Option<std::net::TcpListener>,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(shape.role.is_some(), "a split worker needs a role");
        Self::start_with(shape, bootstrap)
    }

    fn start_with(
        shape: ClusterShape,
        bootstrap: Option<std::net::TcpListener>,
    ) -> anyhow::Result<Self> {
        let mut probe = kvw_engine::config::incident_config(
            Scale::Incident,
            &shape.fixes,
            PoisonMode::Off,
            kvw_engine::config::DEFAULT_SEED,
        )?
        .into_inner();
        probe.context_len = shape.context_len;
        probe.prefill_pool_tokens = shape.prefill_pool_tokens;
        probe.decode_pool_tokens = shape.decode_pool_tokens;
        probe.page_size = shape.page_size;
        probe.waiting_timeout_s = shape.waiting_timeout_s;
        probe.max_new_tokens = 1;
        let config = LiveConfig {
            probe: kvw_engine::config::ValidConfig::new(probe)?,
            costs: kvw_engine::live::live_costs(),
            prefix_cache: shape.prefix_cache,
            cache_blocks: 8192,
            early_reject: shape.early_reject,
            clock_scale: shape.clock_scale,
            late_write: shape.late_write,
        };
        let engine = match shape.role {
            None => LiveEngine::start(config),
            Some(role) => LiveEngine::start_split(config, role, bootstrap)?,
        };
        Ok(EngineService {
            engine,
            shape,
            next_handle: AtomicU64::new(1),
        })
    }

    /// Run one completion through the cluster; dropping the future before
    /// it is answered (a client gone) aborts the request in the cluster.
    pub async fn complete(
        &self,
        tenant: &str,
        prompt: Vec<u32>,
        max_new_tokens: u32,
        cache_salt: Option<String>,
        bootstrap: Option<BootstrapFields>,
        deadline: Duration,
    ) -> Result<LiveAnswer, ServiceError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.engine
            .submit(Submit {
                tenant: tenant.to_string(),
                prompt,
                max_new_tokens,
                cache_salt,
                reply: Box::new(move |a| {
                    let _ = tx.send(a);
                }),
                handle: Some(handle),
                bootstrap,
            })
            .map_err(|_| ServiceError::Stopped)?;
        let mut guard = AbortOnDrop {
            engine: &self.engine,
            handle,
            armed: true,
        };
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(a)) => {
                guard.armed = false;
                Ok(a)
            }
            Ok(Err(_)) => Err(ServiceError::Stopped),
            Err(_) => Err(ServiceError::TimedOut),
        }
    }
}
