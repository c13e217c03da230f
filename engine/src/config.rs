//! Probe configuration: presets for the two scales, and validation.
//!
//! A [`ProbeConfig`] (defined in `kvw-evidence`, because receipts record it)
//! fully determines a run. This module builds the presets, derives the input
//! cap, and refuses configurations that make no sense with one clear message.

use kvw_evidence::{ChecksumScope, Fix, FreeListPolicy, PageTail, PoisonMode, ProbeConfig, Scale};

use crate::attention::MAX_POSITIONS;

/// A configuration that cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("page size must be at least 1 token (got 0)")]
    ZeroPageSize,
    #[error("page size {0} is larger than 1024 tokens")]
    PageTooLarge(u32),
    #[error("{pool} pool of {tokens} tokens is smaller than one page of {page} tokens")]
    PoolSmallerThanPage {
        pool: &'static str,
        tokens: u64,
        page: u32,
    },
    #[error("{pool} pool of {tokens} tokens exceeds the {MAX_POOL_TOKENS}-token limit (twice the positions the model can address)")]
    PoolTooLarge { pool: &'static str, tokens: u64 },
    #[error("seed {0} exceeds 2^53 - 1, the largest integer a receipt records exactly")]
    SeedTooLarge(u64),
    #[error("context length must be at least 16 tokens (got {0})")]
    ContextTooSmall(u64),
    #[error("context length {0} exceeds the {MAX_POSITIONS} positions the model can address")]
    ContextTooLarge(u64),
    #[error("max_new_tokens must be between 1 and 4096 (got {0})")]
    MaxNewTokens(u32),
    #[error("fixes must be listed once each in canonical order")]
    FixOrder,
}

/// Largest pool, in tokens: twice what the model can address (2^21). The
/// incident's pools (681,280 and 1,048,576 tokens) fit; anything larger
/// holds pages no request can reach, and an absurd size would only make the
/// pool allocation fail.
pub const MAX_POOL_TOKENS: u64 = 2 * MAX_POSITIONS;

/// Largest seed: receipts are canonical JSON (RFC 8785), whose numbers are
/// exact up to 2^53 - 1.
pub const MAX_SEED: u64 = (1 << 53) - 1;

/// Default seed of every probe.
pub const DEFAULT_SEED: u64 = 2026;

/// Preset for the incident probe at `scale` with the given switches.
pub fn incident_config(
    scale: Scale,
    fixes: &[Fix],
    poison_on_free: PoisonMode,
    seed: u64,
) -> Result<ProbeConfig, ConfigError> {
    let (context_len, prefill_pool_tokens, decode_pool_tokens, page_size, max_new_tokens) =
        match scale {
            // 8 reserved pages of 16 tokens for a 128-token prompt.
            Scale::Walkthrough => (256, 112, 256, 16, 24),
            // The disclosed production numbers.
            Scale::Incident => (1_048_576, 681_280, 1_048_576, 64, 20),
        };
    let mut fixes = fixes.to_vec();
    fixes.sort();
    fixes.dedup();
    let c = ProbeConfig {
        scale,
        context_len,
        prefill_pool_tokens,
        decode_pool_tokens,
        page_size,
        free_list: FreeListPolicy::Lifo,
        fixes,
        poison_on_free,
        checksum_scope: ChecksumScope::Reserved,
        page_tail: PageTail::Carried,
        seed,
        waiting_timeout_s: 300,
        max_new_tokens,
    };
    validate(&c)?;
    Ok(c)
}

/// Set the prefill pool size.
pub fn with_prefill_pool(mut c: ProbeConfig, tokens: u64) -> Result<ProbeConfig, ConfigError> {
    c.prefill_pool_tokens = tokens;
    validate(&c)?;
    Ok(c)
}

