//! `index.json` and the README generated from it.
//!
//! The index is a table of contents a reader (or the explorer) can use
//! without opening every receipt; verification checks every entry against
//! its receipt, and the signed manifest pins the index's bytes. The README
//! is not signed itself: it is a pure function of the index ([`readme`]),
//! which verification recomputes and compares.

use serde::{Deserialize, Serialize};

use super::others::OtherEntry;
use crate::predicate::{Fix, FreeListPolicy, PoisonMode, ProbeInfo, Scale};
use crate::receipt::VerifiedReceipt;

/// `index.json`: a table of contents a reader (or the explorer) can use
/// without opening every receipt. Every entry is checked against its
/// receipt on verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleIndex {
    /// [`BUNDLE_FORMAT`].
    pub format: String,
    /// `predicateType` of every receipt.
    pub predicate_type: String,
    /// Key id of `kvw.pub.json`.
    pub keyid: String,
    /// One entry per probe receipt, sorted by `file`.
    pub receipts: Vec<IndexEntry>,
    /// One entry per receipt of another kind (model check, scenario, gates,
    /// fuzz), sorted by `file`; absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherEntry>,
}

/// One receipt as listed in `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexEntry {
    /// Path inside the bundle, `receipts/<name>`.
    pub file: String,
    /// Subject name of the receipt (its file name).
    pub name: String,
    pub probe: ProbeInfo,
    pub scale: Scale,
    /// Fix switches that were on.
    pub fixes: Vec<Fix>,
    pub poison_on_free: PoisonMode,
    pub config: ConfigSummary,
    pub verdict: VerdictSummary,
    /// Subject digest: canonical SHA-256 of the predicate.
    pub predicate_sha256: String,
    /// Digest a re-run at any commit must reproduce.
    pub reproducible_digest: String,
}

/// The sizes that decide whether the reject path is reachable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigSummary {
    pub context_len: u64,
    pub prefill_pool_tokens: u64,
    pub decode_pool_tokens: u64,
    pub page_size: u32,
    pub max_req_input_len: u64,
    pub free_list: FreeListPolicy,
    pub seed: u64,
}

/// What the run came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerdictSummary {
    pub leak: bool,
    pub http_status: u16,
    pub foreign_pages_read: u64,
    pub canaries_leaked: Vec<String>,
    pub correct_answer: bool,
    pub outcome: String,
}

impl IndexEntry {
    /// The entry for a verified receipt stored at `file`.
    pub fn for_receipt(file: &str, receipt: &VerifiedReceipt) -> IndexEntry {
        let p = &receipt.predicate;
        let c = &p.config;
        IndexEntry {
            file: file.to_string(),
            name: receipt.name.clone(),
            probe: p.probe.clone(),
            scale: c.scale,
            fixes: c.fixes.clone(),
            poison_on_free: c.poison_on_free,
            config: ConfigSummary {
                context_len: c.context_len,
                prefill_pool_tokens: c.prefill_pool_tokens,
                decode_pool_tokens: c.decode_pool_tokens,
                page_size: c.page_size,
                max_req_input_len: c.prefill_input_cap(),
                free_list: c.free_list,
                seed: c.seed,
            },
            verdict: VerdictSummary {
                leak: p.verdict.leak,
                http_status: p.verdict.http_status,
                foreign_pages_read: p.verdict.foreign_pages_read,
                canaries_leaked: p.verdict.canaries_leaked.clone(),
                correct_answer: p.verdict.correct_answer,
                outcome: crate::render::outcome_line(p, crate::render::Lang::En),
            },
            predicate_sha256: receipt.predicate_sha256.clone(),
            reproducible_digest: receipt.reproducible_digest.clone(),
        }
    }
}

/// The README of a bundle, generated from its index. Verification
/// regenerates it and refuses a bundle whose README differs, so the prose a
/// reader sees first cannot contradict the signed receipts.
pub fn readme(index: &BundleIndex) -> String {
    let mut rows = String::new();
    for e in &index.receipts {
        let fixes = if e.fixes.is_empty() {
            "none".to_string()
        } else {
            e.fixes
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        rows.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            e.file,
            e.scale,
            fixes,
            e.poison_on_free,
            e.verdict.http_status,
            e.verdict.outcome.replace('|', "\\|")
        ));
    }
    let others = others_section(&index.others);
    format!(
        r#"# kvwitness evidence bundle

This folder holds signed records of kvwitness probe runs. Each file in
`receipts/` is one run of the prefill/decode KV-cache isolation probe: a
DSSE envelope (payload type `application/vnd.in-toto+json`) whose payload is
an in-toto Statement v1 with predicate type
`{predicate_type}`. The predicate records
the full configuration, the seven steps of the request's life with the pages
it reserved, received and read, and the verdict.

- `kvw.pub.json` is the ed25519 public key that signed every receipt
  (keyid `{keyid}`, the SHA-256 of the raw key). Anyone holding this folder
  can check integrity with it; to know *who* signed, compare the keyid with
  one you obtained from the publisher by another channel.
- `index.json` lists every receipt with its configuration, verdict and digests.
- `manifest.json` is a signed in-toto Statement whose subjects are every
  receipt and `index.json`: removing, adding or renaming a receipt breaks it.
- `README.md` (this file) is generated from `index.json`; `kvw verify`
  regenerates it and refuses a bundle whose README differs.
- `SHA256SUMS` lists the SHA-256 of every other file.

## Receipts

| file | scale | fixes | poison-on-free | HTTP | outcome |
|---|---|---|---|---|---|
{rows}{others}
## How to verify

With kvwitness (checks every digest, signature, index entry and step):

```sh
kvw verify .                        # with the key in this folder
kvw verify . --key trusted.pub.json # with a key you trust
kvw verify . --reproduce            # also re-run every probe and compare
```

With coreutils only (integrity of the files, not the signatures):

```sh
sha256sum -c SHA256SUMS
```

With Python's `securesystemslib` (an independent DSSE and ed25519 implementation):

```python
import json
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

key_dict = json.load(open("kvw.pub.json"))
key = SSlibKey.from_dict(key_dict["keyid"], key_dict)
envelope = Envelope.from_dict(json.load(open("receipts/<name>.json")))
envelope.verify([key], 1)  # raises VerificationError unless the signature is good
statement = json.loads(envelope.payload)
```

The subject digest of each statement is the SHA-256 of the predicate in
RFC 8785 canonical JSON (JCS), e.g. `hashlib.sha256(rfc8785.dumps(predicate))`
with Python's `rfc8785` package; the payload itself is the JCS form of the
statement, byte for byte.
"#,
        predicate_type = index.predicate_type,
        keyid = index.keyid,
    )
}

/// The README's table of receipts of other kinds, empty when there are none.
fn others_section(others: &[OtherEntry]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "\n## Other receipts\n\nModel checks, scenario runs, gate runs and randomized runs, each under\nits own predicate type, signed by the same key and listed in the manifest.\n\n| file | what | outcome |\n|---|---|---|\n",
    );
    for o in others {
        text.push_str(&format!(
            "| `{}` | {} | {} |\n",
            o.file,
            o.label.replace('|', "\\|"),
            o.outcome.replace('|', "\\|")
        ));
    }
    text
}
