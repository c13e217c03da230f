//! The signing flags every receipt-writing command shares, and the one
//! place a command loads its signing key.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use kvw_evidence::Signer;

use crate::write::ForceArg;

/// `--key FILE` and `--force`, flattened into each command that signs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SignArgs {
    /// Signing key file (default: the local key, $KVW_KEY or
    /// ~/.config/kvwitness/signing-key.json, created on first use).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    #[command(flatten)]
    pub replace: ForceArg,
}

impl SignArgs {
    /// Whether an existing output may be replaced.
    pub fn force(&self) -> bool {
        self.replace.force
    }

    pub fn key(&self) -> Option<&Path> {
        self.key.as_deref()
    }
}

/// The key at `path`, or the default key (created on first use), with the
/// file it came from.
pub fn signer(path: Option<&Path>) -> anyhow::Result<(Signer, PathBuf)> {
    match path {
        Some(p) => Ok((
            Signer::load(p).map_err(|e| anyhow!("{e}"))?,
            p.to_path_buf(),
        )),
        None => Signer::load_or_create_default().map_err(|e| anyhow!("{e}")),
    }
}
