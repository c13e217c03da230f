//! Replacing a folder all at once.
//!
//! A bundle and a site are both folders that readers must never see half
//! written. [`Staged`] builds the new folder in a hidden sibling of the
//! target and renames it into place on [`Staged::commit`]; dropped without
//! committing (an error on the way), it removes what it wrote. What may be
//! replaced is the caller's question (a bundle replaces an older bundle, a
//! site an older site): the caller inspects the target first and says what
//! it found ([`Target`]).

use std::path::{Path, PathBuf};

use crate::error::EvidenceError;

/// What is at the target path, as the caller found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Nothing: the new folder is renamed to it.
    Absent,
    /// An empty folder: removed, then the new folder takes its place.
    Empty,
    /// An earlier folder of the same kind: moved aside, replaced, deleted.
    Earlier,
}

/// A folder being built beside its target.
#[derive(Debug)]
pub struct Staged {
    target: PathBuf,
    found: Target,
    /// The hidden sibling; `None` once committed.
    tmp: Option<PathBuf>,
}

impl Staged {
    /// Create the hidden sibling of `target` (and `target`'s parent if
    /// needed) to build in.
    pub fn begin(target: &Path, found: Target) -> Result<Staged, EvidenceError> {
        let parent = parent_of(target);
        std::fs::create_dir_all(&parent)
            .map_err(|e| EvidenceError::io("create folder", &parent, e))?;
        let tmp = sibling(target, "partial")?;
        std::fs::create_dir(&tmp).map_err(|e| EvidenceError::io("create folder", &tmp, e))?;
        Ok(Staged {
            target: target.to_path_buf(),
            found,
            tmp: Some(tmp),
        })
    }

    /// The folder to build in.
    pub fn path(&self) -> &Path {
        self.tmp.as_deref().unwrap_or(&self.target)
    }

    /// Put the built folder in place of the target. An earlier folder is
    /// moved back if the rename fails, so the target is either the old
    /// folder or the new one, never neither.
    pub fn commit(mut self) -> Result<(), EvidenceError> {
        let Some(tmp) = self.tmp.clone() else {
            return Ok(());
        };
        let target = self.target.clone();
        let rename = |from: &Path, to: &Path| {
            std::fs::rename(from, to).map_err(|e| EvidenceError::io("move a folder into", to, e))
        };
        match self.found {
            Target::Absent => rename(&tmp, &target)?,
            Target::Empty => {
                std::fs::remove_dir(&target)
                    .map_err(|e| EvidenceError::io("replace", &target, e))?;
                rename(&tmp, &target)?;
            }
            Target::Earlier => {
                let old = sibling(&target, "old")?;
                rename(&target, &old)?;
                if let Err(e) = rename(&tmp, &target) {
                    let _ = std::fs::rename(&old, &target);
                    return Err(e);
                }
                // The new folder is in place; a leftover old copy is harmless.
                let _ = std::fs::remove_dir_all(&old);
            }
        }
        self.tmp = None;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_dir_all(tmp);
        }
    }
}

fn parent_of(target: &Path) -> PathBuf {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `.<name>.<tag>-<pid>-<nanos>` beside `target`.
fn sibling(target: &Path, tag: &str) -> Result<PathBuf, EvidenceError> {
    let base = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            EvidenceError::Bundle(format!("{} does not name a folder", target.display()))
        })?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok(parent_of(target).join(format!(".{base}.{tag}-{}-{nanos}", std::process::id())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_earlier_folder_is_replaced_whole_and_a_dropped_build_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("old.txt"), b"old").unwrap();

        let staged = Staged::begin(&target, Target::Earlier).unwrap();
        std::fs::write(staged.path().join("new.txt"), b"new").unwrap();
        drop(staged);
        assert!(
            target.join("old.txt").is_file(),
            "a dropped build changes nothing"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let staged = Staged::begin(&target, Target::Earlier).unwrap();
        std::fs::write(staged.path().join("new.txt"), b"new").unwrap();
        staged.commit().unwrap();
        assert!(target.join("new.txt").is_file());
        assert!(!target.join("old.txt").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
