//! Output files: one rule for every command that writes one.
//!
//! `kvw probe`, `check`, `scenario`, `fuzz`, `gates` and `audit` write signed
//! receipts. A receipt is evidence, so none of them replaces an existing
//! file unless told to: an output that exists is refused, naming it, unless
//! `--force` is given. Every file is written to a temporary file beside it
//! and then renamed into place (without `--force` with a no-clobber rename,
//! so a file created meanwhile is not replaced either): it appears whole or
//! not at all. A command writing several files checks every name before it
//! writes the first, so a refusal leaves nothing behind.

use std::io::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail};

/// `--force`, shared by every command with an output.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct ForceArg {
    /// Replace an output file that already exists (without it, an existing
    /// output is refused and left as it is).
    #[arg(long)]
    pub force: bool,
}

/// Refuse `path` when it exists and `force` is off.
pub fn check_new(path: &Path, force: bool) -> anyhow::Result<()> {
    if force {
        return Ok(());
    }
    if path.symlink_metadata().is_ok() {
        bail!(
            "{} already exists; refusing to replace it (pass --force to replace it)",
            path.display()
        );
    }
    Ok(())
}

/// Write `bytes` to `path` under the rule above.
pub fn write_file(path: &Path, bytes: &[u8], force: bool) -> anyhow::Result<()> {
    check_new(path, force)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| anyhow!("cannot write in {}: {e}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    let persisted = if force {
        tmp.persist(path).map(|_| ())
    } else {
        tmp.persist_noclobber(path).map(|_| ())
    };
    persisted.map_err(|e| {
        if e.error.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow!(
                "{} already exists; refusing to replace it (pass --force to replace it)",
                path.display()
            )
        } else {
            anyhow!("cannot write {}: {}", path.display(), e.error)
        }
    })
}
