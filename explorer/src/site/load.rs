//! Reading a bundle for the site: read once, verify once, sort by kind.
//!
//! The bundle is read with the evidence crate's reader (the layout rules of
//! `kvw verify`) and verified by the same function `kvw verify` runs, which
//! checks each receipt's signature and hands back the statement it
//! verified ([`verify_files_keeping`]). Any receipt that fails refuses the
//! whole build: a site publishes only a bundle that `kvw verify` accepts.
//! Each statement is then parsed as the kind its `predicateType` names, here
//! and nowhere else; no page module opens an envelope.

use std::sync::Arc;

use kvw_evidence::audit::{AuditPredicate, AUDIT_PREDICATE_TYPE};
use kvw_evidence::bundle::{read_bundle, receipt_name_of, verify_files_keeping, VerifyOptions};
use kvw_evidence::canonical::sha256_hex;
use kvw_evidence::error::EvidenceError;
use kvw_evidence::model_check::{ModelCheckPredicate, MODEL_CHECK_PREDICATE_TYPE};
use kvw_evidence::receipt::{VerifiedReceipt, VerifiedStatement};
use kvw_evidence::scenario::{
    FuzzPredicate, GatesPredicate, ScenarioPredicate, FUZZ_PREDICATE_TYPE, GATES_PREDICATE_TYPE,
    SCENARIO_PREDICATE_TYPE,
};
use kvw_evidence::signing::PUBLIC_KEY_FILE;
use kvw_evidence::upstream_run::{UpstreamRunPredicate, UPSTREAM_RUN_PREDICATE_TYPE};
use kvw_evidence::PREDICATE_TYPE;

use super::SiteError;
use crate::page_data::Shown;

/// What a receipt holds, parsed once from its verified statement (boxed:
/// the kinds differ much in size).
#[derive(Debug, Clone)]
pub enum Kind {
    /// A probe run: replayed step by step.
    Probe(Shown),
    ModelCheck(Box<ModelCheckPredicate>),
    Scenario(Box<ScenarioPredicate>),
    Gates(Box<GatesPredicate>),
    Fuzz(Box<FuzzPredicate>),
    Audit(Box<AuditPredicate>),
    UpstreamRun(Box<UpstreamRunPredicate>),
}

impl Kind {
    /// The kind in a word, for the build report.
    pub fn word(&self) -> &'static str {
        match self {
            Kind::Probe(_) => "probe run",
            Kind::ModelCheck(_) => "model check",
            Kind::Scenario(_) => "scenario",
            Kind::Gates(_) => "gates",
            Kind::Fuzz(_) => "randomized runs",
            Kind::Audit(_) => "audit",
            Kind::UpstreamRun(_) => "upstream run",
        }
    }
}

/// One receipt of the bundle, verified.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// File name without `.json`.
    pub stem: String,
    /// The envelope as stored, byte for byte.
    pub envelope: Vec<u8>,
    pub kind: Kind,
}

/// A bundle read and verified as `kvw verify` does.
#[derive(Debug)]
pub struct LoadedBundle {
    /// `kvw.pub.json` as stored.
    pub public_key: String,
    /// Every receipt, sorted by file name.
    pub receipts: Vec<Loaded>,
    /// `index.json`, `SHA256SUMS`, `README.md`, `manifest.json` as read.
    pub extras: Vec<(&'static str, Vec<u8>)>,
}

impl LoadedBundle {
    /// The audit receipts, in bundle order.
    pub fn audits(&self) -> impl Iterator<Item = (&Loaded, &AuditPredicate)> {
        self.receipts.iter().filter_map(|l| match &l.kind {
            Kind::Audit(p) => Some((l, &**p)),
            _ => None,
        })
    }

    /// The probe runs, in bundle order.
    pub fn probes(&self) -> impl Iterator<Item = (&Loaded, &Shown)> {
        self.receipts.iter().filter_map(|l| match &l.kind {
            Kind::Probe(shown) => Some((l, shown)),
            _ => None,
        })
    }
}

/// Read and verify the bundle (see the module documentation).
pub fn load_bundle(bundle: &std::path::Path) -> Result<LoadedBundle, SiteError> {
    let files = read_bundle(bundle)?;
    let (report, mut statements) = verify_files_keeping(&files, &VerifyOptions::default())?;
    if let Some(line) = report.receipts.iter().find(|l| l.result.is_err()) {
        let reason = line.result.as_ref().err().cloned().unwrap_or_default();
        return Err(SiteError::Receipt {
            file: line.file.clone(),
            reason,
        });
    }
    let public_key = files
        .get(PUBLIC_KEY_FILE)
        .ok_or_else(|| SiteError::NoPublicKey(bundle.to_path_buf()))?;
    let public_key = String::from_utf8(public_key.to_vec())
        .map_err(|_| EvidenceError::Key("kvw.pub.json is not UTF-8".into()))?;
    let mut receipts = Vec::new();
    for line in &report.receipts {
        let Some(statement) = statements.remove(&line.file) else {
            continue;
        };
        let name = receipt_name_of(&line.file).unwrap_or(&line.file);
        let stem = name.strip_suffix(".json").unwrap_or(name).to_string();
        let envelope = files.get(&line.file).unwrap_or_default().to_vec();
        let kind = parse(&stem, &envelope, statement).map_err(|reason| SiteError::Receipt {
            file: line.file.clone(),
            reason,
        })?;
        receipts.push(Loaded {
            stem,
            envelope,
            kind,
        });
    }
    // A site opens on a probe run, or on the report of an audit bundle
    // (`kvw audit --out`), which holds no probe run.
    if !receipts
        .iter()
        .any(|l| matches!(l.kind, Kind::Probe(_) | Kind::Audit(_)))
    {
        return Err(SiteError::NoReceipts(bundle.to_path_buf()));
    }
    let extras = ["index.json", "SHA256SUMS", "README.md", "manifest.json"]
        .into_iter()
        .filter_map(|name| files.get(name).map(|b| (name, b.to_vec())))
        .collect();
    Ok(LoadedBundle {
        public_key,
        receipts,
        extras,
    })
}

/// The one dispatch on `predicateType`: a verified statement as its kind.
fn parse(stem: &str, envelope: &[u8], statement: VerifiedStatement) -> Result<Kind, String> {
    let e = |e: EvidenceError| e.to_string();
    Ok(match statement.predicate_type.as_str() {
        PREDICATE_TYPE => {
            let verified = VerifiedReceipt::from_statement(statement).map_err(e)?;
            Kind::Probe(Shown::Verified {
                stem: stem.to_string(),
                keyid: verified.keyid,
                sha256: sha256_hex(envelope),
                predicate: Arc::new(verified.predicate),
            })
        }
        MODEL_CHECK_PREDICATE_TYPE => Kind::ModelCheck(Box::new(statement.parse().map_err(e)?)),
        SCENARIO_PREDICATE_TYPE => Kind::Scenario(Box::new(statement.parse().map_err(e)?)),
        GATES_PREDICATE_TYPE => Kind::Gates(Box::new(statement.parse().map_err(e)?)),
        FUZZ_PREDICATE_TYPE => Kind::Fuzz(Box::new(statement.parse().map_err(e)?)),
        AUDIT_PREDICATE_TYPE => Kind::Audit(Box::new(statement.parse().map_err(e)?)),
        UPSTREAM_RUN_PREDICATE_TYPE => Kind::UpstreamRun(Box::new(statement.parse().map_err(e)?)),
        other => return Err(format!("no page for predicate type {other:?}")),
    })
}
