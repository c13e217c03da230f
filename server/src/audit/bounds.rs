//! The audit's bounds: what it believes of a server's self-description, and
//! the most it sends and reads.
//!
//! A hostile endpoint chooses the numbers discovery reads (`max_model_len`,
//! `max_total_num_tokens`, vLLM's block counts) and the bodies the client
//! reads. Sizes above [`MAX_TOKENS`] are refused as absurd (the gate that
//! needs them is inconclusive and says why), every prompt the gates build
//! fits [`MAX_REQUEST_BYTES`], and a response body is read up to
//! [`MAX_RESPONSE_BYTES`]. With the request count (`--max-requests`), the
//! audit's time (`--max-seconds`), at most [`MAX_FIT_STEPS`] counts per
//! fitted prompt and at most [`MAX_TENANTS`] keys, that
//! bounds the audit's memory and time whatever the server says or sends.

/// Largest context or KV pool, in tokens, the audit believes: 2^24
/// (16,777,216), above any served model's context today.
pub const MAX_TOKENS: u64 = 1 << 24;

/// Largest request body the audit builds: 8 MiB.
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// Most bytes of one response body the audit reads: 2 MiB. What came
/// before the cut is kept and searched.
pub const MAX_RESPONSE_BYTES: usize = 2 << 20;

/// Most `/tokenize` counts spent fitting one prompt to the size a gate needs.
pub const MAX_FIT_STEPS: usize = 6;

/// Most tenants (keys) of one audit.
pub const MAX_TENANTS: usize = 16;

/// Room left in a request body for the JSON around the prompt.
const ENVELOPE_BYTES: usize = 4096;

/// Largest prompt, in characters, any gate puts in one request.
pub const MAX_PROMPT_CHARS: usize = MAX_REQUEST_BYTES - ENVELOPE_BYTES;

/// `value` (from `source`) if it is a believable token count, else why not.
pub fn believable(value: u64, source: &str) -> Result<u64, String> {
    if value == 0 {
        return Err(format!("{source} says 0 tokens, which no server runs with"));
    }
    if value > MAX_TOKENS {
        return Err(format!(
            "{source} says {value} tokens, above the audit's cap of {MAX_TOKENS}: not believed"
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_sizes_are_not_believed() {
        assert_eq!(believable(8192, "x"), Ok(8192));
        assert!(believable(0, "x").is_err());
        assert!(believable(u64::MAX, "x")
            .unwrap_err()
            .contains("not believed"));
        assert!(believable(MAX_TOKENS + 1, "x").is_err());
        assert_eq!(believable(MAX_TOKENS, "x"), Ok(MAX_TOKENS));
    }
}
