//! Verifying a bundle.
//!
//! [`verify_bundle`] first reads the folder under the layout rules and
//! checks it against its `SHA256SUMS` ([`read_bundle`]). Then, from the bytes
//! read once: only known files and strictly named receipts; the index; the
//! key (the caller's trusted one, else the bundle's own); the signed
//! manifest, whose subjects must be exactly the receipts present and the
//! index; the README, which must state what the index says; and
//! finally each receipt's signature, its subject name against its file name,
//! its index entry, and optionally a re-run of its probe comparing
//! [`reproducible_digest`](crate::receipt::reproducible_digest)s (or, for
//! the other kinds of [`super::others`], the caller's re-run). Problems
//! with the bundle as a whole are an error; problems with one receipt are
//! reported on that receipt's line.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::index::{BundleIndex, IndexEntry};
use super::layout::{read_bundle, BundleFiles};
use super::others::{OtherEntry, OtherFacts};
use super::readme::check_readme;
use super::{
    bundle_err, manifest, receipt_name_of, BUNDLE_FORMAT, INDEX_FILE, MANIFEST_FILE, README_FILE,
    SUMS_FILE,
};
use crate::canonical::sha256_hex;
use crate::error::EvidenceError;
use crate::predicate::{ProbeConfig, ProbePredicate, PREDICATE_TYPE};
use crate::receipt::{
    check_receipt_name, reproducible_digest, verify_statement, VerifiedReceipt, VerifiedStatement,
};
use crate::signing::{PublicKey, PUBLIC_KEY_FILE};

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
pub type ReproduceFn<'a> = &'a (dyn Fn(&ProbeConfig) -> Result<ProbePredicate, String> + Sync);

/// What the re-run of a receipt of another kind came to, when it is not
/// a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rerun {
    /// Re-run, and the result is the receipt's.
    Reproduced,
    /// Not re-run by this caller (a model check, an audit of a remote
    /// endpoint), for the reason given; the line says so.
    NotRerun(String),
}

/// Re-runs a receipt of another kind (scenario, gates, fuzz) for
/// `--reproduce` and compares it with the receipt: [`Rerun`], or `Err` with
/// a one-line reason (a different result, or a re-run over the caller's
/// budget).
pub type ReproduceOtherFn<'a> = &'a (dyn Fn(&VerifiedStatement) -> Result<Rerun, String> + Sync);

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
    /// Re-run a receipt of another kind (see [`ReproduceOtherFn`]).
    pub reproduce_other: Option<ReproduceOtherFn<'a>>,
}

/// A receipt that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptOk {
    pub name: String,
    /// What the receipt says, in the facts its index entry lists.
    pub facts: ReceiptFacts,
    /// The probe was re-run and reproduced the receipt.
    pub reproduced: bool,
    /// `--reproduce` was asked but this receipt was not re-run, and why.
    pub not_rerun: Option<String>,
}

impl ReceiptOk {
    /// Record what a re-run came to.
    pub fn with_rerun(mut self, rerun: Option<Rerun>) -> ReceiptOk {
        match rerun {
            Some(Rerun::Reproduced) => self.reproduced = true,
            Some(Rerun::NotRerun(why)) => self.not_rerun = Some(why),
            None => {}
        }
        self
    }
}

/// What a verified receipt says, as typed facts (the words crate renders
/// them for a reader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReceiptFacts {
    /// A probe run: its index entry.
    Probe(Box<IndexEntry>),
    /// A receipt of another kind.
    Other(OtherFacts),
}

/// The result for one receipt (or one index entry without a receipt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptLine {
    /// Path inside the bundle.
    pub file: String,
    pub result: Result<ReceiptOk, String>,
}

