//! Key files on disk: modes, refusals, and the default key location.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;

use kvw_evidence::signing::refuse_git_work_tree;
use kvw_evidence::{PublicKey, Signer};

#[test]
fn private_key_file_is_0600_and_never_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("k.json");
    let signer = Signer::generate();
    signer.save(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(Signer::load(&path).unwrap().keyid(), signer.keyid());
    assert!(
        Signer::generate().save(&path).is_err(),
        "must not overwrite"
    );
    assert_eq!(Signer::load(&path).unwrap().keyid(), signer.keyid());
}

#[test]
fn readable_private_key_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("k.json");
    Signer::generate().save(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = Signer::load(&path).unwrap_err().to_string();
    assert!(err.contains("chmod 600"), "{err}");
}

#[test]
fn public_key_file_round_trip_and_sslib_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("kvw.pub.json");
    let public = Signer::generate().public();
    public.save(&path).unwrap();
    assert_eq!(PublicKey::load(&path).unwrap(), public);
    let value: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(value["keytype"], "ed25519");
    assert_eq!(value["scheme"], "ed25519");
    assert_eq!(value["keyid"], public.keyid());
    assert_eq!(value["keyval"]["public"].as_str().unwrap().len(), 64);
    assert!(value["keyval"].get("private").is_none());
}

#[test]
fn git_work_tree_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join(".git")).unwrap();
    let inside = tmp.path().join("a").join("key.json");
    assert!(refuse_git_work_tree(&inside).is_err());
    std::fs::create_dir(tmp.path().join("a")).unwrap();
    assert!(Signer::generate().save(&inside).is_err());
    assert!(!inside.exists());
}

/// The only test in this binary that touches the environment.
#[test]
fn default_key_is_created_once_then_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("cfg").join("signing-key.json");
    std::env::set_var("KVW_KEY", &path);
    let (first, at) = Signer::load_or_create_default().unwrap();
    assert_eq!(at, path);
    let (second, _) = Signer::load_or_create_default().unwrap();
    assert_eq!(first.keyid(), second.keyid());
    std::env::remove_var("KVW_KEY");
    std::env::set_var("XDG_CONFIG_HOME", tmp.path());
    assert_eq!(
        Signer::default_path().unwrap(),
        tmp.path().join("kvwitness").join("signing-key.json")
    );
}
