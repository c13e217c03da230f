//! Bundles: a folder of receipts that anyone can check offline.
//!
//! A bundle is what gets published. Its layout is fixed so that a verifier
//! can refuse anything that does not belong:
//!
//! ```text
//! <bundle>/
//!   receipts/<name>.json   DSSE envelopes (one per probe run)
//!   kvw.pub.json           the public key that signed them
//!   index.json             one entry per receipt: config and verdict summary, digests
//!   README.md              what this is and how to check it
//!   SHA256SUMS             GNU `sha256sum` format, every file above, sorted
//! ```
//!
//! [`write_bundle`] builds the folder in a temporary sibling and renames it
//! into place, so a reader never sees half a bundle and a failure leaves
//! nothing behind. It replaces an older bundle, and refuses any other
//! non-empty folder.
//!
//! [`verify_bundle`] first establishes that the folder is exactly what its
//! `SHA256SUMS` says: no symbolic links at all, no entry that is absolute or
//! climbs out with `..`, no file missing, none unlisted, every digest right.
//! Only then does it check each receipt's signature and content against the
//! key, the receipt against its index entry, and optionally re-runs each
//! probe to compare [`reproducible_digest`](crate::receipt::reproducible_digest)s.
//! Problems with the folder as a whole are an error; problems with one
//! receipt are reported on that receipt's line.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::canonical::sha256_hex;
use crate::dsse::Envelope;
use crate::error::EvidenceError;
use crate::fsutil::read_limited;
use crate::keys::{PublicKey, PUBLIC_KEY_FILE};
use crate::predicate::{
    Fix, FreeListPolicy, PoisonMode, ProbeConfig, ProbeInfo, ProbePredicate, Scale,
    PREDICATE_TYPE,
};
use crate::receipt::{
    check_receipt_name, reproducible_digest, verify_receipt, VerifiedReceipt, MAX_RECEIPT_BYTES,
};

/// `format` of a bundle's `index.json`.
pub const BUNDLE_FORMAT: &str = "kvwitness-bundle/v1";
/// Checksum file name.
pub const SUMS_FILE: &str = "SHA256SUMS";
/// Index file name.
pub const INDEX_FILE: &str = "index.json";
/// README file name.
pub const README_FILE: &str = "README.md";
/// Folder holding the receipts.
pub const RECEIPTS_DIR: &str = "receipts";

/// Most bytes one bundle file may hold.
pub const MAX_FILE_BYTES: u64 = MAX_RECEIPT_BYTES;
/// Most bytes all files of a bundle may hold together.
pub const MAX_BUNDLE_BYTES: u64 = 1024 * 1024 * 1024;
/// Most files a bundle may hold.
pub const MAX_FILES: usize = 10_000;

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
    /// One entry per receipt, sorted by `file`.
    pub receipts: Vec<IndexEntry>,
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

/// What [`write_bundle`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenBundle {
    pub dir: PathBuf,
    pub receipts: usize,
    pub keyid: String,
}

/// Write a bundle of `receipts` (file name, envelope, the predicate it
/// carries) signed by `public` into `dir`, atomically.
///
/// Every envelope must verify with `public` and carry exactly the given
/// predicate under the given name. `dir` may be absent, empty, or an older
/// bundle (which is replaced); any other existing path is refused.
pub fn write_bundle(
    dir: &Path,
    receipts: Vec<(String, Envelope, ProbePredicate)>,
    public: &PublicKey,
) -> Result<WrittenBundle, EvidenceError> {
    if receipts.is_empty() {
        return Err(EvidenceError::Bundle("no receipts to write".into()));
    }
    let count = receipts.len();
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut entries = Vec::with_capacity(count);
    for (name, envelope, predicate) in receipts {
        check_receipt_name(&name)?;
        let file = format!("{RECEIPTS_DIR}/{name}");
        if files.contains_key(&file) {
            return Err(EvidenceError::Bundle(format!("two receipts named {name}")));
        }
        let bytes = envelope.to_json_pretty().into_bytes();
        let verified = verify_receipt(&bytes, public).map_err(|e| {
            EvidenceError::Bundle(format!(
                "receipt {name} does not verify with the bundle key: {e}"
            ))
        })?;
        if verified.name != name {
            return Err(EvidenceError::Bundle(format!(
                "receipt {name} was signed under the name {}",
                verified.name
            )));
        }
        if verified.predicate != predicate {
            return Err(EvidenceError::Bundle(format!(
                "the predicate given for {name} is not the one its envelope carries"
            )));
        }
        entries.push(IndexEntry::for_receipt(&file, &verified));
        files.insert(file, bytes);
    }
    entries.sort_by(|a, b| a.file.cmp(&b.file));
    let index = BundleIndex {
        format: BUNDLE_FORMAT.to_string(),
        predicate_type: PREDICATE_TYPE.to_string(),
        keyid: public.keyid(),
        receipts: entries,
    };
    let mut index_json =
        serde_json::to_string_pretty(&index).map_err(|e| EvidenceError::json("index", e))?;
    index_json.push('\n');
    files.insert(README_FILE.to_string(), readme(&index).into_bytes());
    files.insert(INDEX_FILE.to_string(), index_json.into_bytes());
    files.insert(PUBLIC_KEY_FILE.to_string(), public.to_json().into_bytes());
    let sums: String = files
        .iter()
        .map(|(path, bytes)| format!("{}  {path}\n", sha256_hex(bytes)))
        .collect();
    files.insert(SUMS_FILE.to_string(), sums.into_bytes());

    place_atomically(dir, &files)?;
    Ok(WrittenBundle {
        dir: dir.to_path_buf(),
        receipts: count,
        keyid: public.keyid(),
    })
}

