//! Hostile bundles that every reader of a bundle must refuse before it
//! believes anything in it: `kvw verify` and `kvw site build` read a bundle
//! under the same layout rules, so each of these runs against both, from
//! this one list (the attack set's `verify` and `site build` groups).
//!
//! Each entry changes a fresh copy of the genuine bundle ([`Work`]) and
//! names the word the one error line must contain.

use std::path::Path;

use crate::work::{raw_name, Work, CHECKSUM, LEAK};

/// One hostile bundle: its name, the word its refusal must say, and how it
/// is made from the genuine one.
#[derive(Clone, Copy)]
pub struct Hostile {
    pub name: &'static str,
    pub needle: &'static str,
    pub setup: fn(&Work),
}

const fn hostile(name: &'static str, needle: &'static str, setup: fn(&Work)) -> Hostile {
    Hostile {
        name,
        needle,
        setup,
    }
}

/// The hostile bundles both readers refuse.
pub fn bundles() -> Vec<Hostile> {
    vec![
        hostile("readme-links-to-signing-key", "symbolic link", |w| {
            w.symlink("README.md", &w.at("outside/signing-key.json"));
        }),
        hostile("index-links-to-etc-shadow", "symbolic link", |w| {
            w.symlink("index.json", Path::new("/etc/shadow"));
        }),
        hostile("index-links-to-outside-secret", "symbolic link", |w| {
            w.symlink("index.json", &w.at("outside/shadow"));
        }),
        hostile("receipts-folder-links-elsewhere", "symbolic link", |w| {
            std::fs::rename(w.p("receipts"), w.at("outside/receipts")).unwrap();
            w.symlink("receipts", &w.at("outside/receipts"));
        }),
        hostile("receipt-links-outside", "symbolic link", |w| {
            std::fs::copy(w.p(LEAK), w.at("outside/leak.json")).unwrap();
            w.symlink(LEAK, &w.at("outside/leak.json"));
        }),
        hostile("public-key-is-a-link", "symbolic link", |w| {
            std::fs::copy(w.p("kvw.pub.json"), w.at("outside/key")).unwrap();
            w.symlink("kvw.pub.json", &w.at("outside/key"));
        }),
        hostile("receipt-is-a-fifo", "FIFO", |w| w.fifo(LEAK)),
        hostile("file-name-not-utf8", "not UTF-8", |w| {
            std::fs::write(w.p("receipts").join(raw_name(b"\xff\xfe.json")), b"{}").unwrap();
        }),
        hostile("oversized-receipt", "limit", |w| {
            let mut bytes = w.read(LEAK);
            bytes.resize(17 * 1024 * 1024, b' ');
            w.write(LEAK, bytes);
            w.reseal_sums();
        }),
        hostile("receipt-byte-flipped", "sha256 mismatch", |w| {
            let mut bytes = w.read(LEAK);
            let n = bytes.len() / 2;
            bytes[n] ^= 1;
            w.write(LEAK, bytes);
        }),
        // Lies about the bundle that need no key: SHA256SUMS is unsigned,
        // the manifest is not.
        hostile(
            "leak-receipt-deleted-with-index-and-sums",
            "signed manifest.json",
            |w| {
                w.remove(LEAK);
                w.edit_index(|i| {
                    let list = i["receipts"].as_array_mut().unwrap();
                    list.retain(|e| e["file"] != LEAK);
                });
                w.reseal_sums();
            },
        ),
        hostile(
            "genuine-leak-copied-over-checksum",
            "differs from the file the signed manifest",
            |w| {
                std::fs::copy(w.p(LEAK), w.p(CHECKSUM)).unwrap();
                w.reseal_sums();
            },
        ),
        // Lies signed with the bundle's key: a genuine leak receipt under
        // the kv-checksum name, with index, manifest and sums made
        // consistent; a name carrying markup; an envelope that is not
        // canonical JSON (a duplicate key the last-wins reader would take).
        hostile(
            "leak-signed-as-checksum-name-copied",
            "signed under the name",
            |w| {
                std::fs::copy(w.p(LEAK), w.p(CHECKSUM)).unwrap();
                w.reseal_all();
            },
        ),
        hostile("subject-name-with-markup", "may hold only letters", |w| {
            let name = "a\"><img src=x onerror=alert(1)>.json";
            w.forge_predicate(LEAK, name, |_| {});
            std::fs::rename(w.p(LEAK), w.p(&format!("receipts/{name}"))).unwrap();
            w.reseal_all();
        }),
        hostile("duplicate-http-status-keys", "not canonical", |w| {
            w.forge_text(LEAK, |t| {
                t.replacen(
                    "\"http_status\":200",
                    "\"http_status\":500,\"http_status\":200",
                    1,
                )
            });
            w.reseal_all();
        }),
    ]
}
