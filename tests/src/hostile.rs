//! Hostile bundles that every reader of a bundle must refuse before it
//! believes anything in it: `kvw verify` and `kvw site build` read a bundle
//! under the same layout rules, so each of these runs against both, from
//! this one list (the attack set's `verify` and `site build` groups).
//!
//! Each entry changes a fresh copy of the genuine bundle ([`Work`]) and
//! names the word the one error line must contain.

use std::path::Path;

use crate::work::{raw_name, Work, LEAK};

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
    ]
}