/// What is at the path a bundle is about to be written to.
enum Existing {
    Absent,
    EmptyDir,
    OldBundle,
}

fn inspect_target(dir: &Path) -> Result<Existing, EvidenceError> {
    let meta = match dir.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Existing::Absent),
        Err(e) => return Err(EvidenceError::io("inspect", dir, e)),
    };
    if !meta.is_dir() {
        return Err(EvidenceError::Bundle(format!(
            "{} exists and is not a folder; refusing to replace it",
            dir.display()
        )));
    }
    let names = list_names(dir)?;
    if names.is_empty() {
        return Ok(Existing::EmptyDir);
    }
    let known = [
        SUMS_FILE,
        INDEX_FILE,
        PUBLIC_KEY_FILE,
        README_FILE,
        RECEIPTS_DIR,
    ];
    let looks_like_bundle = names.contains(SUMS_FILE)
        && names.contains(INDEX_FILE)
        && names.iter().all(|n| known.contains(&n.as_str()))
        && receipts_dir_is_ours(&dir.join(RECEIPTS_DIR))?;
    if looks_like_bundle {
        Ok(Existing::OldBundle)
    } else {
        Err(EvidenceError::Bundle(format!(
            "{} is a non-empty folder that is not a bundle; refusing to overwrite it",
            dir.display()
        )))
    }
}

