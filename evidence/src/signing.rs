//! ed25519 signing keys and their files.
//!
//! Receipts are signed with ed25519. Two decisions matter to anyone checking
//! them with other tools:
//!
//! * **keyid** = lowercase hex SHA-256 of the 32 raw public-key bytes. It is
//!   computed from the key alone, so any verifier can derive it, and DSSE
//!   verifiers use it to pick which key to try for which signature.
//! * **key files** use the key dictionary of Python's `securesystemslib`:
//!   the public file (`kvw.pub.json`) is
//!   `{"keyid", "keytype": "ed25519", "scheme": "ed25519", "keyval": {"public": "<hex>"}}`
//!   and loads directly with `SSlibKey.from_dict(keyid, dict)`; the private
//!   file has the same shape with `keyval.private` = the hex 32-byte seed.
//!   A private file is created with mode 0600, never overwritten, and a
//!   private file that others can read is refused.
//!
//! The default signing key lives outside any git work tree so it cannot be
//! committed by accident: `$KVW_KEY` if set, else
//! `$XDG_CONFIG_HOME/kvwitness/signing-key.json`, else
//! `~/.config/kvwitness/signing-key.json`.
//!
//! Everything touching the file system or needing randomness is native
//! only; on `wasm32` this module only parses public keys and verifies.

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::EvidenceError;

#[cfg(not(target_arch = "wasm32"))]
use std::path::{Path, PathBuf};

/// The only key type and signature scheme kvwitness uses.
pub const KEY_TYPE: &str = "ed25519";

/// File name of the public key inside a bundle (and written by `kvw keygen`).
pub const PUBLIC_KEY_FILE: &str = "kvw.pub.json";

/// File name of the default private key.
pub const PRIVATE_KEY_FILE: &str = "signing-key.json";

/// On-disk public key: a `securesystemslib` ed25519 key dictionary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyFile {
    pub keyid: String,
    pub keytype: String,
    pub scheme: String,
    pub keyval: PublicKeyVal,
    /// Written by older `securesystemslib` releases; accepted and ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyid_hash_algorithms: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicKeyVal {
    /// Hex of the 32 raw public-key bytes.
    pub public: String,
}

/// On-disk private key: the public dictionary plus the hex seed.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrivateKeyFile {
    keyid: String,
    keytype: String,
    scheme: String,
    keyval: PrivateKeyVal,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrivateKeyVal {
    public: String,
    private: String,
}

/// Key id of a raw ed25519 public key: lowercase hex SHA-256 of its 32 bytes.
pub fn keyid_of(public: &[u8; 32]) -> String {
    hex::encode(Sha256::digest(public))
}

fn decode_32(hex_text: &str, what: &str) -> Result<[u8; 32], EvidenceError> {
    let bytes =
        hex::decode(hex_text).map_err(|_| EvidenceError::Key(format!("{what} is not hex")))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| EvidenceError::Key(format!("{what} is {} bytes, expected 32", bytes.len())))
}

fn check_type(keytype: &str, scheme: &str) -> Result<(), EvidenceError> {
    if keytype != KEY_TYPE || scheme != KEY_TYPE {
        return Err(EvidenceError::Key(format!(
            "keytype {keytype:?} / scheme {scheme:?}, expected \"ed25519\" / \"ed25519\""
        )));
    }
    Ok(())
}

/// An ed25519 public key that verifies receipts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: VerifyingKey,
}

