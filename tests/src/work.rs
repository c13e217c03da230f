//! A genuine bundle and the private folder each attack works in.
//!
//! [`Work::new`] copies a genuine bundle of three real walkthrough probes
//! (made once per test process, signed with [`attacker`]'s key, as an
//! attacker holding the bundle's key would have it) into a fresh folder
//! beside files "outside" the bundle that hold bait secrets. The forging
//! helpers edit, re-sign and reseal what is in it the way that attacker
//! would; [`snapshot`] is what "nothing was written" is checked against.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kvw_evidence::bundle::readme::readme;
use kvw_evidence::bundle::{manifest, sums, BundleIndex, IndexEntry};
use kvw_evidence::canonical::{canonical_sha256, to_canonical_json};
use kvw_evidence::dsse::Envelope;
use kvw_evidence::receipt::PAYLOAD_TYPE;
use kvw_evidence::{
    sign_predicate, verify_receipt, write_bundle, Fix, PoisonMode, ProbePredicate, Scale, Signer,
};

pub const LEAK: &str = "receipts/incident-walkthrough-fixes-none.json";
pub const CHECKSUM: &str = "receipts/incident-walkthrough-fixes-kv-checksum.json";
pub const REJECT: &str = "receipts/incident-walkthrough-fixes-retire-unadmitted-reject.json";

/// The bundle's signing key, which the forging attacker holds.
pub fn attacker() -> Signer {
    Signer::from_seed(&[0x5a; 32])
}

/// A key the verifier trusts and the attacker does not hold.
pub fn publisher() -> Signer {
    Signer::from_seed(&[0x11; 32])
}

/// A fresh, genuine bundle of three real walkthrough runs (leak, kv-checksum,
/// retire-unadmitted-reject), made once per test process under the first
/// `root` asked for.
fn base_bundle(root: &Path) -> &'static Path {
    static BASE: OnceLock<tempfile::TempDir> = OnceLock::new();
    BASE.get_or_init(|| {
        std::fs::create_dir_all(root).unwrap();
        let tmp = tempfile::tempdir_in(root).unwrap();
        let signer = attacker();
        let receipts = [
            vec![],
            vec![Fix::KvChecksum],
            vec![Fix::RetireUnadmittedReject],
        ]
        .into_iter()
        .map(|fixes| {
            let config = kvw_engine::probe::incident_config(
                Scale::Walkthrough,
                &fixes,
                PoisonMode::Off,
                2026,
            )
            .unwrap();
            let p = kvw_engine::probe::run(&config).unwrap();
            let label = if fixes.is_empty() {
                "none".to_string()
            } else {
                fixes.iter().map(|f| f.name()).collect::<Vec<_>>().join("_")
            };
            let name = format!("incident-walkthrough-fixes-{label}.json");
            let env = sign_predicate(&name, &p, &signer).unwrap();
            (name, env, p)
        })
        .collect();
        write_bundle(&tmp.path().join("bundle"), receipts, &signer).unwrap();
        tmp
    })
    .path()
    .join("bundle")
    .leak()
}

/// One attack's private folder: `bundle/` (a copy of the genuine bundle),
/// room for outputs, and files "outside" the bundle an attacker points at.
pub struct Work {
    pub tmp: tempfile::TempDir,
    pub bundle: PathBuf,
}

impl Work {
    /// A private folder under `root` (created if missing) holding a copy of
    /// the genuine bundle.
    pub fn new(root: &Path) -> Work {
        let base = base_bundle(root);
        let tmp = tempfile::tempdir_in(root).unwrap();
        let bundle = tmp.path().join("bundle");
        copy_dir(base, &bundle);
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(
            outside.join("signing-key.json"),
            b"{\"keyval\":{\"private\":\"SECRET-PRIVATE-KEY\"}}",
        )
        .unwrap();
        std::fs::write(
            outside.join("shadow"),
            b"root:SECRET-SHADOW:19000:0:99999:7:::\n",
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("publisher.pub.json"),
            publisher().public().to_json(),
        )
        .unwrap();
        std::fs::write(
            tmp.path().join("bundle.pub.json"),
            attacker().public().to_json(),
        )
        .unwrap();
        Work { tmp, bundle }
    }

    pub fn root(&self) -> &Path {
        self.tmp.path()
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.bundle.join(rel)
    }

    pub fn at(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.p(rel)).unwrap()
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.p(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let _ = std::fs::remove_file(&path);
        std::fs::write(path, bytes).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        let path = self.p(rel);
        if path.is_dir() && !path.is_symlink() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
    }

    /// Replace `rel` by a symbolic link to `target`.
    pub fn symlink(&self, rel: &str, target: &Path) {
        let path = self.p(rel);
        if path.symlink_metadata().is_ok() {
            self.remove(rel);
        }
        std::os::unix::fs::symlink(target, path).unwrap();
    }

    /// Replace `rel` by a FIFO.
    pub fn fifo(&self, rel: &str) {
        let path = self.p(rel);
        if path.symlink_metadata().is_ok() {
            self.remove(rel);
        }
        mkfifo(&path);
    }

    /// Rewrite `SHA256SUMS` to match the folder (unsigned: anyone can).
    pub fn reseal_sums(&self) {
        let files = regular_files(&self.bundle);
        std::fs::write(self.p("SHA256SUMS"), sums::render(&files)).unwrap();
    }

