//! What the endpoint tells about itself: model, context length, KV pool.
//!
//! `GET /v1/models` must answer an OpenAI model list, or the endpoint is not
//! compatible and the audit stops. The pool comes from SGLang's
//! `/get_server_info` (`max_total_num_tokens`) or vLLM's `/metrics`
//! (`vllm:cache_config_info`: `num_gpu_blocks` × `block_size`), else from
//! `--pool-tokens`; the context from `max_model_len` (vLLM), SGLang's
//! `context_length`, or `--context-len`.
//!
//! A number above [`bounds::MAX_TOKENS`] (or zero) is not believed: the fact
//! stays unknown and its source says why, so the gates that need it are
//! inconclusive with that reason instead of building absurd prompts.

use hyper::http::Method;

use super::{bounds, AuditError, AuditOptions, Client, Tenant};

/// Discovered facts and where each came from.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Discovered {
    pub model: String,
    pub context_len: Option<u64>,
    pub context_source: String,
    pub pool_tokens: Option<u64>,
    pub pool_source: String,
}

pub async fn discover(
    client: &Client,
    tenants: &[Tenant],
    opts: &AuditOptions,
) -> Result<Discovered, AuditError> {
    let ep = &opts.endpoint;
    let models = client
        .send(&tenants[0], Method::GET, "/v1/models", None)
        .await?;
    if models.status == 401 || models.status == 403 {
        return Err(AuditError(format!(
            "{ep} refused the first --key ({}); check the keys",
            models.status
        )));
    }
    if models.status == 0 {
        return Err(AuditError(format!(
            "{ep} gave no answer to GET /v1/models {}",
            models.exchange.response
        )));
    }
    if let Some(to) = &models.location {
        return Err(AuditError(format!(
            "{ep}: GET /v1/models answered {} redirecting to {to}; the audit follows no redirect (give the endpoint's own URL)",
            models.status
        )));
    }
    let list = models.json().filter(|v| v["data"].is_array());
    let Some(list) = list.filter(|_| models.status == 200) else {
        return Err(AuditError(format!(
            "{ep} is not an OpenAI-compatible endpoint: GET /v1/models answered {} without a model list",
            models.status
        )));
    };
    let first = &list["data"][0];
    let model = match (&opts.model, first["id"].as_str()) {
        (Some(m), _) => m.clone(),
        (None, Some(id)) => id.to_string(),
        (None, None) => return Err(AuditError(format!("{ep} lists no model; pass --model"))),
    };
    let mut context_len = first["max_model_len"].as_u64();
    let mut context_source = "GET /v1/models max_model_len".to_string();
    let mut pool_tokens = None;
    let mut pool_source = String::new();
    if let Ok(info) = client
        .send(&tenants[0], Method::GET, "/get_server_info", None)
        .await
    {
        if let Some(v) = info.json().filter(|_| info.status == 200) {
            if let Some(p) = v["max_total_num_tokens"].as_u64() {
                pool_tokens = Some(p);
                pool_source = "GET /get_server_info max_total_num_tokens".into();
            }
            if context_len.is_none() {
                if let Some(c) = v["context_length"].as_u64() {
                    context_len = Some(c);
                    context_source = "GET /get_server_info context_length".into();
                }
            }
        }
    }
    if pool_tokens.is_none() {
        if let Ok(m) = client
            .send(&tenants[0], Method::GET, "/metrics", None)
            .await
        {
            if m.status == 200 {
                if let Some(p) = vllm_pool(&m.body) {
                    pool_tokens = Some(p);
                    pool_source = "GET /metrics vllm:cache_config_info".into();
                }
            }
        }
    }
    if let Some(p) = opts.pool_tokens {
        pool_tokens = Some(p);
        pool_source = "--pool-tokens".into();
    }
    if let Some(c) = opts.context_len {
        context_len = Some(c);
        context_source = "--context-len".into();
    }
    if context_len.is_none() {
        context_source = "unknown".into();
    }
    if pool_tokens.is_none() {
        pool_source = "unknown".into();
    }
    let (context_len, context_source) = belief(context_len, context_source);
    let (pool_tokens, pool_source) = belief(pool_tokens, pool_source);
    Ok(Discovered {
        model,
        context_len,
        context_source,
        pool_tokens,
        pool_source,
    })
}

/// A discovered size and its source, or unknown with the reason it is not
/// believed.
fn belief(value: Option<u64>, source: String) -> (Option<u64>, String) {
    match value.map(|v| bounds::believable(v, &source)) {
        Some(Ok(v)) => (Some(v), source),
        Some(Err(why)) => {
            tracing::warn!(%why, "discovered size refused");
            (None, why)
        }
        None => (None, source),
    }
}

/// vLLM's KV pool from its Prometheus text: the `kv_cache_size_tokens`
/// label where the release has it, else `num_gpu_blocks` × `block_size`.
fn vllm_pool(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))?;
    let label = |name: &str| -> Option<u64> {
        let at = line.find(&format!("{name}=\""))? + name.len() + 2;
        line[at..].split('"').next()?.parse().ok()
    };
    if let Some(tokens) = label("kv_cache_size_tokens") {
        return Some(tokens);
    }
    // An overflowing product is as absurd as a huge one: saturate, and let
    // the bound refuse it.
    Some(label("num_gpu_blocks")?.saturating_mul(label("block_size")?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn vllm_cache_config_gives_the_pool() {
        let text = "# HELP x\nvllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",num_gpu_blocks=\"2048\"} 1.0\n";
        assert_eq!(super::vllm_pool(text), Some(32768));
        assert_eq!(super::vllm_pool("nothing"), None);
        let sized = "vllm:cache_config_info{block_size=\"16\",kv_cache_size_tokens=\"5000\",num_gpu_blocks=\"2048\"} 1.0\n";
        assert_eq!(super::vllm_pool(sized), Some(5000));
        let huge = "vllm:cache_config_info{block_size=\"18446744073709551615\",num_gpu_blocks=\"2\"} 1.0\n";
        assert_eq!(super::vllm_pool(huge), Some(u64::MAX));
    }
}