/// The line as facts (`ok    FILE  leak HTTP 200`); `kvw verify` prints
/// the words crate's sentences instead.
impl fmt::Display for ReceiptLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.result {
            Ok(ok) => {
                match &ok.facts {
                    ReceiptFacts::Probe(e) => write!(
                        f,
                        "ok    {}  {} HTTP {}",
                        self.file, e.verdict.outcome, e.verdict.http_status
                    )?,
                    ReceiptFacts::Other(o) => {
                        write!(f, "ok    {}  {} {}", self.file, o.kind(), o.result())?
                    }
                }
                if ok.reproduced {
                    write!(f, " [reproduced]")?;
                }
                if let Some(why) = &ok.not_rerun {
                    write!(f, " [not re-run: {why}]")?;
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

    /// One-line summary; with re-runs, how many reproduced and how many
    /// were not re-run.
    pub fn summary(&self) -> String {
        let total = self.receipts.len();
        let failed = self.failures();
        let oks = || self.receipts.iter().filter_map(|l| l.result.as_ref().ok());
        let reproduced = oks().filter(|o| o.reproduced).count();
        let not_rerun = oks().filter(|o| o.not_rerun.is_some()).count();
        let reruns = if reproduced + not_rerun > 0 {
            format!("; {reproduced} reproduced, {not_rerun} not re-run")
        } else {
            String::new()
        };
        format!(
            "{}: {} of {total} receipts ok, {failed} failed{reruns}; {} files match {SUMS_FILE} and the signed {MANIFEST_FILE}",
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

/// Verify the bundle folder `dir`: [`read_bundle`] (layout and
/// `SHA256SUMS`), then [`verify_files`].
pub fn verify_bundle(dir: &Path, opts: &VerifyOptions<'_>) -> Result<BundleReport, EvidenceError> {
    let files = read_bundle(dir)?;
    verify_files(&files, opts)
}

/// Verify a bundle already read by [`read_bundle`].
///
/// Returns an error when the bundle as a whole cannot be trusted (unknown
/// files, index, key, manifest or README problems), and otherwise a report
/// with one line per receipt; check [`BundleReport::ok`].
pub fn verify_files(
    bundle: &BundleFiles,
    opts: &VerifyOptions<'_>,
) -> Result<BundleReport, EvidenceError> {
    verify_files_with(bundle, opts, Keep::Nothing).map(|(report, _)| report)
}

/// Whether verifying hands back the statements that verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    Nothing,
    Statements,
}

/// [`verify_files`], also handing back the statement of every receipt that
/// verified, by bundle path, so a reader that goes on to draw them (the
/// site builder) checks each signature once, here.
pub fn verify_files_keeping(
    bundle: &BundleFiles,
    opts: &VerifyOptions<'_>,
) -> Result<(BundleReport, BTreeMap<String, VerifiedStatement>), EvidenceError> {
    verify_files_with(bundle, opts, Keep::Statements)
}

fn verify_files_with(
    bundle: &BundleFiles,
    opts: &VerifyOptions<'_>,
    keep: Keep,
) -> Result<(BundleReport, BTreeMap<String, VerifiedStatement>), EvidenceError> {
    let contents = &bundle.files;

    // 1. Only the files a bundle holds, receipts under the strict name rule.
    for path in contents.keys() {
        let known = [
            INDEX_FILE,
            PUBLIC_KEY_FILE,
            README_FILE,
            MANIFEST_FILE,
            SUMS_FILE,
        ]
        .contains(&path.as_str());
        if known {
            continue;
        }
        match receipt_name_of(path) {
            Some(name) => check_receipt_name(name).map_err(|e| e.in_file(path))?,
            None => return Err(bundle_err(format!("unexpected file {path}"))),
        }
    }

    // 2. The index.
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

    // 3. The key.
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

    // 4. The signed manifest: the receipts present are exactly its subjects.
    let manifest_bytes = contents.get(MANIFEST_FILE).ok_or_else(|| {
        bundle_err(format!(
            "no {MANIFEST_FILE}: the bundle's list of receipts is not signed"
        ))
    })?;
    let signed = manifest::verify(manifest_bytes, &key)?;
    for (path, bytes) in contents {
        if path != INDEX_FILE && receipt_name_of(path).is_none() {
            continue;
        }
        match signed.get(path) {
            None => {
                return Err(bundle_err(format!(
                    "{path} is in the bundle but not in the signed {MANIFEST_FILE}"
                )))
            }
            Some(digest) if *digest != sha256_hex(bytes) => {
                return Err(bundle_err(format!(
                    "{path} differs from the file the signed {MANIFEST_FILE} lists"
                )))
            }
            Some(_) => {}
        }
    }
    if let Some(path) = signed.keys().find(|p| !contents.contains_key(*p)) {
        return Err(bundle_err(format!(
            "{path} is listed in the signed {MANIFEST_FILE} but missing from the bundle"
        )));
    }

    // 5. The README states what the index says (its prose is not compared).
    let readme_bytes = contents
        .get(README_FILE)
        .ok_or_else(|| bundle_err(format!("no {README_FILE}")))?;
    let readme_text = std::str::from_utf8(readme_bytes)
        .map_err(|_| bundle_err(format!("{README_FILE} is not UTF-8")))?;
    check_readme(readme_text, &index).map_err(|e| {
        bundle_err(format!(
            "{README_FILE} does not state what {INDEX_FILE} says: {e}"
        ))
    })?;

    // 6. Receipts against the key and the index.
    let mut by_file: BTreeMap<&str, &IndexEntry> = BTreeMap::new();
    for entry in &index.receipts {
        if by_file.insert(entry.file.as_str(), entry).is_some() {
            return Err(bundle_err(format!(
                "{INDEX_FILE} lists {} twice",
                entry.file
            )));
        }
    }
    let mut by_other: BTreeMap<&str, &OtherEntry> = BTreeMap::new();
    for entry in &index.others {
        if by_file.contains_key(entry.file.as_str())
            || by_other.insert(entry.file.as_str(), entry).is_some()
        {
            return Err(bundle_err(format!(
                "{INDEX_FILE} lists {} twice",
                entry.file
            )));
        }
    }
    let work: Vec<_> = contents
        .iter()
        .filter(|(p, _)| receipt_name_of(p).is_some())
        .map(|(path, bytes)| {
            let entries = (
                by_file.remove(path.as_str()),
                by_other.remove(path.as_str()),
            );
            (path, bytes, entries)
        })
        .collect();
    let checked: Vec<_> = check_each(&work, |&(path, bytes, entries)| {
        let mut kept = None;
        let keep = (keep == Keep::Statements).then_some(&mut kept);
        let result = check_receipt(path, bytes, &key, entries, opts, keep);
        (path, result, kept)
    });
    let mut lines = Vec::new();
    let mut statements = BTreeMap::new();
    for (path, result, kept) in checked {
        if let (Ok(_), Some(statement)) = (&result, kept) {
            statements.insert(path.clone(), statement);
        }
        lines.push(ReceiptLine {
            file: path.clone(),
            result,
        });
    }
    for file in by_file.into_keys().chain(by_other.into_keys()) {
        lines.push(ReceiptLine {
            file: file.to_string(),
            result: Err(format!("listed in {INDEX_FILE} but not in the bundle")),
        });
    }
    if lines.is_empty() {
        return Err(bundle_err("the bundle holds no receipts"));
    }
    lines.sort_by(|a, b| a.file.cmp(&b.file));

    let report = BundleReport {
        dir: bundle.dir.clone(),
        keyid: key.keyid(),
        key_source,
        files_checked: contents.len(),
        receipts: lines,
    };
    Ok((report, statements))
}

/// Run `check` over every receipt: spread over the cores on native targets,
/// in order in the browser. The results keep `work`'s order.
fn check_each<W: Sync, R: Send>(work: &[W], check: impl Fn(&W) -> R + Sync + Send) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use rayon::prelude::*;
        work.par_iter().map(check).collect()
    }
    #[cfg(target_arch = "wasm32")]
    {
        work.iter().map(check).collect()
    }
}

fn check_receipt(
    path: &str,
    bytes: &[u8],
    key: &PublicKey,
    (entry, other): (Option<&IndexEntry>, Option<&OtherEntry>),
    opts: &VerifyOptions<'_>,
    kept: Option<&mut Option<VerifiedStatement>>,
) -> Result<ReceiptOk, String> {
    let statement = verify_statement(bytes, key).map_err(|e| e.to_string())?;
    // A copy only for a caller that keeps it (the site builder): the whole
    // predicate tree, so `kvw verify` does without.
    if let Some(kept) = kept {
        *kept = Some(statement.clone());
    }
    if statement.predicate_type != PREDICATE_TYPE {
        return check_other(path, statement, (entry, other), opts);
    }
    if other.is_some() {
        return Err(format!(
            "a probe receipt, but {INDEX_FILE} lists it among the other kinds"
        ));
    }
    let verified = VerifiedReceipt::from_statement(statement).map_err(|e| e.to_string())?;
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
        facts: ReceiptFacts::Probe(Box::new(expected)),
        reproduced,
        not_rerun: None,
    })
}