impl PublicKey {
    /// From the 32 raw public-key bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<PublicKey, EvidenceError> {
        VerifyingKey::from_bytes(bytes)
            .map(|key| PublicKey { key })
            .map_err(|_| EvidenceError::Key("not a valid ed25519 public key".into()))
    }

    /// The 32 raw public-key bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// See the module documentation.
    pub fn keyid(&self) -> String {
        keyid_of(&self.key.to_bytes())
    }

    /// Parse a public key file (JSON). The `keyid` in the file must match the key.
    pub fn from_json(bytes: &[u8]) -> Result<PublicKey, EvidenceError> {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
            if value.pointer("/keyval/private").is_some() {
                return Err(EvidenceError::Key(
                    "this is a private key file; give the public key file (kvw.pub.json)".into(),
                ));
            }
        }
        let file: PublicKeyFile =
            serde_json::from_slice(bytes).map_err(|e| EvidenceError::json("public key file", e))?;
        check_type(&file.keytype, &file.scheme)?;
        let key = PublicKey::from_bytes(&decode_32(&file.keyval.public, "keyval.public")?)?;
        if file.keyid != key.keyid() {
            return Err(EvidenceError::Key(format!(
                "keyid {} in the file does not match the key (its keyid is {})",
                file.keyid,
                key.keyid()
            )));
        }
        Ok(key)
    }

    /// The public key file contents.
    pub fn to_file(&self) -> PublicKeyFile {
        PublicKeyFile {
            keyid: self.keyid(),
            keytype: KEY_TYPE.into(),
            scheme: KEY_TYPE.into(),
            keyval: PublicKeyVal {
                public: hex::encode(self.key.to_bytes()),
            },
            keyid_hash_algorithms: None,
        }
    }

    /// Pretty JSON of the public key file, with a trailing newline.
    pub fn to_json(&self) -> String {
        // A struct of strings always serializes.
        let mut text = serde_json::to_string_pretty(&self.to_file()).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Whether `signature` is a valid ed25519 signature of `message` by this key
    /// (strict verification: non-canonical and small-order forms are refused).
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        match ed25519_dalek::Signature::from_slice(signature) {
            Ok(sig) => self.key.verify_strict(message, &sig).is_ok(),
            Err(_) => false,
        }
    }

    /// Read a public key file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: impl AsRef<Path>) -> Result<PublicKey, EvidenceError> {
        let path = path.as_ref();
        let bytes = crate::fsutil::read_limited(path, 64 * 1024, "public key file")?;
        PublicKey::from_json(&bytes).map_err(|e| e.in_file(path))
    }

    /// Write the public key file (replacing an existing one).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), EvidenceError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_json()).map_err(|e| EvidenceError::io("write", path, e))
    }
}

/// An ed25519 signing key. Its `Debug` output never shows the secret.
pub struct Signer {
    key: SigningKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("keyid", &self.keyid())
            .finish_non_exhaustive()
    }
}