    /// With the bundle key: README from the current index, manifest and
    /// sums re-signed over what is now in the folder.
    pub fn reseal_keep_index(&self) {
        if let Ok(index) = serde_json::from_slice::<BundleIndex>(&self.read("index.json")) {
            self.write("README.md", readme(&index));
        }
        let mut files = regular_files(&self.bundle);
        files.remove("manifest.json");
        let manifest = manifest::sign(&files, &attacker()).unwrap();
        self.write("manifest.json", manifest);
        self.reseal_sums();
    }

    /// With the bundle key: index entries recomputed from the receipts that
    /// verify (others keep their old entry), then [`Work::reseal_keep_index`].
    pub fn reseal_all(&self) {
        let key = attacker().public();
        let mut index: BundleIndex = serde_json::from_slice(&self.read("index.json")).unwrap();
        let old = index.receipts.clone();
        index.receipts.clear();
        for (path, bytes) in regular_files(&self.bundle) {
            if !path.starts_with("receipts/") {
                continue;
            }
            match verify_receipt(&bytes, &key) {
                Ok(v) => index.receipts.push(IndexEntry::for_receipt(&path, &v)),
                Err(_) => {
                    if let Some(e) = old.iter().find(|e| e.file == path) {
                        index.receipts.push(e.clone());
                    }
                }
            }
        }
        let mut text = serde_json::to_string_pretty(&index).unwrap();
        text.push('\n');
        self.write("index.json", text);
        self.reseal_keep_index();
    }

    /// The decoded payload of the receipt at `rel`.
    pub fn payload(&self, rel: &str) -> Vec<u8> {
        Envelope::from_json(&self.read(rel))
            .unwrap()
            .payload_bytes()
            .unwrap()
    }

    /// Replace the receipt at `rel` by one signed with the bundle key over
    /// `payload` (any bytes).
    pub fn sign_raw(&self, rel: &str, payload: &[u8]) {
        self.write(
            rel,
            Envelope::sign(PAYLOAD_TYPE, payload, &attacker()).to_json_pretty(),
        );
    }

    /// Edit the receipt's statement as JSON, keep the subject digest right,
    /// sign canonically with the bundle key.
    pub fn forge_statement(&self, rel: &str, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut v: serde_json::Value = serde_json::from_slice(&self.payload(rel)).unwrap();
        edit(&mut v);
        if let Ok(digest) = canonical_sha256(&v["predicate"]) {
            if v["subject"].as_array().is_some_and(|s| s.len() == 1) {
                v["subject"][0]["digest"]["sha256"] = digest.into();
            }
        }
        let payload = to_canonical_json(&v).unwrap_or_else(|_| serde_json::to_vec(&v).unwrap());
        self.sign_raw(rel, &payload);
    }

    /// Edit the typed predicate (trace digest kept consistent unless the
    /// edit breaks it on purpose) and sign it canonically under `name`.
    pub fn forge_predicate(&self, rel: &str, name: &str, edit: impl FnOnce(&mut ProbePredicate)) {
        let key = attacker().public();
        let mut p = verify_receipt(&self.read(rel), &key).unwrap().predicate;
        edit(&mut p);
        let statement = kvw_evidence::statement::Statement::for_predicate(
            name,
            kvw_evidence::PREDICATE_TYPE,
            &p,
        )
        .unwrap();
        let payload = to_canonical_json(&statement).unwrap();
        self.sign_raw(rel, &payload);
    }

    /// Edit the canonical payload as text and sign the result.
    pub fn forge_text(&self, rel: &str, edit: impl FnOnce(String) -> String) {
        let text = String::from_utf8(self.payload(rel)).unwrap();
        self.sign_raw(rel, edit(text).as_bytes());
    }

    /// Edit `index.json` as JSON.
    pub fn edit_index(&self, edit: impl FnOnce(&mut serde_json::Value)) {
        let mut v: serde_json::Value = serde_json::from_slice(&self.read("index.json")).unwrap();
        edit(&mut v);
        self.write("index.json", serde_json::to_vec_pretty(&v).unwrap());
    }

    /// Edit the manifest statement as JSON and sign it canonically with `signer`.
    pub fn forge_manifest(&self, signer: &Signer, edit: impl FnOnce(&mut serde_json::Value)) {
        let payload = Envelope::from_json(&self.read("manifest.json"))
            .unwrap()
            .payload_bytes()
            .unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        edit(&mut v);
        let payload = to_canonical_json(&v).unwrap();
        self.write(
            "manifest.json",
            Envelope::sign(PAYLOAD_TYPE, &payload, signer).to_json_pretty(),
        );
        self.reseal_sums();
    }
}

pub fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().unwrap().success();
    assert!(ok, "mkfifo {}", path.display());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Regular files of a folder (top and one level down), bundle path → bytes.
pub fn regular_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel_name = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push((entry.path(), rel_name));
            } else if kind.is_file() && rel_name != "SHA256SUMS" {
                out.insert(rel_name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// Every path under `dir` with its kind and size, links not followed: what
/// "nothing was written" is checked against.
pub fn snapshot(dir: &Path) -> BTreeMap<Vec<u8>, (String, u64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            let kind = format!("{:?}", meta.file_type());
            let key = entry.path().as_os_str().as_bytes().to_vec();
            if meta.is_dir() {
                stack.push(entry.path());
            }
            out.insert(key, (kind, if meta.is_file() { meta.len() } else { 0 }));
        }
    }
    out
}

/// A file name made of raw bytes (not necessarily UTF-8).
pub fn raw_name(bytes: &[u8]) -> OsString {
    std::ffi::OsStr::from_bytes(bytes).to_os_string()
}