fn list_names(dir: &Path) -> Result<BTreeSet<String>, EvidenceError> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).map_err(|e| EvidenceError::io("list", dir, e))? {
        let entry = entry.map_err(|e| EvidenceError::io("list", dir, e))?;
        names.insert(entry.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// An old bundle's `receipts/` holds only regular `.json` files (or is absent).
fn receipts_dir_is_ours(receipts: &Path) -> Result<bool, EvidenceError> {
    let Ok(meta) = receipts.symlink_metadata() else {
        return Ok(true);
    };
    if !meta.is_dir() {
        return Ok(false);
    }
    for entry in std::fs::read_dir(receipts).map_err(|e| EvidenceError::io("list", receipts, e))? {
        let entry = entry.map_err(|e| EvidenceError::io("list", receipts, e))?;
        let is_file = entry.file_type().map(|t| t.is_file()).unwrap_or(false);
        if !is_file || !entry.file_name().to_string_lossy().ends_with(".json") {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Removes a temporary folder unless disarmed.
struct TempDir(Option<PathBuf>);

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

fn unique_sibling(parent: &Path, base: &str, tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    parent.join(format!(".{base}.{tag}-{}-{nanos}", std::process::id()))
}

fn place_atomically(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<(), EvidenceError> {
    let existing = inspect_target(dir)?;
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            EvidenceError::Bundle(format!("{} does not name a folder", dir.display()))
        })?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| EvidenceError::io("create folder", &parent, e))?;

    let tmp_path = unique_sibling(&parent, &base, "partial");
    std::fs::create_dir(&tmp_path).map_err(|e| EvidenceError::io("create folder", &tmp_path, e))?;
    let mut tmp = TempDir(Some(tmp_path.clone()));
    let receipts = tmp_path.join(RECEIPTS_DIR);
    std::fs::create_dir(&receipts).map_err(|e| EvidenceError::io("create folder", &receipts, e))?;
    for (rel, bytes) in files {
        let path = tmp_path.join(rel);
        write_new_file(&path, bytes)?;
    }

    match existing {
        Existing::Absent => rename(&tmp_path, dir)?,
        Existing::EmptyDir => {
            std::fs::remove_dir(dir).map_err(|e| EvidenceError::io("replace", dir, e))?;
            rename(&tmp_path, dir)?;
        }
        Existing::OldBundle => {
            let old = unique_sibling(&parent, &base, "old");
            rename(dir, &old)?;
            if let Err(e) = rename(&tmp_path, dir) {
                // Put the old bundle back; the new one is removed by `tmp`.
                let _ = std::fs::rename(&old, dir);
                return Err(e);
            }
            // The new bundle is in place; a leftover old copy is harmless.
            let _ = std::fs::remove_dir_all(&old);
        }
    }
    tmp.0 = None;
    Ok(())
}

fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), EvidenceError> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| EvidenceError::io("create", path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| EvidenceError::io("write", path, e))
}

fn rename(from: &Path, to: &Path) -> Result<(), EvidenceError> {
    std::fs::rename(from, to).map_err(|e| EvidenceError::io("move a folder into", to, e))
}

fn readme(index: &BundleIndex) -> String {
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
- `SHA256SUMS` lists the SHA-256 of every other file.

## Receipts

| file | scale | fixes | poison-on-free | HTTP | outcome |
|---|---|---|---|---|---|
{rows}
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
canonical JSON: keys sorted, no whitespace, i.e. Python's
`json.dumps(predicate, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
"#,
        predicate_type = index.predicate_type,
        keyid = index.keyid,
    )
}

/// Which key [`verify_bundle`] checked signatures against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// A key the caller trusts, given from outside the bundle.
    Trusted,
    /// The bundle's own `kvw.pub.json`: proves integrity, not authorship.
    Bundle,
}

/// Re-runs a probe from its config (for `--reproduce`); `Err` carries a
/// one-line reason.
pub type ReproduceFn<'a> = &'a dyn Fn(&ProbeConfig) -> Result<ProbePredicate, String>;

/// Re-run a verified receipt's config and compare reproducible digests.
pub fn check_reproduction(
    verified: &VerifiedReceipt,
    rerun: ReproduceFn<'_>,
) -> Result<(), String> {
    let again = rerun(&verified.predicate.config).map_err(|e| format!("re-run failed: {e}"))?;
    let digest = reproducible_digest(&again);
    if digest != verified.reproducible_digest {
        return Err(format!(
            "re-run does not reproduce the receipt (reproducible digest {digest}, receipt {})",
            verified.reproducible_digest
        ));
    }
    Ok(())
}

/// Options of [`verify_bundle`].
#[derive(Default)]
pub struct VerifyOptions<'a> {
    /// Check signatures against this key instead of the bundle's own.
    pub trusted_key: Option<PublicKey>,
    /// Re-run a receipt's config; the result's reproducible digest must equal
    /// the receipt's.
    pub reproduce: Option<ReproduceFn<'a>>,
}

/// A receipt that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptOk {
    pub name: String,
    /// `probe.name`, scale and fixes in a few words.
    pub label: String,
    /// The verdict's one-line outcome.
    pub outcome: String,
    /// The probe was re-run and reproduced the receipt.
    pub reproduced: bool,
}

/// The result for one receipt (or one index entry without a receipt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptLine {
    /// Path inside the bundle.
    pub file: String,
    pub result: Result<ReceiptOk, String>,
}

impl fmt::Display for ReceiptLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.result {
            Ok(ok) => {
                write!(f, "ok    {}  {}: {}", self.file, ok.label, ok.outcome)?;
                if ok.reproduced {
                    write!(f, " [reproduced]")?;
                }
                Ok(())
            }
            Err(reason) => write!(f, "FAIL  {}: {reason}", self.file),
        }
    }
}

/// Outcome of [`verify_bundle`] for a bundle whose files are intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleReport {
    pub dir: PathBuf,
    /// Key id the signatures were checked against.
    pub keyid: String,
    pub key_source: KeySource,
    /// Files whose digest matched `SHA256SUMS`.
    pub files_checked: usize,
    /// One line per receipt, sorted by file.
    pub receipts: Vec<ReceiptLine>,
}

impl BundleReport {
    /// Every receipt verified.
    pub fn ok(&self) -> bool {
        !self.receipts.is_empty() && self.receipts.iter().all(|l| l.result.is_ok())
    }

    /// Number of receipt lines that failed.
    pub fn failures(&self) -> usize {
        self.receipts.iter().filter(|l| l.result.is_err()).count()
    }

    /// Which key was used, in words.
    pub fn key_line(&self) -> String {
        match self.key_source {
            KeySource::Trusted => format!("key {} (trusted, given by the caller)", self.keyid),
            KeySource::Bundle => format!(
                "key {} (the bundle's own {PUBLIC_KEY_FILE}: this proves integrity, \
                 not who signed; pass --key to check against a key you trust)",
                self.keyid
            ),
        }
    }

    /// One-line summary.
    pub fn summary(&self) -> String {
        let total = self.receipts.len();
        let failed = self.failures();
        format!(
            "{}: {} of {total} receipts ok, {failed} failed; {} files match {SUMS_FILE}",
            if self.ok() { "OK" } else { "FAILED" },
            total - failed,
            self.files_checked
        )
    }
}

impl fmt::Display for BundleReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.key_line())?;
        for line in &self.receipts {
            writeln!(f, "{line}")?;
        }
        write!(f, "{}", self.summary())
    }
}

fn bundle_err(msg: impl Into<String>) -> EvidenceError {
    EvidenceError::Bundle(msg.into())
}

/// Collect every path under `root` as `/`-joined relative strings, refusing
/// symbolic links and anything that is neither a file nor a folder.
fn walk(root: &Path, rel: &str, depth: usize, out: &mut Vec<String>) -> Result<(), EvidenceError> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    if depth > 4 {
        return Err(bundle_err(format!("{rel}: folders nested too deep")));
    }
    for entry in std::fs::read_dir(&dir).map_err(|e| EvidenceError::io("list", &dir, e))? {
        let entry = entry.map_err(|e| EvidenceError::io("list", &dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            return Err(bundle_err(format!(
                "{}: file name is not UTF-8",
                entry.path().display()
            )));
        };
        let path = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(|e| EvidenceError::io("inspect", &entry.path(), e))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            return Err(bundle_err(format!(
                "{path} is a symbolic link; a bundle holds regular files only"
            )));
        } else if kind.is_dir() {
            walk(root, &path, depth + 1, out)?;
        } else if kind.is_file() {
            out.push(path);
            if out.len() > MAX_FILES {
                return Err(bundle_err(format!("more than {MAX_FILES} files")));
            }
        } else {
            return Err(bundle_err(format!("{path} is not a regular file")));
        }
    }
    Ok(())
}

/// Parse `SHA256SUMS` into (path, lowercase hex digest), refusing any entry
/// that is not a plain relative path inside `root`.
fn parse_sums(root: &Path, text: &str) -> Result<BTreeMap<String, String>, EvidenceError> {
    let mut entries = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = |msg: String| bundle_err(format!("{SUMS_FILE} line {}: {msg}", n + 1));
        if line.is_empty() {
            continue;
        }
        let (digest, rest) = match (line.get(..64), line.get(64..)) {
            (Some(d), Some(r)) if d.bytes().all(|b| b.is_ascii_hexdigit()) => (d, r),
            _ => return Err(at("not a `<sha256>  <file>` line".into())),
        };
        let Some(path) = rest.strip_prefix("  ").or_else(|| rest.strip_prefix(" *")) else {
            return Err(at("not a `<sha256>  <file>` line".into()));
        };
        if path.is_empty() {
            return Err(at("no file name".into()));
        }
        if path.starts_with('/') {
            return Err(at(format!(
                "{path} is an absolute path, outside the bundle"
            )));
        }
        if path.contains('\\') {
            return Err(at(format!("{path} contains a backslash")));
        }
        if path.split('/').any(|c| c == "..") {
            return Err(at(format!("{path} points outside the bundle")));
        }
        if path.split('/').any(|c| c.is_empty() || c == ".") {
            return Err(at(format!("{path} is not a plain relative path")));
        }
        if path == SUMS_FILE {
            return Err(at(format!("{SUMS_FILE} cannot list itself")));
        }
        let full = root.join(path);
        if full.symlink_metadata().is_err() {
            return Err(at(format!("{path} is listed but missing")));
        }
        let canonical = full
            .canonicalize()
            .map_err(|e| EvidenceError::io("resolve", &full, e))?;
        if !canonical.starts_with(root) {
            return Err(at(format!("{path} resolves outside the bundle")));
        }
        if entries
            .insert(path.to_string(), digest.to_ascii_lowercase())
            .is_some()
        {
            return Err(at(format!("{path} is listed twice")));
        }
    }
    Ok(entries)
}

fn is_receipt_path(path: &str) -> bool {
    path.strip_prefix(RECEIPTS_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|name| !name.contains('/'))
}

/// Verify the bundle folder `dir` (see the module documentation).
///
/// Returns an error when the folder as a whole cannot be trusted (layout,
/// `SHA256SUMS`, index or key problems), and otherwise a report with one
/// line per receipt; check [`BundleReport::ok`].
pub fn verify_bundle(dir: &Path, opts: &VerifyOptions<'_>) -> Result<BundleReport, EvidenceError> {
    let meta = dir
        .symlink_metadata()
        .map_err(|e| EvidenceError::io("open", dir, e))?;
    if meta.file_type().is_symlink() {
        return Err(bundle_err(format!(
            "{} is a symbolic link; give the bundle folder itself",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(bundle_err(format!("{} is not a folder", dir.display())));
    }
    let root = dir
        .canonicalize()
        .map_err(|e| EvidenceError::io("resolve", dir, e))?;

    // 1. Layout: regular files only.
    let mut present = Vec::new();
    walk(&root, "", 0, &mut present)?;
    if present.is_empty() {
        return Err(bundle_err(format!(
            "{} is empty, not a bundle",
            dir.display()
        )));
    }
    if !present.iter().any(|p| p == SUMS_FILE) {
        return Err(bundle_err(format!("no {SUMS_FILE} in {}", dir.display())));
    }

    // 2. SHA256SUMS lists exactly the files present, each digest right.
    let sums_bytes = read_limited(&root.join(SUMS_FILE), MAX_FILE_BYTES, "SHA256SUMS")?;
    let sums_text = std::str::from_utf8(&sums_bytes)
        .map_err(|_| bundle_err(format!("{SUMS_FILE} is not UTF-8 text")))?;
    let sums = parse_sums(&root, sums_text)?;
    for path in &present {
        if path != SUMS_FILE && !sums.contains_key(path) {
            return Err(bundle_err(format!(
                "{path} is in the bundle but not listed in {SUMS_FILE}"
            )));
        }
    }
    let mut contents: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut total: u64 = 0;
    for (path, expected) in &sums {
        let bytes = read_limited(&root.join(path), MAX_FILE_BYTES, "bundle file")?;
        total += bytes.len() as u64;
        if total > MAX_BUNDLE_BYTES {
            return Err(bundle_err(format!(
                "files total more than {MAX_BUNDLE_BYTES} bytes"
            )));
        }
        let actual = sha256_hex(&bytes);
        if &actual != expected {
            return Err(bundle_err(format!(
                "{path}: sha256 mismatch ({SUMS_FILE} says {expected}, the file hashes to {actual})"
            )));
        }
        contents.insert(path.clone(), bytes);
    }

    // 3. Only the files a bundle holds.
    for path in contents.keys() {
        let known = [INDEX_FILE, PUBLIC_KEY_FILE, README_FILE].contains(&path.as_str());
        if !known && !is_receipt_path(path) {
            return Err(bundle_err(format!("unexpected file {path}")));
        }
    }
    let index_bytes = contents
        .get(INDEX_FILE)
        .ok_or_else(|| bundle_err(format!("no {INDEX_FILE}")))?;
    let index: BundleIndex = serde_json::from_slice(index_bytes)
        .map_err(|e| EvidenceError::json("index", e).in_file(INDEX_FILE))?;
    if index.format != BUNDLE_FORMAT {
        return Err(bundle_err(format!(
            "{INDEX_FILE} format is {:?}, expected {BUNDLE_FORMAT:?}",
            index.format
        )));
    }
    if index.predicate_type != PREDICATE_TYPE {
        return Err(EvidenceError::UnknownPredicate {
            found: index.predicate_type,
            expected: PREDICATE_TYPE,
        }
        .in_file(INDEX_FILE));
    }

    // 4. The key.
    let bundle_key = match contents.get(PUBLIC_KEY_FILE) {
        Some(bytes) => Some(PublicKey::from_json(bytes).map_err(|e| e.in_file(PUBLIC_KEY_FILE))?),
        None => None,
    };
    if let Some(key) = &bundle_key {
        if index.keyid != key.keyid() {
            return Err(bundle_err(format!(
                "{INDEX_FILE} names key {}, but {PUBLIC_KEY_FILE} is key {}",
                index.keyid,
                key.keyid()
            )));
        }
    }
    let (key, key_source) = match (&opts.trusted_key, bundle_key) {
        (Some(trusted), _) => (trusted.clone(), KeySource::Trusted),
        (None, Some(own)) => (own, KeySource::Bundle),
        (None, None) => {
            return Err(bundle_err(format!(
                "no {PUBLIC_KEY_FILE} in the bundle and no key given"
            )))
        }
    };

    // 5. Receipts against the key and the index.
    let mut by_file: BTreeMap<&str, &IndexEntry> = BTreeMap::new();
    for entry in &index.receipts {
        if by_file.insert(entry.file.as_str(), entry).is_some() {
            return Err(bundle_err(format!(
                "{INDEX_FILE} lists {} twice",
                entry.file
            )));
        }
    }
    let mut lines = Vec::new();
    for (path, bytes) in contents.iter().filter(|(p, _)| is_receipt_path(p)) {
        let result = check_receipt(path, bytes, &key, by_file.remove(path.as_str()), opts);
        lines.push(ReceiptLine {
            file: path.clone(),
            result,
        });
    }
    for file in by_file.into_keys() {
        lines.push(ReceiptLine {
            file: file.to_string(),
            result: Err(format!("listed in {INDEX_FILE} but not in the bundle")),
        });
    }
    if lines.is_empty() {
        return Err(bundle_err("the bundle holds no receipts"));
    }
    lines.sort_by(|a, b| a.file.cmp(&b.file));

    Ok(BundleReport {
        dir: dir.to_path_buf(),
        keyid: key.keyid(),
        key_source,
        files_checked: contents.len(),
        receipts: lines,
    })
}

fn check_receipt(
    path: &str,
    bytes: &[u8],
    key: &PublicKey,
    entry: Option<&IndexEntry>,
    opts: &VerifyOptions<'_>,
) -> Result<ReceiptOk, String> {
    let verified = verify_receipt(bytes, key).map_err(|e| e.to_string())?;
    let file_name = path.rsplit('/').next().unwrap_or(path);
    if verified.name != file_name {
        return Err(format!(
            "signed under the name {:?}, stored as {file_name:?}",
            verified.name
        ));
    }
    let entry = entry.ok_or_else(|| format!("not listed in {INDEX_FILE}"))?;
    let expected = IndexEntry::for_receipt(path, &verified);
    if *entry != expected {
        return Err(format!(
            "{INDEX_FILE} entry does not match the receipt (differs in: {})",
            differing_fields(entry, &expected)
        ));
    }
    let mut reproduced = false;
    if let Some(rerun) = opts.reproduce {
        check_reproduction(&verified, rerun)?;
        reproduced = true;
    }
    Ok(ReceiptOk {
        name: verified.name.clone(),
        label: describe(&verified.predicate),
        outcome: crate::render::outcome_line(&verified.predicate, crate::render::Lang::En),
        reproduced,
    })
}

/// A few words naming a run: probe, version, scale, canary mode and fixes,
/// e.g. `incident v1 walkthrough fixes=none`.
pub fn describe(p: &ProbePredicate) -> String {
    let fixes = if p.config.fixes.is_empty() {
        "none".to_string()
    } else {
        p.config
            .fixes
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut text = format!(
        "{} v{} {} fixes={fixes}",
        p.probe.name, p.probe.version, p.config.scale
    );
    if p.config.poison_on_free != PoisonMode::Off {
        text.push_str(&format!(" poison-on-free={}", p.config.poison_on_free));
    }
    text
}

/// Top-level field names in which two index entries differ.
fn differing_fields(a: &IndexEntry, b: &IndexEntry) -> String {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return "unknown".into();
    };
    let fields: Vec<&str> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, _)| k.as_str())
        .collect();
    fields.join(", ")
}
