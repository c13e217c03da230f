//! Attacks on `kvw site build`: the layout rules of verify before anything
//! is read or written (issue item 1), names and markup (item 2), name
//! binding (item 3), bundle-level lies (item 4), output folders and
//! `--source-base` (item 10). Every refusal writes nothing.

use std::ffi::OsString;
use std::path::Path;

use serde_json::json;

use crate::harness::*;

fn build(w: &Work) -> Vec<OsString> {
    args([
        OsString::from("site"),
        "build".into(),
        "--bundle".into(),
        w.bundle.clone().into(),
        "--out".into(),
        w.at("site").into(),
        "--no-wasm".into(),
    ])
}

/// `kvw site build` after `setup`: refused, `site/` never created.
fn s(name: &str, needle: &'static str, setup: impl Fn(&Work) + Send + Sync + 'static) -> Case {
    case(&format!("site-{name}"), move |w| {
        setup(w);
        let mut cmd = Cmd::new(build(w), refused(1, needle));
        cmd.must_not_exist = Some(w.at("site"));
        cmd
    })
}

/// Same, with extra arguments and no must-not-exist check (the output may
/// exist before, and must be left as it was).
fn sx(
    name: &str,
    needle: &'static str,
    setup: impl Fn(&Work) -> Vec<OsString> + Send + Sync + 'static,
) -> Case {
    case(&format!("site-{name}"), move |w| {
        let extra = setup(w);
        let mut a = build(w);
        a.extend(extra);
        Cmd::new(a, refused(1, needle))
    })
}

fn source_base(base: &'static str) -> impl Fn(&Work) -> Vec<OsString> + Send + Sync {
    move |_| args(["--source-base", base])
}

