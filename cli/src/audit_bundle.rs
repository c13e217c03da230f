//! `kvw audit --out DIR`: the gate receipts as a signed bundle.
//!
//! The folder is checked and the key loaded before the audit sends
//! anything, so a refusal costs no traffic. Once every gate has run, each
//! gate's predicate is signed as `receipts/<gate>.receipt.json` and the lot
//! is written by [`write_bundle_with_others`] (index, signed manifest,
//! `SHA256SUMS`, README, key), built beside the target and renamed into
//! place: the folder appears whole or not at all. It is read back as
//! `kvw verify` reads it before the command reports it.
//!
//! An existing non-empty folder is refused; with `--force` an earlier
//! bundle there is replaced (any other folder is still refused).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use kvw_evidence::audit::AuditPredicate;
use kvw_evidence::bundle::{check_target, write_bundle_with_others, VerifyOptions};
use kvw_evidence::{sign_statement, verify_bundle, Signer};

/// Where the bundle goes and what signs it, checked before any request.
pub struct AuditBundle {
    dir: PathBuf,
    signer: Signer,
}

/// The receipt name of `gate` in the bundle.
pub fn receipt_name(gate: &str) -> String {
    format!("{gate}.receipt.json")
}

impl AuditBundle {
    /// Check `dir` and load the key (`key`, else the default one).
    pub fn prepare(dir: &Path, key: Option<&Path>, force: bool) -> anyhow::Result<AuditBundle> {
        if !force && non_empty(dir)? {
            bail!(
                "{} already exists and is not empty; refusing to write the audit bundle there \
                 (pass --force to replace an earlier bundle)",
                dir.display()
            );
        }
        check_target(dir).map_err(|e| anyhow!("{e}"))?;
        let (signer, _) = crate::sign::signer(key)?;
        Ok(AuditBundle {
            dir: dir.to_path_buf(),
            signer,
        })
    }

    /// Sign every gate's predicate, write the bundle, read it back; the
    /// line that says what was written.
    pub fn write(self, predicates: &[&AuditPredicate]) -> anyhow::Result<String> {
        let mut others = Vec::with_capacity(predicates.len());
        for p in predicates {
            let name = receipt_name(&p.gate);
            let envelope = sign_statement(&name, *p, &self.signer)
                .map_err(|e| anyhow!("cannot sign {name}: {e}"))?;
            others.push((name, envelope));
        }
        let written = write_bundle_with_others(&self.dir, Vec::new(), others, &self.signer)
            .map_err(|e| anyhow!("{e}"))?;
        let report = verify_bundle(
            &written.dir,
            &VerifyOptions {
                trusted_key: Some(self.signer.public()),
                reproduce: None,
                reproduce_other: None,
            },
        )
        .map_err(|e| anyhow!("the audit bundle just written does not verify: {e}"))?;
        if !report.ok() {
            bail!(
                "the audit bundle just written does not verify: {}",
                report.summary()
            );
        }
        Ok(format!(
            "wrote the audit bundle {} ({} gate receipts, keyid {}); check it with kvw verify {0}",
            written.dir.display(),
            written.receipts,
            written.keyid
        ))
    }
}

/// Whether `dir` is a folder holding anything (a file or a link there is
/// left to [`check_target`] to refuse).
fn non_empty(dir: &Path) -> anyhow::Result<bool> {
    match dir.symlink_metadata() {
        Ok(meta) if meta.is_dir() => Ok(std::fs::read_dir(dir)
            .map_err(|e| anyhow!("cannot list {}: {e}", dir.display()))?
            .next()
            .is_some()),
        _ => Ok(false),
    }
}