/// A receipt of another kind in `receipts/` ([`super::others`]): signed
/// by the bundle key under its file name, covered by the signed manifest
/// like every receipt, listed in the index's `others` with what
/// [`OtherEntry::for_statement`] recomputes, and re-run when the caller can.
fn check_other(
    path: &str,
    statement: VerifiedStatement,
    (entry, other): (Option<&IndexEntry>, Option<&OtherEntry>),
    opts: &VerifyOptions<'_>,
) -> Result<ReceiptOk, String> {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    if statement.name != file_name {
        return Err(format!(
            "signed under the name {:?}, stored as {file_name:?}",
            statement.name
        ));
    }
    // An unknown kind is named as such before any index question.
    let expected = OtherEntry::for_statement(path, &statement)?;
    if entry.is_some() {
        return Err(format!(
            "not a probe receipt, but {INDEX_FILE} lists it as a probe run"
        ));
    }
    let listed = other.ok_or_else(|| format!("not listed in {INDEX_FILE}"))?;
    if *listed != expected {
        return Err(format!("{INDEX_FILE} entry does not match the receipt"));
    }
    let rerun = match opts.reproduce_other {
        Some(rerun) => Some(rerun(&statement)?),
        None => None,
    };
    Ok(ReceiptOk {
        name: statement.name,
        facts: ReceiptFacts::Other(expected.facts),
        reproduced: false,
        not_rerun: None,
    }
    .with_rerun(rerun))
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