/// Refuse configurations that cannot run.
pub fn validate(c: &ProbeConfig) -> Result<(), ConfigError> {
    if c.page_size == 0 {
        return Err(ConfigError::ZeroPageSize);
    }
    if c.page_size > 1024 {
        return Err(ConfigError::PageTooLarge(c.page_size));
    }
    for (pool, tokens) in [
        ("prefill", c.prefill_pool_tokens),
        ("decode", c.decode_pool_tokens),
    ] {
        if tokens < c.page_size as u64 {
            return Err(ConfigError::PoolSmallerThanPage {
                pool,
                tokens,
                page: c.page_size,
            });
        }
        if tokens > MAX_POOL_TOKENS {
            return Err(ConfigError::PoolTooLarge { pool, tokens });
        }
    }
    if c.seed > MAX_SEED {
        return Err(ConfigError::SeedTooLarge(c.seed));
    }
    if c.context_len < 16 {
        return Err(ConfigError::ContextTooSmall(c.context_len));
    }
    if c.context_len > MAX_POSITIONS {
        return Err(ConfigError::ContextTooLarge(c.context_len));
    }
    if c.max_new_tokens == 0 || c.max_new_tokens > 4096 {
        return Err(ConfigError::MaxNewTokens(c.max_new_tokens));
    }
    if c.fixes.windows(2).any(|w| w[0] >= w[1]) {
        return Err(ConfigError::FixOrder);
    }
    Ok(())
}

/// Parse `--fixes`: `none`, `all`, or a comma list of switch names.
pub fn parse_fixes(s: &str) -> Result<Vec<Fix>, String> {
    match s.trim() {
        "none" | "" => Ok(Vec::new()),
        "all" => Ok(Fix::ALL.to_vec()),
        list => {
            let mut out = Vec::new();
            for name in list.split(',').map(str::trim) {
                let f = Fix::from_name(name).ok_or_else(|| {
                    let known: Vec<_> = Fix::ALL.iter().map(|f| f.name()).collect();
                    format!(
                        "unknown fix '{name}' (known: {}, or none/all)",
                        known.join(", ")
                    )
                })?;
                out.push(f);
            }
            out.sort();
            out.dedup();
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_the_cap_rule() {
        let w = incident_config(Scale::Walkthrough, &[], PoisonMode::Off, 1).unwrap();
        assert_eq!(w.prefill_input_cap(), 106);
        let i = incident_config(Scale::Incident, &[], PoisonMode::Off, 1).unwrap();
        assert_eq!(i.prefill_input_cap(), 681_274);
        let ok = with_prefill_pool(i, 2_040_000).unwrap();
        assert_eq!(ok.prefill_input_cap(), 1_048_570);
    }

    #[test]
    fn contradictory_configs_are_refused() {
        let base = incident_config(Scale::Walkthrough, &[], PoisonMode::Off, 1).unwrap();
        let mut c = base.clone();
        c.page_size = 0;
        assert_eq!(validate(&c), Err(ConfigError::ZeroPageSize));
        let mut c = base.clone();
        c.decode_pool_tokens = 8;
        assert!(matches!(
            validate(&c),
            Err(ConfigError::PoolSmallerThanPage { .. })
        ));
        let mut c = base;
        c.context_len = MAX_POSITIONS + 1;
        assert!(matches!(validate(&c), Err(ConfigError::ContextTooLarge(_))));
    }

    #[test]
    fn absurd_pools_and_seeds_are_refused_before_any_allocation() {
        let c = incident_config(Scale::Incident, &[], PoisonMode::Off, DEFAULT_SEED).unwrap();
        assert!(with_prefill_pool(c.clone(), c.context_len).is_ok());
        for tokens in [1 << 40, u64::MAX, MAX_POOL_TOKENS + 1] {
            assert!(matches!(
                with_prefill_pool(c.clone(), tokens),
                Err(ConfigError::PoolTooLarge {
                    pool: "prefill",
                    ..
                })
            ));
            let mut d = c.clone();
            d.decode_pool_tokens = tokens;
            assert!(matches!(
                validate(&d),
                Err(ConfigError::PoolTooLarge { pool: "decode", .. })
            ));
        }
        let mut s = c.clone();
        s.seed = MAX_SEED + 1;
        assert_eq!(validate(&s), Err(ConfigError::SeedTooLarge(MAX_SEED + 1)));
    }

    #[test]
    fn fix_lists_parse_and_unknown_names_fail() {
        assert_eq!(parse_fixes("none").unwrap(), vec![]);
        assert_eq!(parse_fixes("all").unwrap().len(), Fix::ALL.len());
        assert_eq!(
            parse_fixes("page-tags,kv-checksum").unwrap(),
            vec![Fix::KvChecksum, Fix::PageTags]
        );
        let e = parse_fixes("kv-checksum,bogus").unwrap_err();
        assert!(e.contains("unknown fix 'bogus'"), "{e}");
    }
}
