//! Probe configuration: presets for the two scales, and validation.
//!
//! A [`ProbeConfig`] (defined in `kvw-evidence`, because receipts record it)
//! fully determines a run. This module builds the presets, derives the input
//! cap, and refuses configurations that make no sense with one clear message.

use kvw_evidence::{
    ChecksumScope, Fix, FixSet, FreeListPolicy, PageTail, PoisonMode, ProbeConfig, Scale,
};

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

/// A probe as asked for, before validation: a scale's preset, the switches,
/// and any size or model-assumption overrides. The command line, the HTTP
/// API and the fix matrix all describe a probe this way and turn it into a
/// [`ValidConfig`] once, with [`ProbeSpec::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub scale: Scale,
    pub fixes: FixSet,
    pub poison_on_free: PoisonMode,
    pub seed: u64,
    pub free_list: FreeListPolicy,
    pub checksum_scope: ChecksumScope,
    pub page_tail: PageTail,
    /// Prefill pool in tokens instead of the preset's.
    pub prefill_pool_tokens: Option<u64>,
    /// Decode pool in tokens instead of the preset's (model assumption).
    pub decode_pool_tokens: Option<u64>,
    /// Page size in tokens instead of the preset's.
    pub page_size: Option<u32>,
}

impl ProbeSpec {
    /// The preset of `scale` with `fixes` on and every other choice at its
    /// default (LIFO free lists, checksum over reserved pages, carried page
    /// tails, no poison-on-free, the default seed).
    pub fn new(scale: Scale, fixes: FixSet) -> Self {
        ProbeSpec {
            scale,
            fixes,
            poison_on_free: PoisonMode::Off,
            seed: DEFAULT_SEED,
            free_list: FreeListPolicy::Lifo,
            checksum_scope: ChecksumScope::Reserved,
            page_tail: PageTail::Carried,
            prefill_pool_tokens: None,
            decode_pool_tokens: None,
            page_size: None,
        }
    }

    /// The configuration this spec describes, checked: the only way to a
    /// [`ValidConfig`] besides [`ValidConfig::new`].
    pub fn validate(&self) -> Result<ValidConfig, ConfigError> {
        let p = self.scale.preset();
        ValidConfig::new(ProbeConfig {
            scale: self.scale,
            context_len: p.context_len,
            prefill_pool_tokens: self.prefill_pool_tokens.unwrap_or(p.prefill_pool_tokens),
            decode_pool_tokens: self.decode_pool_tokens.unwrap_or(p.decode_pool_tokens),
            page_size: self.page_size.unwrap_or(p.page_size),
            free_list: self.free_list,
            fixes: self.fixes.list(),
            poison_on_free: self.poison_on_free,
            checksum_scope: self.checksum_scope,
            page_tail: self.page_tail,
            seed: self.seed,
            waiting_timeout_s: 300,
            max_new_tokens: p.max_new_tokens,
        })
    }
}

/// A probe configuration that passed validation. The engine runs only
/// these and checks nothing again; receipts record the [`ProbeConfig`]
/// inside, and a recorded one (`kvw verify --reproduce`) comes back through
/// [`ValidConfig::new`].
#[derive(Debug, Clone, PartialEq)]
pub struct ValidConfig(ProbeConfig);

impl ValidConfig {
    /// Check `config`; the one place a configuration is validated.
    pub fn new(config: ProbeConfig) -> Result<Self, ConfigError> {
        validate(&config)?;
        Ok(ValidConfig(config))
    }

    pub fn into_inner(self) -> ProbeConfig {
        self.0
    }
}

impl std::ops::Deref for ValidConfig {
    type Target = ProbeConfig;
    fn deref(&self) -> &ProbeConfig {
        &self.0
    }
}

/// Preset for the incident probe at `scale` with the given switches.
pub fn incident_config(
    scale: Scale,
    fixes: &[Fix],
    poison_on_free: PoisonMode,
    seed: u64,
) -> Result<ValidConfig, ConfigError> {
    ProbeSpec {
        poison_on_free,
        seed,
        ..ProbeSpec::new(scale, FixSet::new(fixes))
    }
    .validate()
}

/// The same configuration with the prefill pool set to `tokens`.
pub fn with_prefill_pool(c: ValidConfig, tokens: u64) -> Result<ValidConfig, ConfigError> {
    let mut c = c.into_inner();
    c.prefill_pool_tokens = tokens;
    ValidConfig::new(c)
}

/// Refuse configurations that cannot run.
fn validate(c: &ProbeConfig) -> Result<(), ConfigError> {
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
        let base = incident_config(Scale::Walkthrough, &[], PoisonMode::Off, 1)
            .unwrap()
            .into_inner();
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
            let mut d = c.clone().into_inner();
            d.decode_pool_tokens = tokens;
            assert!(matches!(
                validate(&d),
                Err(ConfigError::PoolTooLarge { pool: "decode", .. })
            ));
        }
        let mut s = c.into_inner();
        s.seed = MAX_SEED + 1;
        assert_eq!(validate(&s), Err(ConfigError::SeedTooLarge(MAX_SEED + 1)));
    }

    #[test]
    fn a_spec_validates_into_the_preset_with_its_overrides() {
        let spec = ProbeSpec {
            prefill_pool_tokens: Some(256),
            ..ProbeSpec::new(Scale::Walkthrough, FixSet::ALL)
        };
        let c = spec.validate().unwrap();
        assert_eq!(c.prefill_pool_tokens, 256);
        assert_eq!(c.context_len, Scale::Walkthrough.preset().context_len);
        assert_eq!(c.fixes, Fix::ALL);
        let bad = ProbeSpec {
            page_size: Some(0),
            ..spec
        };
        assert_eq!(bad.validate(), Err(ConfigError::ZeroPageSize));
    }
}
