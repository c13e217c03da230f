//! `kvw keygen`: create an ed25519 signing key pair.
//!
//! Writes `signing-key.json` (the private key, mode 0600) and `kvw.pub.json`
//! (the public key to publish) into one folder. It never overwrites either
//! file, and refuses to put a private key inside a git work tree, so a key
//! cannot be replaced or committed by accident. Without `--out` the pair
//! goes where `kvw bundle` looks for its default key.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use kvw_evidence::signing::{refuse_git_work_tree, PRIVATE_KEY_FILE, PUBLIC_KEY_FILE};
use kvw_evidence::Signer;

/// Create an ed25519 signing key and its public key file.
#[derive(clap::Args, Debug, Clone)]
pub struct KeygenArgs {
    /// Folder to write signing-key.json and kvw.pub.json into (created if
    /// missing). Default: the default key location ($KVW_KEY, else
    /// $XDG_CONFIG_HOME/kvwitness or ~/.config/kvwitness).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(args: KeygenArgs) -> anyhow::Result<()> {
    let private = match &args.out {
        Some(dir) => dir.join(PRIVATE_KEY_FILE),
        None => Signer::default_path().map_err(|e| anyhow!("{e}"))?,
    };
    let folder = private
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let public = folder.join(PUBLIC_KEY_FILE);

    refuse_git_work_tree(&private).map_err(|e| anyhow!("{e}"))?;
    for path in [&private, &public] {
        if path.symlink_metadata().is_ok() {
            bail!(
                "{} already exists; refusing to overwrite it",
                path.display()
            );
        }
    }
    create_private_folder(&folder)?;

    let signer = Signer::generate();
    signer.save(&private).map_err(|e| anyhow!("{e}"))?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&public)
        .map_err(|e| anyhow!("cannot create {}: {e}", public.display()))?;
    file.write_all(signer.public().to_json().as_bytes())
        .map_err(|e| anyhow!("cannot write {}: {e}", public.display()))?;

    outln!("keyid       {}", signer.keyid())?;
    outln!(
        "private key {} (mode 0600; keep it secret, never commit it)",
        private.display()
    )?;
    outln!("public key  {} (publish this one)", public.display())?;
    Ok(())
}

/// Create `folder` (and parents) with mode 0700 where the platform has modes.
fn create_private_folder(folder: &Path) -> anyhow::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder
        .create(folder)
        .map_err(|e| anyhow!("cannot create folder {}: {e}", folder.display()))
}