impl Signer {
    /// A fresh key from the operating system's random source.
    ///
    /// # Panics
    /// Only if the operating system has no random source at all.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn generate() -> Signer {
        let mut seed = [0u8; 32];
        // Without a working OS random source no key can be made safely.
        getrandom::fill(&mut seed).expect("the operating system random source failed");
        Signer::from_seed(&seed)
    }

    /// A key from its 32-byte seed (deterministic; for tests and examples).
    pub fn from_seed(seed: &[u8; 32]) -> Signer {
        Signer {
            key: SigningKey::from_bytes(seed),
        }
    }

    /// See the module documentation.
    pub fn keyid(&self) -> String {
        self.public().keyid()
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey {
            key: self.key.verifying_key(),
        }
    }

    /// ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }

    /// Parse a private key file (JSON).
    pub fn from_json(bytes: &[u8]) -> Result<Signer, EvidenceError> {
        let file: PrivateKeyFile = serde_json::from_slice(bytes)
            .map_err(|e| EvidenceError::json("private key file", e))?;
        check_type(&file.keytype, &file.scheme)?;
        let signer = Signer::from_seed(&decode_32(&file.keyval.private, "keyval.private")?);
        let public = hex::encode(signer.public().to_bytes());
        if file.keyval.public != public || file.keyid != signer.keyid() {
            return Err(EvidenceError::Key(
                "keyval.public or keyid does not match the private seed".into(),
            ));
        }
        Ok(signer)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn to_json(&self) -> String {
        let file = PrivateKeyFile {
            keyid: self.keyid(),
            keytype: KEY_TYPE.into(),
            scheme: KEY_TYPE.into(),
            keyval: PrivateKeyVal {
                public: hex::encode(self.public().to_bytes()),
                private: hex::encode(self.key.to_bytes()),
            },
        };
        let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Read a private key file. Refuses a file that group or others can read.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load(path: impl AsRef<Path>) -> Result<Signer, EvidenceError> {
        let path = path.as_ref();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|e| EvidenceError::io("read", path, e))?;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(EvidenceError::Key(format!(
                    "private key file is readable by others (mode {mode:04o}); run chmod 600"
                ))
                .in_file(path));
            }
        }
        let bytes = crate::fsutil::read_limited(path, 64 * 1024, "private key file")?;
        Signer::from_json(&bytes).map_err(|e| e.in_file(path))
    }

    /// Write the private key file with mode 0600. Never overwrites, and
    /// refuses a path inside a git work tree.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), EvidenceError> {
        use std::io::Write as _;
        let path = path.as_ref();
        refuse_git_work_tree(path)?;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options
            .open(path)
            .map_err(|e| EvidenceError::io("create", path, e))?;
        file.write_all(self.to_json().as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| EvidenceError::io("write", path, e))
    }

    /// Where the default signing key lives (see the module documentation).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn default_path() -> Result<PathBuf, EvidenceError> {
        let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let path = if let Some(key) = from_env("KVW_KEY") {
            PathBuf::from(key)
        } else if let Some(config) = from_env("XDG_CONFIG_HOME") {
            PathBuf::from(config)
                .join("kvwitness")
                .join(PRIVATE_KEY_FILE)
        } else if let Some(home) = from_env("HOME") {
            PathBuf::from(home)
                .join(".config")
                .join("kvwitness")
                .join(PRIVATE_KEY_FILE)
        } else {
            return Err(EvidenceError::Key(
                "no place for the signing key: set KVW_KEY, XDG_CONFIG_HOME or HOME".into(),
            ));
        };
        std::path::absolute(&path).map_err(|e| EvidenceError::io("resolve", &path, e))
    }

    /// Load the default signing key, creating it (mode 0600, parent folder
    /// 0700) on first use. Returns the key and where it lives. Refuses a
    /// location inside a git work tree.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_or_create_default() -> Result<(Signer, PathBuf), EvidenceError> {
        let path = Signer::default_path()?;
        refuse_git_work_tree(&path)?;
        if path.exists() {
            return Ok((Signer::load(&path)?, path));
        }
        if let Some(parent) = path.parent() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                builder.mode(0o700);
            }
            builder
                .create(parent)
                .map_err(|e| EvidenceError::io("create folder", parent, e))?;
        }
        let signer = Signer::generate();
        match signer.save(&path) {
            Ok(()) => Ok((signer, path)),
            // Another process created it between our check and our write.
            Err(EvidenceError::Io { cause, .. })
                if cause.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Ok((Signer::load(&path)?, path))
            }
            Err(e) => Err(e),
        }
    }
}

/// Refuse `path` if it is inside a git work tree (any ancestor holds `.git`),
/// so that a private key cannot end up in a commit.
#[cfg(not(target_arch = "wasm32"))]
pub fn refuse_git_work_tree(path: &Path) -> Result<(), EvidenceError> {
    let absolute = std::path::absolute(path).map_err(|e| EvidenceError::io("resolve", path, e))?;
    let mut dir = absolute.parent();
    while let Some(d) = dir {
        if d.join(".git").symlink_metadata().is_ok() {
            return Err(EvidenceError::Key(format!(
                "refusing to keep a private key at {} inside the git work tree {}; \
                 choose a location outside it",
                absolute.display(),
                d.display()
            )));
        }
        dir = d.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyid_is_sha256_of_raw_public_key() {
        let signer = Signer::from_seed(&[7u8; 32]);
        let raw = signer.public().to_bytes();
        assert_eq!(signer.keyid(), hex::encode(Sha256::digest(raw)));
        assert_eq!(signer.keyid().len(), 64);
    }

    #[test]
    fn key_files_round_trip() {
        let signer = Signer::from_seed(&[9u8; 32]);
        let again = Signer::from_json(signer.to_json().as_bytes()).unwrap();
        assert_eq!(again.keyid(), signer.keyid());
        let public = PublicKey::from_json(signer.public().to_json().as_bytes()).unwrap();
        assert_eq!(public, signer.public());
    }

    #[test]
    fn public_file_with_wrong_keyid_is_refused() {
        let mut file = Signer::from_seed(&[1u8; 32]).public().to_file();
        file.keyid = "00".repeat(32);
        let err = PublicKey::from_json(&serde_json::to_vec(&file).unwrap()).unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");
    }
}