pub fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    c.push(s("readme-links-to-signing-key", "symbolic link", |w| {
        w.symlink("README.md", &w.at("outside/signing-key.json"));
    }));
    c.push(s("index-links-to-etc-shadow", "symbolic link", |w| {
        w.symlink("index.json", Path::new("/etc/shadow"));
    }));
    c.push(s("index-links-to-outside-secret", "symbolic link", |w| {
        w.symlink("index.json", &w.at("outside/shadow"));
    }));
    c.push(s("sums-links-to-secret", "symbolic link", |w| {
        w.symlink("SHA256SUMS", &w.at("outside/shadow"));
    }));
    c.push(s("receipts-folder-links-elsewhere", "symbolic link", |w| {
        std::fs::rename(w.p("receipts"), w.at("outside/receipts")).unwrap();
        w.symlink("receipts", &w.at("outside/receipts"));
    }));
    c.push(s("receipt-links-outside", "symbolic link", |w| {
        std::fs::copy(w.p(LEAK), w.at("outside/leak.json")).unwrap();
        w.symlink(LEAK, &w.at("outside/leak.json"));
    }));
    c.push(s("public-key-links-outside", "symbolic link", |w| {
        std::fs::copy(w.p("kvw.pub.json"), w.at("outside/key")).unwrap();
        w.symlink("kvw.pub.json", &w.at("outside/key"));
    }));
    c.push(sx("bundle-path-is-a-link", "symbolic link", |w| {
        std::fs::rename(&w.bundle, w.at("real")).unwrap();
        std::os::unix::fs::symlink(w.at("real"), &w.bundle).unwrap();
        vec![]
    }));
    c.push(s("receipt-is-a-fifo", "FIFO", |w| w.fifo(LEAK)));
    c.push(s("readme-is-a-fifo", "FIFO", |w| w.fifo("README.md")));
    c.push(sx("bundle-path-is-a-fifo", "FIFO", |w| {
        std::fs::remove_dir_all(&w.bundle).unwrap();
        mkfifo(&w.bundle);
        vec![]
    }));
    c.push(s("empty-folder-in-bundle", "unexpected folder", |w| {
        std::fs::create_dir(w.p("receipts/empty")).unwrap();
    }));
    c.push(s("dotfile-in-bundle", "not listed", |w| {
        w.write(".htaccess", "x")
    }));
    c.push(s("file-name-not-utf8", "not UTF-8", |w| {
        std::fs::write(w.p("receipts").join(raw_name(b"\xff.json")), b"{}").unwrap();
    }));
    c.push(s("oversized-receipt", "limit", |w| {
        let mut bytes = w.read(LEAK);
        bytes.resize(17 * 1024 * 1024, b' ');
        w.write(LEAK, bytes);
        w.reseal_sums();
    }));
    c.push(s("oversized-public-key", "limit", |w| {
        w.write("kvw.pub.json", vec![b' '; 17 * 1024 * 1024]);
        w.reseal_sums();
    }));
    c.push(s(
        "markup-in-receipt-name-copied",
        "may hold only letters",
        |w| {
            std::fs::copy(
                w.p(LEAK),
                w.p("receipts/a\"><img src=x onerror=alert(1)>.json"),
            )
            .unwrap();
            w.reseal_sums();
        },
    ));
    c.push(s(
        "markup-in-receipt-name-signed",
        "may hold only letters",
        |w| {
            let name = "a\"><img src=x onerror=alert(1)>.json";
            w.forge_predicate(LEAK, name, |_| {});
            std::fs::rename(w.p(LEAK), w.p(&format!("receipts/{name}"))).unwrap();
            w.reseal_all();
        },
    ));
    c.push(s("script-in-receipt-name", "may hold only letters", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/<script>alert(1)<!--.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(s("ansi-escape-in-receipt-name", "control character", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/\u{1b}[31mred.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(s(
        "leak-shown-under-checksum-name",
        "signed under the name",
        |w| {
            std::fs::copy(w.p(LEAK), w.p(CHECKSUM)).unwrap();
            w.reseal_all();
        },
    ));
    c.push(s(
        "leak-copied-over-checksum-no-key",
        "signed manifest",
        |w| {
            std::fs::copy(w.p(LEAK), w.p(CHECKSUM)).unwrap();
            w.reseal_sums();
        },
    ));
    c.push(s("tampered-receipt", "sha256 mismatch", |w| {
        let mut bytes = w.read(LEAK);
        let n = bytes.len() / 2;
        bytes[n] ^= 1;
        w.write(LEAK, bytes);
    }));
    c.push(s("tampered-receipt-resealed", "signed manifest", |w| {
        let mut bytes = w.read(LEAK);
        let n = bytes.len() / 2;
        bytes[n] ^= 1;
        w.write(LEAK, bytes);
        w.reseal_sums();
    }));
    c.push(s(
        "rejected-envelope-would-be-embedded",
        "not canonical",
        |w| {
            w.forge_text(LEAK, |t| {
                t.replacen(
                    "\"http_status\":200",
                    "\"http_status\":500,\"http_status\":200",
                    1,
                )
            });
            w.reseal_all();
        },
    ));
    c.push(s("leak-receipt-deleted", "signed manifest", |w| {
        w.remove(LEAK);
        w.edit_index(|i| {
            i["receipts"]
                .as_array_mut()
                .unwrap()
                .retain(|e| e["file"] != LEAK)
        });
        w.reseal_sums();
    }));
    c.push(s(
        "readme-says-no-leak",
        "README.md does not state what index.json says",
        |w| {
            w.write("README.md", "# No leak\n");
            w.reseal_sums();
        },
    ));
    c.push(s("manifest-missing", "no manifest.json", |w| {
        w.remove("manifest.json");
        w.reseal_sums();
    }));
    c.push(s("index-lies-about-verdict", "differs in: verdict", |w| {
        w.edit_index(|i| i["receipts"][0]["verdict"]["http_status"] = json!(299));
        w.reseal_keep_index();
    }));
    c.push(sx(
        "out-is-an-unrelated-folder",
        "not a kvwitness site",
        |w| {
            std::fs::create_dir(w.at("site")).unwrap();
            std::fs::write(w.at("site/thesis.tex"), b"years of work").unwrap();
            vec![]
        },
    ));
    c.push(sx("out-is-home-like-folder", "not a kvwitness site", |w| {
        std::fs::create_dir_all(w.at("site/.ssh")).unwrap();
        std::fs::write(w.at("site/index.html"), b"mine").unwrap();
        vec![]
    }));
    c.push(sx("out-is-a-file", "not a folder", |w| {
        std::fs::write(w.at("site"), b"a file").unwrap();
        vec![]
    }));
    c.push(sx("out-is-a-link", "not a folder", |w| {
        std::os::unix::fs::symlink(w.at("outside"), w.at("site")).unwrap();
        vec![]
    }));
    c.push(sx(
        "source-base-javascript",
        "not a plain http(s) URL",
        source_base("javascript:alert(1)//"),
    ));
    c.push(sx(
        "source-base-data-url",
        "not a plain http(s) URL",
        source_base("data:text/html,<script>alert(1)</script>"),
    ));
    c.push(sx(
        "source-base-attribute-break",
        "not a plain http(s) URL",
        source_base("https://x.example/\" onmouseover=\"alert(1)"),
    ));
    c.push(sx(
        "source-base-vbscript",
        "not a plain http(s) URL",
        source_base("vbscript:msgbox"),
    ));
    c.push(sx(
        "source-base-relative",
        "not a plain http(s) URL",
        source_base("//evil.example"),
    ));
    c.push(sx(
        "source-base-empty",
        "not a plain http(s) URL",
        source_base(""),
    ));
    c.push(sx(
        "source-base-control-char",
        "not a plain http(s) URL",
        source_base("https://x\u{1b}[2J"),
    ));
    c
}

/// A site built from a genuine bundle carries nothing from outside it and
/// no unescaped markup; checked by the caller after a successful build.
pub fn genuine_build(w: &Work) -> Vec<OsString> {
    build(w)
}
