//! The output folder of a site build.
//!
//! The output must be absent, empty, or an earlier site (which is
//! replaced); any other folder is refused before anything is read
//! ([`inspect_out`]). The site is built in a hidden sibling and renamed into
//! place by the evidence crate's [`Staged`], the same swap a bundle uses.
//! Inside it every file is written create-new by [`SiteWriter`], so two
//! pages that would land on one path (a receipt named after a page of the
//! site, say) are an error, never a silent overwrite; and the bytes written
//! per receipt are counted against [`MAX_BYTES_PER_RECEIPT`].

use std::collections::BTreeSet;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use kvw_evidence::staged::{Staged, Target};

use super::{SiteError, WASM_BIN, WASM_JS};
use crate::i18n::Lang;

/// Most bytes the pages and copies of one receipt may add to a site (both
/// languages together). The page modules draw at most
/// [`crate::limits::MAX_DRAWN_STEPS`] steps, which keeps a receipt far
/// below this; the cap stops anything that slips past them.
pub const MAX_BYTES_PER_RECEIPT: u64 = 64 * 1024 * 1024;

/// Names a site built here may hold at its top.
const SITE_NAMES: [&str; 13] = [
    "index.html",
    "catalog.json",
    "compare.html",
    "en",
    "it",
    "receipts",
    "kvw.pub.json",
    "bundle",
    "pkg",
    "style.css",
    "embed.js",
    "embed-example.html",
    "EMBED.md",
];

/// What the output folder holds now, checked before anything is read.
pub fn inspect_out(out: &Path) -> Result<Target, SiteError> {
    let meta = match out.symlink_metadata() {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Target::Absent),
        Err(source) => {
            return Err(SiteError::Read {
                path: out.to_path_buf(),
                source,
            })
        }
    };
    if !meta.is_dir() {
        return Err(SiteError::Out(format!(
            "{} exists and is not a folder (a link, file or other); refusing to replace it",
            out.display()
        )));
    }
    let names: BTreeSet<String> = fs::read_dir(out)
        .map_err(|source| SiteError::Read {
            path: out.to_path_buf(),
            source,
        })?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() {
        return Ok(Target::Empty);
    }
    let old_site = names.contains("index.html")
        && names.contains("embed.js")
        && names.iter().all(|n| {
            let plain = n
                .strip_suffix(".gz")
                .or_else(|| n.strip_suffix(".br"))
                .unwrap_or(n);
            SITE_NAMES.contains(&plain)
        });
    if old_site {
        Ok(Target::Earlier)
    } else {
        Err(SiteError::Out(format!(
            "{} is a non-empty folder that is not a kvwitness site; refusing to write into it",
            out.display()
        )))
    }
}

/// Begin building the site beside `out`.
pub fn stage(out: &Path, found: Target) -> Result<Staged, SiteError> {
    Staged::begin(out, found).map_err(|e| SiteError::Out(e.to_string()))
}

/// Writes the files of one site build, each once.
pub struct SiteWriter {
    root: PathBuf,
    /// Bytes written within the current [`SiteWriter::for_receipt`].
    receipt_bytes: u64,
    /// The receipt whose pages are being written, for the error.
    receipt: Option<String>,
}

impl SiteWriter {
    pub fn new(root: &Path) -> SiteWriter {
        SiteWriter {
            root: root.to_path_buf(),
            receipt_bytes: 0,
            receipt: None,
        }
    }

    /// The folder being written.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Run `write` with what it puts counted against receipt `stem`'s
    /// byte budget.
    pub fn for_receipt<T>(
        &mut self,
        stem: &str,
        write: impl FnOnce(&mut SiteWriter) -> Result<T, SiteError>,
    ) -> Result<T, SiteError> {
        self.receipt = Some(stem.to_string());
        self.receipt_bytes = 0;
        let result = write(self);
        self.receipt = None;
        result
    }

    /// Write `rel` (a path inside the site), refusing one already written.
    pub fn put(&mut self, rel: &str, bytes: impl AsRef<[u8]>) -> Result<(), SiteError> {
        let bytes = bytes.as_ref();
        if let Some(stem) = &self.receipt {
            self.receipt_bytes += bytes.len() as u64;
            if self.receipt_bytes > MAX_BYTES_PER_RECEIPT {
                return Err(SiteError::TooLarge {
                    stem: stem.clone(),
                    limit: MAX_BYTES_PER_RECEIPT,
                });
            }
        }
        let path = self.root.join(rel);
        let wrap = |source| SiteError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(wrap)?;
        }
        let mut file = match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(SiteError::Collision(rel.to_string()))
            }
            Err(e) => return Err(wrap(e)),
        };
        file.write_all(bytes).map_err(wrap)
    }
}

/// The browser build's files, one pair per language, relative to its folder.
fn wasm_files() -> impl Iterator<Item = String> {
    Lang::ALL.into_iter().flat_map(|lang| {
        [WASM_JS, WASM_BIN].map(|name| format!("{}{name}", crate::i18n::pkg_folder(lang)))
    })
}

/// Whether `dir` holds the browser build of every language.
pub fn wasm_complete(dir: &Path) -> bool {
    wasm_files().all(|name| dir.join(name).is_file())
}

/// Copy the browser build into `pkg/`; `Ok(false)` when none is given.
pub fn copy_wasm(wasm_dir: Option<&Path>, w: &mut SiteWriter) -> Result<bool, SiteError> {
    let Some(dir) = wasm_dir else {
        return Ok(false);
    };
    if !wasm_complete(dir) {
        return Err(SiteError::NoWasm(dir.to_path_buf()));
    }
    for name in wasm_files() {
        let bytes = fs::read(dir.join(&name)).map_err(|source| SiteError::Read {
            path: dir.join(&name),
            source,
        })?;
        w.put(&format!("pkg/{name}"), bytes)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_written_once_and_a_receipt_within_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SiteWriter::new(dir.path());
        w.put("en/gates.html", "the gates table").unwrap();
        let again = w.put("en/gates.html", "a receipt's page").unwrap_err();
        assert!(matches!(again, SiteError::Collision(ref p) if p == "en/gates.html"));
        assert_eq!(
            fs::read_to_string(dir.path().join("en/gates.html")).unwrap(),
            "the gates table"
        );

        let chunk = vec![b'x'; (MAX_BYTES_PER_RECEIPT / 2) as usize];
        let over = w.for_receipt("big", |w| {
            w.put("en/big.html", &chunk)?;
            w.put("it/big.html", &chunk)?;
            w.put("receipts/big.json", b"{}")
        });
        assert!(matches!(over, Err(SiteError::TooLarge { ref stem, .. }) if stem == "big"));
        // Outside a receipt nothing is counted.
        w.put("style.css", &chunk).unwrap();
    }
}
