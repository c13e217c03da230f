//! Writing a bundle.
//!
//! [`write_bundle`] builds the folder in a temporary sibling and renames it
//! into place ([`crate::staged`]), so a reader never sees half a bundle and a failure leaves
//! nothing behind. It replaces an older bundle, and refuses any other
//! non-empty folder; [`check_target`] says so before any work is done.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::index::{BundleIndex, IndexEntry};
use super::others::OtherEntry;
use super::readme::readme;
use super::{
    manifest, sums, BUNDLE_FORMAT, INDEX_FILE, MANIFEST_FILE, README_FILE, RECEIPTS_DIR, SUMS_FILE,
};
use crate::dsse::Envelope;
use crate::error::EvidenceError;
use crate::predicate::{ProbePredicate, PREDICATE_TYPE};
use crate::receipt::{check_receipt_name, verify_receipt, verify_statement};
use crate::signing::{Signer, PUBLIC_KEY_FILE};
use crate::staged::{Staged, Target};

/// What [`write_bundle`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenBundle {
    pub dir: PathBuf,
    pub receipts: usize,
    pub keyid: String,
}

/// Write a bundle of `receipts` (file name, envelope, the predicate it
/// carries), signed by `signer`, into `dir`, atomically.
///
/// Every envelope must verify with the signer's public key and carry exactly
/// the given predicate under the given name; the manifest is signed with
/// `signer`. `dir` may be absent, empty, or an older bundle (which is
/// replaced); any other existing path is refused (see [`check_target`]).
pub fn write_bundle(
    dir: &Path,
    receipts: Vec<(String, Envelope, ProbePredicate)>,
    signer: &Signer,
) -> Result<WrittenBundle, EvidenceError> {
    write_bundle_with_model_checks(dir, receipts, Vec::new(), signer)
}

/// [`write_bundle`], also carrying model-check receipts. Kept for callers
/// that have only those; see [`write_bundle_with_others`].
pub fn write_bundle_with_model_checks(
    dir: &Path,
    receipts: Vec<(String, Envelope, ProbePredicate)>,
    model_checks: Vec<(String, Envelope)>,
    signer: &Signer,
) -> Result<WrittenBundle, EvidenceError> {
    write_bundle_with_others(dir, receipts, model_checks, signer)
}

/// [`write_bundle`], also carrying receipts of the other kinds
/// ([`OTHER_PREDICATE_TYPES`](super::others::OTHER_PREDICATE_TYPES): model
/// checks, scenarios, gate runs, randomized runs), each given as (file
/// name, envelope). They go to `receipts/` and the signed manifest like
/// every receipt, and to the index's `others`. `receipts` may be empty when
/// `others` is not (an audit bundle holds no probe run).
pub fn write_bundle_with_others(
    dir: &Path,
    receipts: Vec<(String, Envelope, ProbePredicate)>,
    others: Vec<(String, Envelope)>,
    signer: &Signer,
) -> Result<WrittenBundle, EvidenceError> {
    let public = &signer.public();
    check_target(dir)?;
    // A bundle of other kinds only (an audit's gate receipts) is a bundle
    // too; one with nothing in it is not.
    if receipts.is_empty() && others.is_empty() {
        return Err(EvidenceError::Bundle("no receipts to write".into()));
    }
    let count = receipts.len() + others.len();
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut entries = Vec::with_capacity(receipts.len());
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
    let mut other_entries = Vec::with_capacity(others.len());
    for (name, envelope) in others {
        check_receipt_name(&name)?;
        let file = format!("{RECEIPTS_DIR}/{name}");
        let bytes = envelope.to_json_pretty().into_bytes();
        let statement = verify_statement(&bytes, public).map_err(|e| {
            EvidenceError::Bundle(format!(
                "receipt {name} does not verify with the bundle key: {e}"
            ))
        })?;
        if statement.name != name || files.contains_key(&file) {
            return Err(EvidenceError::Bundle(format!(
                "receipt {name} is signed under the name {} or named twice",
                statement.name
            )));
        }
        let entry = OtherEntry::for_statement(&file, &statement)
            .map_err(|e| EvidenceError::Bundle(format!("receipt {name}: {e}")))?;
        other_entries.push(entry);
        files.insert(file, bytes);
    }
    other_entries.sort_by(|a, b| a.file.cmp(&b.file));
    entries.sort_by(|a, b| a.file.cmp(&b.file));
    let index = BundleIndex {
        format: BUNDLE_FORMAT.to_string(),
        predicate_type: PREDICATE_TYPE.to_string(),
        keyid: public.keyid(),
        receipts: entries,
        others: other_entries,
    };
    let mut index_json =
        serde_json::to_string_pretty(&index).map_err(|e| EvidenceError::json("index", e))?;
    index_json.push('\n');
    files.insert(README_FILE.to_string(), readme(&index).into_bytes());
    files.insert(INDEX_FILE.to_string(), index_json.into_bytes());
    files.insert(PUBLIC_KEY_FILE.to_string(), public.to_json().into_bytes());
    let manifest = manifest::sign(&files, signer)?;
    files.insert(MANIFEST_FILE.to_string(), manifest.into_bytes());
    let sums = sums::render(&files);
    files.insert(SUMS_FILE.to_string(), sums.into_bytes());

    place_atomically(dir, &files)?;
    Ok(WrittenBundle {
        dir: dir.to_path_buf(),
        receipts: count,
        keyid: public.keyid(),
    })
}

/// Check that a bundle may be written at `dir` without writing anything: it
/// is absent, an empty folder or an older bundle. Callers that do expensive
/// work before [`write_bundle`] call this first.
pub fn check_target(dir: &Path) -> Result<(), EvidenceError> {
    inspect_target(dir).map(|_| ())
}

/// What is at the path a bundle is about to be written to.
fn inspect_target(dir: &Path) -> Result<Target, EvidenceError> {
    let meta = match dir.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Absent),
        Err(e) => return Err(EvidenceError::io("inspect", dir, e)),
    };
    if !meta.is_dir() {
        return Err(EvidenceError::Bundle(format!(
            "{} exists and is not a folder (a link, file or other); refusing to replace it",
            dir.display()
        )));
    }
    let names = list_names(dir)?;
    if names.is_empty() {
        return Ok(Target::Empty);
    }
    let known = [
        SUMS_FILE,
        INDEX_FILE,
        PUBLIC_KEY_FILE,
        README_FILE,
        MANIFEST_FILE,
        RECEIPTS_DIR,
    ];
    let looks_like_bundle = names.contains(SUMS_FILE)
        && names.contains(INDEX_FILE)
        && names.iter().all(|n| known.contains(&n.as_str()))
        && receipts_dir_is_ours(&dir.join(RECEIPTS_DIR))?;
    if looks_like_bundle {
        Ok(Target::Earlier)
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

fn place_atomically(dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<(), EvidenceError> {
    let staged = Staged::begin(dir, inspect_target(dir)?)?;
    let receipts = staged.path().join(RECEIPTS_DIR);
    std::fs::create_dir(&receipts).map_err(|e| EvidenceError::io("create folder", &receipts, e))?;
    for (rel, bytes) in files {
        write_new_file(&staged.path().join(rel), bytes)?;
    }
    staged.commit()
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
