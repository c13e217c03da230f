//! Reading a bundle folder under the layout rules, before anything in it is
//! believed.
//!
//! [`read_bundle`] is the only way this crate (and the site builder) reads a
//! bundle. It refuses, with one line naming the path:
//!
//! * a bundle path that is a symbolic link or not a folder;
//! * symbolic links anywhere inside (never followed, also not at open time),
//!   FIFOs, sockets and devices (never opened, so nothing blocks);
//! * any folder but `receipts/`, an empty `receipts/`, nesting;
//! * file names that are not UTF-8;
//! * more than [`MAX_FILES`] files, a file over [`MAX_FILE_BYTES`], more
//!   than [`MAX_BUNDLE_BYTES`] in all;
//! * a missing `SHA256SUMS`, a file present but not listed, one listed but
//!   missing, and any digest mismatch.
//!
//! What it returns is every file's bytes, read once: later checks never go
//! back to the file system, so nothing can change between check and use.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    bundle_err, sums, MAX_BUNDLE_BYTES, MAX_FILES, MAX_FILE_BYTES, RECEIPTS_DIR, SUMS_FILE,
};
use crate::canonical::sha256_hex;
use crate::error::EvidenceError;
use crate::fsutil::{kind_of, read_no_follow};

/// A bundle's files, read under the layout rules and matching `SHA256SUMS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFiles {
    /// The folder as given.
    pub dir: PathBuf,
    /// Bundle path (`index.json`, `receipts/<name>`) → bytes, `SHA256SUMS`
    /// included.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl BundleFiles {
    /// Bytes of the file at bundle path `path`, if present.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }
}

/// Read the bundle folder `dir` (see the module documentation).
pub fn read_bundle(dir: &Path) -> Result<BundleFiles, EvidenceError> {
    let meta = dir
        .symlink_metadata()
        .map_err(|e| EvidenceError::io("open", dir, e))?;
    if meta.file_type().is_symlink() {
        return Err(bundle_err(format!(
            "{} is a symbolic link; give the bundle folder itself, not a link to it",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(bundle_err(format!(
            "{} is {}, not a bundle folder",
            dir.display(),
            kind_of(&meta)
        )));
    }
    let root = dir
        .canonicalize()
        .map_err(|e| EvidenceError::io("resolve", dir, e))?;

    let mut present = Vec::new();
    walk(&root, "", &mut present)?;
    if present.is_empty() {
        return Err(bundle_err(format!(
            "{} is empty, not a bundle",
            dir.display()
        )));
    }
    if !present.iter().any(|p| p == SUMS_FILE) {
        return Err(bundle_err(format!("no {SUMS_FILE} in {}", dir.display())));
    }

    let sums_bytes = read_no_follow(&root.join(SUMS_FILE), MAX_FILE_BYTES, "SHA256SUMS")?;
    let sums_text = std::str::from_utf8(&sums_bytes)
        .map_err(|_| bundle_err(format!("{SUMS_FILE} is not UTF-8 text")))?;
    let listed = sums::parse(sums_text)?;
    for path in &present {
        if path != SUMS_FILE && !listed.contains_key(path) {
            return Err(bundle_err(format!(
                "{path} is in the bundle but not listed in {SUMS_FILE}"
            )));
        }
    }
    for path in listed.keys() {
        if !present.contains(path) {
            return Err(bundle_err(format!(
                "{SUMS_FILE}: {path} is listed but missing"
            )));
        }
    }

    let mut files = BTreeMap::new();
    let mut total = sums_bytes.len() as u64;
    for (path, expected) in &listed {
        let bytes = read_no_follow(&root.join(path), MAX_FILE_BYTES, "bundle file")
            .map_err(|e| e.unlocated().in_file(path))?;
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
        files.insert(path.clone(), bytes);
    }
    files.insert(SUMS_FILE.to_string(), sums_bytes);
    Ok(BundleFiles {
        dir: dir.to_path_buf(),
        files,
    })
}

/// Collect the files of a bundle as `/`-joined relative paths: regular files
/// at the top and in `receipts/`, nothing else.
fn walk(root: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), EvidenceError> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let mut entries = 0usize;
    for entry in std::fs::read_dir(&dir).map_err(|e| EvidenceError::io("list", &dir, e))? {
        let entry = entry.map_err(|e| EvidenceError::io("list", &dir, e))?;
        entries += 1;
        let Ok(name) = entry.file_name().into_string() else {
            return Err(bundle_err(format!(
                "a file name in {} is not UTF-8",
                if rel.is_empty() { "the bundle" } else { rel }
            )));
        };
        let path = if rel.is_empty() {
            name.clone()
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
            if !rel.is_empty() || name != RECEIPTS_DIR {
                return Err(bundle_err(format!(
                    "unexpected folder {path}; a bundle holds only {RECEIPTS_DIR}/"
                )));
            }
            walk(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path);
            if out.len() > MAX_FILES {
                return Err(bundle_err(format!("more than {MAX_FILES} files")));
            }
        } else {
            return Err(bundle_err(format!(
                "{path} is {}, not a regular file",
                kind_of(&meta)
            )));
        }
    }
    if entries == 0 && !rel.is_empty() {
        return Err(bundle_err(format!("{rel} is an empty folder")));
    }
    Ok(())
}
