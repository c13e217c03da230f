//! Attacks on `kvw verify`: layout, SHA256SUMS, bundle-level lies, forged
//! receipts (signed with the bundle key, as an attacker holding it would),
//! envelopes, the index, the manifest, single receipts and keys.

use std::ffi::OsString;

use serde_json::json;

use kvw_testkit::hostile;

use crate::harness::*;

fn verify(w: &Work) -> Vec<OsString> {
    args([OsString::from("verify"), w.bundle.clone().into()])
}

fn verify_trusted(w: &Work) -> Vec<OsString> {
    let mut a = verify(w);
    a.push("--key".into());
    a.push(w.at("bundle.pub.json").into());
    a
}

fn reproduce(w: &Work) -> Vec<OsString> {
    let mut a = verify(w);
    a.push("--reproduce".into());
    a
}

/// `kvw verify <bundle>` after `setup`, refused with exit 1 and `needle`.
fn v(name: &str, needle: &'static str, setup: impl Fn(&Work) + Send + Sync + 'static) -> Case {
    case(name, move |w| {
        setup(w);
        Cmd::new(verify(w), refused(1, needle))
    })
}

/// Same, with a custom command line.
fn vc(
    name: &str,
    needle: &'static str,
    setup: impl Fn(&Work) -> Vec<OsString> + Send + Sync + 'static,
) -> Case {
    case(name, move |w| Cmd::new(setup(w), refused(1, needle)))
}

/// The leak receipt's payload text edited by `edit`, re-signed with the
/// bundle key and the bundle resealed: refused with exit 1 and `needle`.
fn forged(
    name: &str,
    needle: &'static str,
    edit: impl Fn(String) -> String + Send + Sync + 'static,
) -> Case {
    v(name, needle, move |w| {
        w.forge_text(LEAK, &edit);
        w.reseal_all();
    })
}

/// The leak receipt's statement edited as JSON, re-signed and resealed:
/// refused with exit 1 and `needle`.
fn restated(
    name: &str,
    needle: &'static str,
    edit: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
) -> Case {
    v(name, needle, move |w| {
        w.forge_statement(LEAK, &edit);
        w.reseal_all();
    })
}

/// An edit replacing the first `from` in a payload with `to`.
fn replaced(from: &'static str, to: &'static str) -> impl Fn(String) -> String + Send + Sync {
    move |t| t.replacen(from, to, 1)
}

pub fn cases() -> Vec<Case> {
    let mut c = Vec::new();

    // --- Layout: links, FIFOs, devices, stray folders and names (issue items 1, 7, 10).
    // The hostile bundles site build refuses too are listed once, in the testkit.
    for h in hostile::bundles() {
        c.push(v(h.name, h.needle, h.setup));
    }
    c.push(v("sums-is-a-link", "symbolic link", |w| {
        std::fs::copy(w.p("SHA256SUMS"), w.at("outside/sums")).unwrap();
        w.symlink("SHA256SUMS", &w.at("outside/sums"));
    }));
    c.push(v("manifest-is-a-link", "symbolic link", |w| {
        std::fs::copy(w.p("manifest.json"), w.at("outside/manifest")).unwrap();
        w.symlink("manifest.json", &w.at("outside/manifest"));
    }));
    c.push(v("dangling-link-inside", "symbolic link", |w| {
        w.symlink("receipts/zz.json", &w.at("outside/nothing-here"));
    }));
    c.push(vc("bundle-path-is-a-link", "symbolic link", |w| {
        std::os::unix::fs::symlink(&w.bundle, w.at("link")).unwrap();
        args([OsString::from("verify"), w.at("link").into()])
    }));
    c.push(v("index-is-a-fifo", "FIFO", |w| w.fifo("index.json")));
    c.push(v("sums-is-a-fifo", "FIFO", |w| w.fifo("SHA256SUMS")));
    c.push(v("manifest-is-a-fifo", "FIFO", |w| w.fifo("manifest.json")));
    c.push(v("extra-fifo-in-receipts", "FIFO", |w| {
        w.fifo("receipts/x.json")
    }));
    c.push(v("receipt-is-a-socket", "socket", |w| {
        w.remove(LEAK);
        // Bound from inside the folder: socket paths are limited to 108 bytes.
        let name = LEAK.rsplit('/').next().unwrap();
        let ok = std::process::Command::new("python3")
            .current_dir(w.p("receipts"))
            .args([
                "-c",
                &format!("import socket; socket.socket(socket.AF_UNIX).bind({name:?})"),
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "could not make a socket");
    }));
    c.push(vc("bundle-path-is-a-fifo", "FIFO", |w| {
        mkfifo(&w.at("fifo"));
        args([OsString::from("verify"), w.at("fifo").into()])
    }));
    c.push(vc("bundle-path-is-a-device", "device", |_| {
        args(["verify", "/dev/zero"])
    }));
    c.push(vc("key-is-a-fifo", "FIFO", |w| {
        mkfifo(&w.at("key.fifo"));
        let mut a = verify(w);
        a.extend(args([OsString::from("--key"), w.at("key.fifo").into()]));
        a
    }));
    c.push(vc("key-links-to-a-fifo", "FIFO", |w| {
        mkfifo(&w.at("key.fifo"));
        std::os::unix::fs::symlink(w.at("key.fifo"), w.at("key.link")).unwrap();
        let mut a = verify(w);
        a.extend(args([OsString::from("--key"), w.at("key.link").into()]));
        a
    }));
    c.push(vc("key-is-dev-zero", "device", |w| {
        let mut a = verify(w);
        a.extend(args(["--key", "/dev/zero"]));
        a
    }));
    c.push(vc("key-is-a-folder", "folder", |w| {
        let mut a = verify(w);
        a.extend(args([OsString::from("--key"), w.at("outside").into()]));
        a
    }));
    c.push(vc("key-is-huge", "limit", |w| {
        std::fs::write(w.at("big.pub.json"), vec![b' '; 200 * 1024]).unwrap();
        let mut a = verify(w);
        a.extend(args([OsString::from("--key"), w.at("big.pub.json").into()]));
        a
    }));
    c.push(vc("key-is-garbage", "not valid", |w| {
        std::fs::write(w.at("bad.pub.json"), b"{\"keyid\": 1}").unwrap();
        let mut a = verify(w);
        a.extend(args([OsString::from("--key"), w.at("bad.pub.json").into()]));
        a
    }));
    c.push(v("empty-folder-in-receipts", "unexpected folder", |w| {
        std::fs::create_dir(w.p("receipts/empty")).unwrap();
    }));
    c.push(v("empty-folder-at-top", "unexpected folder", |w| {
        std::fs::create_dir(w.p("extra")).unwrap();
    }));
    c.push(v("receipts-folder-empty", "empty folder", |w| {
        for r in [LEAK, CHECKSUM, REJECT] {
            w.remove(r);
        }
        w.reseal_sums();
    }));
    c.push(v("nested-receipt-folder", "unexpected folder", |w| {
        std::fs::create_dir(w.p("receipts/sub")).unwrap();
        std::fs::copy(w.p(LEAK), w.p("receipts/sub/x.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(v("git-folder-in-bundle", "unexpected folder", |w| {
        std::fs::create_dir(w.p(".git")).unwrap();
        std::fs::write(w.p(".git/config"), b"[core]").unwrap();
    }));
    c.push(v("dotfile-listed-in-sums", "unexpected file", |w| {
        w.write(".env", "TOKEN=1");
        w.reseal_sums();
    }));
    c.push(v("extra-file-unlisted", "not listed in SHA256SUMS", |w| {
        w.write("notes.txt", "hello");
    }));
    c.push(v("extra-file-listed", "unexpected file notes.txt", |w| {
        w.write("notes.txt", "hello");
        w.reseal_sums();
    }));
    c.push(v("too-many-files", "more than 10000 files", |w| {
        for i in 0..10_001 {
            std::fs::write(w.p(&format!("receipts/r{i}.json")), b"").unwrap();
        }
    }));
    c.push(vc("empty-bundle-folder", "is empty", |w| {
        std::fs::create_dir(w.at("empty")).unwrap();
        args([OsString::from("verify"), w.at("empty").into()])
    }));
    c.push(vc("missing-path", "cannot open", |w| {
        args([OsString::from("verify"), w.at("nope").into()])
    }));

    // --- SHA256SUMS.
    let sums_line = |w: &Work, line: &str| {
        let mut text = String::from_utf8(w.read("SHA256SUMS")).unwrap();
        text.push_str(line);
        text.push('\n');
        w.write("SHA256SUMS", text);
    };
    // A line naming a file SHA256SUMS may not list, with a zero digest.
    let zero = "0".repeat(64);
    for (name, needle, path) in [
        ("sums-absolute-path", "absolute path", "/etc/shadow"),
        ("sums-dot-dot", "points outside", "../outside/shadow"),
        ("sums-backslash", "backslash", "receipts\\..\\x"),
        ("sums-dot-component", "plain relative path", "./index.json"),
        ("sums-lists-itself", "cannot list itself", "SHA256SUMS"),
        (
            "sums-lists-missing-file",
            "listed but missing",
            "receipts/ghost.json",
        ),
    ] {
        let line = format!("{zero}  {path}");
        c.push(v(name, needle, move |w| sums_line(w, &line)));
    }
    c.push(v("sums-duplicate-line", "listed twice", move |w| {
        let text = String::from_utf8(w.read("SHA256SUMS")).unwrap();
        let first = text.lines().next().unwrap().to_string();
        sums_line(w, &first);
    }));
    c.push(v("sums-crlf", "control character", |w| {
        let text = String::from_utf8(w.read("SHA256SUMS")).unwrap();
        w.write("SHA256SUMS", text.replace('\n', "\r\n"));
    }));
    c.push(v("sums-malformed-line", "SHA256SUMS line", move |w| {
        sums_line(w, "not a checksum")
    }));
    c.push(v("sums-empty", "not listed in SHA256SUMS", |w| {
        w.write("SHA256SUMS", "")
    }));
    c.push(v("sums-not-utf8", "not UTF-8", |w| {
        w.write("SHA256SUMS", b"\xff\xfe")
    }));
    c.push(v("sums-missing", "no SHA256SUMS", |w| {
        w.remove("SHA256SUMS")
    }));
    c.push(v("sums-line-dropped", "not listed in SHA256SUMS", |w| {
        let text = String::from_utf8(w.read("SHA256SUMS")).unwrap();
        let kept: String = text
            .lines()
            .filter(|l| !l.ends_with("README.md"))
            .map(|l| format!("{l}\n"))
            .collect();
        w.write("SHA256SUMS", kept);
    }));

    // --- Bundle-level lies without the key (issue item 4): sums are
    //     unsigned, the manifest is not.
    c.push(v(
        "leak-receipt-deleted-sums-resealed",
        "missing from the bundle",
        |w| {
            w.remove(LEAK);
            w.reseal_sums();
        },
    ));
    c.push(v(
        "readme-rewritten-no-leak",
        "README.md does not state what index.json says",
        |w| {
            let text = String::from_utf8(w.read("README.md")).unwrap();
            w.write(
                "README.md",
                text.replace("| leak |", "| refused |") + "\nNo leak.\n",
            );
            w.reseal_sums();
        },
    ));
    c.push(v("readme-deleted", "no README.md", |w| {
        w.remove("README.md");
        w.reseal_sums();
    }));
    c.push(v(
        "index-verdict-edited",
        "index.json differs from the file the signed manifest",
        |w| {
            w.edit_index(|i| i["receipts"][0]["verdict"]["http_status"] = json!(299));
            w.reseal_sums();
        },
    ));
    c.push(v("receipt-renamed", "not in the signed manifest", |w| {
        std::fs::rename(w.p(LEAK), w.p("receipts/renamed.json")).unwrap();
        w.reseal_sums();
    }));
    c.push(v(
        "receipt-duplicated-under-new-name",
        "not in the signed manifest",
        |w| {
            std::fs::copy(
                w.p(LEAK),
                w.p("receipts/incident-walkthrough-fixes-all.json"),
            )
            .unwrap();
            w.reseal_sums();
        },
    ));
    c.push(v(
        "two-receipts-swapped",
        "differs from the file the signed manifest",
        |w| {
            std::fs::rename(w.p(LEAK), w.at("tmp.json")).unwrap();
            std::fs::rename(w.p(CHECKSUM), w.p(LEAK)).unwrap();
            std::fs::rename(w.at("tmp.json"), w.p(CHECKSUM)).unwrap();
            w.reseal_sums();
        },
    ));
    c.push(v("manifest-deleted", "no manifest.json", |w| {
        w.remove("manifest.json");
        w.reseal_sums();
    }));
    c.push(v(
        "manifest-payload-tampered",
        "manifest.json: signature",
        |w| {
            let mut env: serde_json::Value =
                serde_json::from_slice(&w.read("manifest.json")).unwrap();
            let payload = env["payload"].as_str().unwrap().to_string();
            let mut chars: Vec<char> = payload.chars().collect();
            let n = chars.len() / 2;
            chars[n] = if chars[n] == 'A' { 'B' } else { 'A' };
            env["payload"] = json!(chars.into_iter().collect::<String>());
            w.write("manifest.json", serde_json::to_vec_pretty(&env).unwrap());
            w.reseal_sums();
        },
    ));
    c.push(v(
        "manifest-signed-by-stranger",
        "no signature by key",
        |w| {
            w.forge_manifest(&publisher(), |_| {});
        },
    ));
    c.push(vc(
        "whole-bundle-re-signed-by-attacker-vs-trusted-key",
        "manifest.json: no signature by key",
        |w| {
            // Attacker re-signs everything with their own key; the verifier
            // trusts the publisher's key.
            w.remove(LEAK);
            w.reseal_all();
            let mut a = verify(w);
            a.extend(args([
                OsString::from("--key"),
                w.at("publisher.pub.json").into(),
            ]));
            a
        },
    ));
    c.push(v("public-key-swapped", "index.json names key", |w| {
        w.write("kvw.pub.json", publisher().public().to_json());
        w.reseal_sums();
    }));

    // --- Forged receipts, signed with the bundle key (issue items 3, 5, 6).
    c.push(forged(
        "duplicate-keys-last-wins-lie",
        "not canonical",
        replaced("\"leak\":true", "\"leak\":true,\"leak\":false"),
    ));
    c.push(forged(
        "duplicate-top-level-member",
        "not canonical",
        replaced("{", "{\"predicateType\":\"x\","),
    ));
    c.push(v("pretty-printed-payload", "not canonical", |w| {
        let v: serde_json::Value = serde_json::from_slice(&w.payload(LEAK)).unwrap();
        w.sign_raw(LEAK, &serde_json::to_vec_pretty(&v).unwrap());
        w.reseal_all();
    }));
    c.push(forged("payload-key-order", "not canonical", |t| {
        // Move "_type" to the end.
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        let rest = t.replacen(&format!("\"_type\":{},", v["_type"]), "", 1);
        format!("{},\"_type\":{}}}", &rest[..rest.len() - 1], v["_type"])
    }));
    c.push(forged(
        "number-spelled-with-fraction",
        "not canonical",
        replaced("\"http_status\":200", "\"http_status\":200.0"),
    ));
    c.push(forged(
        "number-with-exponent",
        "not canonical",
        replaced("\"http_status\":200", "\"http_status\":2e2"),
    ));
    c.push(forged(
        "string-with-unicode-escape",
        "not canonical",
        replaced("\"incident\"", "\"\\u0069ncident\""),
    ));
    c.push(forged(
        "trailing-newline-after-payload",
        "not canonical",
        |t| t + "\n",
    ));
    c.push(forged("trailing-garbage-after-payload", "not valid", |t| {
        t + "{}"
    }));
    c.push(forged("byte-order-mark", "not valid", |t| {
        format!("\u{feff}{t}")
    }));
    c.push(v("subject-name-path-traversal", "subject", |w| {
        w.forge_predicate(LEAK, "../../escape.json", |_| {});
        w.reseal_all();
    }));
    c.push(restated("two-subjects", "2 subjects", |s| {
        let first = s["subject"][0].clone();
        s["subject"].as_array_mut().unwrap().push(first);
    }));
    c.push(restated("zero-subjects", "0 subjects", |s| {
        s["subject"] = json!([])
    }));
    c.push(forged("subject-digest-wrong", "subject", |t| {
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        let d = v["subject"][0]["digest"]["sha256"]
            .as_str()
            .unwrap()
            .to_string();
        t.replacen(&d, &"0".repeat(64), 1)
    }));
    c.push(restated(
        "unknown-predicate-type",
        "unknown predicate",
        |s| s["predicateType"] = json!("https://kvwitness.dev/attestation/probe/v9"),
    ));
    c.push(restated("statement-type-wrong", "_type", |s| {
        s["_type"] = json!("https://in-toto.io/Statement/v0.1")
    }));
    c.push(restated("unknown-statement-member", "unknown field", |s| {
        s["extra"] = json!(1)
    }));
    c.push(restated("unknown-predicate-member", "unknown field", |s| {
        s["predicate"]["verdict"]["note"] = json!("fine")
    }));
    c.push(v("trace-digest-wrong", "trace_sha256", |w| {
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            p.trace_sha256 = "0".repeat(64)
        });
        w.reseal_all();
    }));
    c.push(v("verdict-flipped-trace-kept", "FAIL", |w| {
        // The key holder can sign any verdict; the index must still agree.
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            p.verdict.leak = false
        });
        w.reseal_keep_index();
    }));
    c.push(v("six-steps", "6 steps", |w| {
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            p.steps.pop();
            p.trace_sha256 = kvw_evidence::trace_sha256(&p.events, &p.steps);
        });
        w.reseal_all();
    }));
    c.push(v("steps-misnumbered", "numbered", |w| {
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            p.steps.swap(0, 1);
            p.trace_sha256 = kvw_evidence::trace_sha256(&p.events, &p.steps);
        });
        w.reseal_all();
    }));
    c.push(forged(
        "seed-beyond-2-53",
        "outside the range",
        replaced("\"seed\":2026", "\"seed\":1152921504606846976"),
    ));
    c.push(restated("decode-pool-2-62", "outside the range", |s| {
        s["predicate"]["config"]["decode_pool_tokens"] = json!(1u64 << 62)
    }));
    c.push(restated("negative-status", "not valid", |s| {
        s["predicate"]["verdict"]["http_status"] = json!(-1)
    }));
    c.push(restated("fractional-status", "not valid", |s| {
        s["predicate"]["verdict"]["http_status"] = json!(200.5)
    }));
    for (name, field, value, needle) in [
        (
            "reproduce-decode-pool-2-40",
            "decode_pool_tokens",
            json!(1u64 << 40),
            "exceeds",
        ),
        (
            "reproduce-prefill-pool-2-40",
            "prefill_pool_tokens",
            json!(1u64 << 40),
            "exceeds",
        ),
        (
            "reproduce-decode-pool-2-52",
            "decode_pool_tokens",
            json!(1u64 << 52),
            "exceeds",
        ),
        (
            "reproduce-context-2-40",
            "context_len",
            json!(1u64 << 40),
            "context length",
        ),
        ("reproduce-page-size-0", "page_size", json!(0), "page size"),
        (
            "reproduce-page-size-4g",
            "page_size",
            json!(u32::MAX),
            "larger than 1024",
        ),
        (
            "reproduce-max-new-tokens-huge",
            "max_new_tokens",
            json!(u32::MAX),
            "max_new_tokens",
        ),
        (
            "reproduce-seed-2-53",
            "seed",
            json!((1u64 << 53) - 1),
            "re-run",
        ),
    ] {
        c.push(case(name, move |w| {
            let value = value.clone();
            w.forge_statement(LEAK, |s| s["predicate"]["config"][field] = value);
            w.reseal_all();
            Cmd::new(reproduce(w), refused(1, needle))
        }));
    }

    // --- Envelopes (signed with the bundle key where a signature matters).
    let env_edit = |w: &Work, edit: &dyn Fn(&mut serde_json::Value)| {
        let mut env: serde_json::Value = serde_json::from_slice(&w.read(LEAK)).unwrap();
        edit(&mut env);
        w.write(LEAK, serde_json::to_vec_pretty(&env).unwrap());
        w.reseal_keep_index();
    };
    c.push(v("payload-type-other", "payloadType", move |w| {
        let payload = w.payload(LEAK);
        w.write(
            LEAK,
            kvw_evidence::Envelope::sign("text/plain", &payload, &attacker()).to_json_pretty(),
        );
        w.reseal_keep_index();
    }));
    c.push(v("no-signatures", "no signature by key", move |w| {
        env_edit(w, &|e| e["signatures"] = json!([]))
    }));
    c.push(v("signature-not-base64", "does not verify", move |w| {
        env_edit(w, &|e| e["signatures"][0]["sig"] = json!("***"))
    }));
    c.push(v("signature-truncated", "does not verify", move |w| {
        env_edit(w, &|e| {
            let s = e["signatures"][0]["sig"].as_str().unwrap()[..40].to_string();
            e["signatures"][0]["sig"] = json!(s);
        })
    }));
    c.push(v(
        "signature-by-stranger",
        "no signature by key",
        move |w| {
            let payload = w.payload(LEAK);
            w.write(
                LEAK,
                kvw_evidence::Envelope::sign(
                    kvw_evidence::receipt::PAYLOAD_TYPE,
                    &payload,
                    &publisher(),
                )
                .to_json_pretty(),
            );
            w.reseal_keep_index();
        },
    ));
    c.push(v("unknown-envelope-field", "unknown field", move |w| {
        env_edit(w, &|e| e["note"] = json!("x"))
    }));
    c.push(v("duplicate-payload-field", "duplicate field", |w| {
        let text = String::from_utf8(w.read(LEAK)).unwrap();
        w.write(LEAK, text.replacen('{', "{\"payload\": \"e30=\",", 1));
        w.reseal_keep_index();
    }));
    c.push(v("payload-not-base64", "base64", move |w| {
        env_edit(w, &|e| e["payload"] = json!("!!!"))
    }));
    c.push(v("envelope-not-json", "not valid", |w| {
        w.write(LEAK, "this is not json");
        w.reseal_keep_index();
    }));
    c.push(v("envelope-empty", "not valid", |w| {
        w.write(LEAK, "");
        w.reseal_keep_index();
    }));
    c.push(v("envelope-is-array", "not valid", |w| {
        w.write(LEAK, "[]");
        w.reseal_keep_index();
    }));
    c.push(v("envelope-deeply-nested", "not valid", |w| {
        w.write(LEAK, "[".repeat(200_000) + &"]".repeat(200_000));
        w.reseal_keep_index();
    }));
    c.push(v("payload-deeply-nested", "not valid", |w| {
        w.sign_raw(
            LEAK,
            ("[".repeat(100_000) + &"]".repeat(100_000)).as_bytes(),
        );
        w.reseal_keep_index();
    }));

    // --- The index and the manifest, re-signed by the key holder.
    c.push(v(
        "index-entry-lies-about-verdict",
        "differs in: verdict",
        |w| {
            w.edit_index(|i| {
                for e in i["receipts"].as_array_mut().unwrap() {
                    e["verdict"]["leak"] = json!(false);
                }
            });
            w.reseal_keep_index();
        },
    ));
    c.push(v("index-entry-missing", "not listed in index.json", |w| {
        w.edit_index(|i| {
            i["receipts"]
                .as_array_mut()
                .unwrap()
                .retain(|e| e["file"] != LEAK)
        });
        w.reseal_keep_index();
    }));
    c.push(v(
        "index-entry-without-receipt",
        "listed in index.json but not in the bundle",
        |w| {
            w.edit_index(|i| {
                let mut e = i["receipts"][0].clone();
                e["file"] = json!("receipts/ghost.json");
                i["receipts"].as_array_mut().unwrap().push(e);
            });
            w.reseal_keep_index();
        },
    ));
    c.push(v("index-entry-twice", "more than one", |w| {
        w.edit_index(|i| {
            let e = i["receipts"][0].clone();
            i["receipts"].as_array_mut().unwrap().push(e);
        });
        w.reseal_keep_index();
    }));
    c.push(v("index-unknown-field", "unknown field", |w| {
        w.edit_index(|i| i["extra"] = json!(true));
        w.reseal_keep_index();
    }));
    c.push(v("index-format-wrong", "format", |w| {
        w.edit_index(|i| i["format"] = json!("kvwitness-bundle/v0"));
        w.reseal_keep_index();
    }));
    c.push(v("index-predicate-type-wrong", "unknown predicate", |w| {
        w.edit_index(|i| i["predicate_type"] = json!("https://example.com/x"));
        w.reseal_keep_index();
    }));
    c.push(v("index-not-json", "not valid", |w| {
        w.write("index.json", "nope");
        w.reseal_sums();
    }));
    c.push(v(
        "readme-rewritten-by-key-holder",
        "README.md does not state what index.json says",
        |w| {
            w.reseal_keep_index();
            w.write("README.md", "# No leak\n\nEverything is fine.\n");
            w.reseal_sums();
        },
    ));
    c.push(v("manifest-not-canonical", "not canonical", |w| {
        let payload = kvw_evidence::Envelope::from_json(&w.read("manifest.json"))
            .unwrap()
            .payload_bytes()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        w.write(
            "manifest.json",
            kvw_evidence::Envelope::sign(
                kvw_evidence::receipt::PAYLOAD_TYPE,
                &serde_json::to_vec_pretty(&v).unwrap(),
                &attacker(),
            )
            .to_json_pretty(),
        );
        w.reseal_sums();
    }));
    c.push(v(
        "manifest-omits-leak-receipt",
        "not in the signed manifest",
        |w| {
            w.forge_manifest(&attacker(), |m| {
                m["subject"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|s| s["name"] != LEAK);
                m["predicate"]["receipts"] = json!(2);
            });
        },
    ));
    c.push(v("manifest-lists-ghost", "missing from the bundle", |w| {
        w.forge_manifest(&attacker(), |m| {
            m["subject"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "receipts/ghost.json", "digest": {"sha256": "0".repeat(64)}}));
            m["predicate"]["receipts"] = json!(4);
        });
    }));
    c.push(v("manifest-subject-escapes", "not a receipt", |w| {
        w.forge_manifest(&attacker(), |m| {
            m["subject"][0]["name"] = json!("../outside/shadow");
        });
    }));
    c.push(v("manifest-count-wrong", "says", |w| {
        w.forge_manifest(&attacker(), |m| m["predicate"]["receipts"] = json!(99));
    }));
    c.push(v(
        "manifest-predicate-type-wrong",
        "unknown predicate",
        |w| {
            w.forge_manifest(&attacker(), |m| {
                m["predicateType"] = json!("https://example.com/m")
            });
        },
    ));
    c.push(v("manifest-subject-twice", "listed twice", |w| {
        w.forge_manifest(&attacker(), |m| {
            let s = m["subject"][1].clone();
            m["subject"].as_array_mut().unwrap().push(s);
            m["predicate"]["receipts"] = json!(4);
        });
    }));
    c.push(v("manifest-names-other-key", "names key", |w| {
        w.forge_manifest(&attacker(), |m| {
            m["predicate"]["keyid"] = json!("0".repeat(64))
        });
    }));
    c.push(v("manifest-digest-malformed", "malformed sha256", |w| {
        w.forge_manifest(&attacker(), |m| {
            m["subject"][0]["digest"]["sha256"] = json!("XYZ")
        });
    }));
    c.push(v("manifest-is-a-receipt", "unknown predicate", |w| {
        w.write("manifest.json", w.read(LEAK));
        w.reseal_sums();
    }));

    // --- Terminal injection (issue item 8).
    c.push(v("ansi-escape-in-file-name", "control character", |w| {
        std::fs::copy(
            w.p(LEAK),
            w.p("receipts/\u{1b}[2K\rOK: 135 of 135 receipts ok.json"),
        )
        .unwrap();
        w.reseal_sums();
    }));
    c.push(v("newline-in-file-name", "not listed", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/x\nOK: 3 of 3 receipts ok.json")).unwrap();
    }));
    c.push(v("escape-in-name-listed", "control character", |w| {
        std::fs::copy(w.p(LEAK), w.p("receipts/x\u{1b}[1A.json")).unwrap();
        w.reseal_all();
    }));
    c.push(v(
        "bidi-override-in-file-name",
        "may hold only letters",
        |w| {
            std::fs::copy(w.p(LEAK), w.p("receipts/a\u{202e}nosj.json")).unwrap();
            w.reseal_sums();
        },
    ));
    c.push(v("ansi-escape-unlisted-name", "not listed", |w| {
        w.write("\u{1b}]0;pwned\u{7}", "x");
    }));
    c.push(case("ansi-escape-in-signed-outcome", |w| {
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            // The tenant names are signed and echoed in the outcome line.
            p.verdict.tenants_leaked =
                vec!["\u{1b}[2K\r\u{1b}[32mOK: 135 of 135 receipts ok\u{1b}[0m\u{9b}31m".into()]
        });
        w.reseal_all();
        Cmd::new(verify(w), Expect::Harmless { needle: "\\e[2K" })
    }));

    // --- Single receipts (`kvw verify FILE`).
    c.push(vc(
        "single-receipt-fifo",
        "neither a bundle folder nor a receipt",
        |w| {
            w.fifo(LEAK);
            args([OsString::from("verify"), w.p(LEAK).into()])
        },
    ));
    c.push(vc("single-receipt-link", "symbolic link", |w| {
        std::os::unix::fs::symlink(w.p(LEAK), w.at("link.json")).unwrap();
        args([OsString::from("verify"), w.at("link.json").into()])
    }));
    c.push(vc(
        "single-receipt-dev-null",
        "neither a bundle folder nor a receipt",
        |_| args(["verify", "/dev/null"]),
    ));
    c.push(vc("single-receipt-renamed", "signed under the name", |w| {
        std::fs::copy(
            w.p(LEAK),
            w.at("incident-walkthrough-fixes-kv-checksum.json"),
        )
        .unwrap();
        args([
            OsString::from("verify"),
            w.at("incident-walkthrough-fixes-kv-checksum.json").into(),
            "--key".into(),
            w.at("bundle.pub.json").into(),
        ])
    }));
    c.push(vc(
        "single-receipt-markup-name",
        "may hold only letters",
        |w| {
            let path = w.at("a\"><img src=x onerror=alert(1)>.json");
            std::fs::copy(w.p(LEAK), &path).unwrap();
            args([
                OsString::from("verify"),
                path.into(),
                "--key".into(),
                w.at("bundle.pub.json").into(),
            ])
        },
    ));
    c.push(vc("single-receipt-key-fifo", "FIFO", |w| {
        mkfifo(&w.at("k.fifo"));
        args([
            OsString::from("verify"),
            w.p(LEAK).into(),
            "--key".into(),
            w.at("k.fifo").into(),
        ])
    }));
    c.push(vc("single-receipt-oversized", "limit", |w| {
        let mut bytes = w.read(LEAK);
        bytes.resize(17 * 1024 * 1024, b' ');
        std::fs::write(w.at("incident-walkthrough-fixes-none.json"), bytes).unwrap();
        args([
            OsString::from("verify"),
            w.at("incident-walkthrough-fixes-none.json").into(),
            "--key".into(),
            w.at("bundle.pub.json").into(),
        ])
    }));
    c.push(vc(
        "single-receipt-stranger-key",
        "no signature by key",
        |w| {
            args([
                OsString::from("verify"),
                w.p(LEAK).into(),
                "--key".into(),
                w.at("publisher.pub.json").into(),
            ])
        },
    ));
    c.push(vc("single-receipt-duplicate-keys", "not canonical", |w| {
        w.forge_text(LEAK, |t| {
            t.replacen(
                "\"http_status\":200",
                "\"http_status\":500,\"http_status\":200",
                1,
            )
        });
        args([
            OsString::from("verify"),
            w.p(LEAK).into(),
            "--key".into(),
            w.at("bundle.pub.json").into(),
        ])
    }));
    c.push(vc(
        "trusted-key-not-the-bundle-key",
        "no signature by key",
        |w| {
            let mut a = verify(w);
            a.extend(args([
                OsString::from("--key"),
                w.at("publisher.pub.json").into(),
            ]));
            a
        },
    ));
    c.push(vc(
        "trusted-key-leak-deleted",
        "signed manifest.json",
        |w| {
            w.remove(LEAK);
            w.edit_index(|i| {
                i["receipts"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|e| e["file"] != LEAK)
            });
            w.reseal_sums();
            verify_trusted(w)
        },
    ));
    c.extend(reproduce_cases());
    c
}

// --- `--reproduce` re-runs what a receipt claims; counts add up; every
// field is escaped on its own line; re-runs are sized before they start.

/// A genuine fuzz receipt name (fixes none: it finds a violation).
const FUZZ: &str = "fuzz-fixes-none-seed-2026.json";
/// Runs of the genuine fuzz receipt.
const FUZZ_RUNS: &str = "60";
const MODEL_CHECK: &str = "model-check-fixes-none.json";

/// Genuine fuzz and model-check receipts, signed with the bundle key by
/// the real `kvw fuzz` and `kvw check`, made once per test process.
fn genuine_others() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("signing-key.json");
        attacker().save(&key).unwrap();
        let run = |a: &[&std::ffi::OsStr]| {
            std::process::Command::new(KVW)
                .args(a)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
        };
        let k = key.as_os_str();
        let fuzz = run(&[
            "fuzz".as_ref(),
            "--fixes".as_ref(),
            "none".as_ref(),
            "--runs".as_ref(),
            FUZZ_RUNS.as_ref(),
            "--key".as_ref(),
            k,
            "--out".as_ref(),
            dir.path().as_os_str(),
        ]);
        assert_eq!(
            fuzz.code(),
            Some(1),
            "kvw fuzz --fixes none finds a violation"
        );
        let check = run(&[
            "check".as_ref(),
            "--fixes".as_ref(),
            "none".as_ref(),
            "--requests".as_ref(),
            "1".as_ref(),
            "--key".as_ref(),
            k,
            "--out".as_ref(),
            dir.path().join(MODEL_CHECK).as_os_str(),
        ]);
        assert_eq!(
            check.code(),
            Some(1),
            "kvw check --fixes none finds the leak"
        );
        dir
    })
    .path()
}

/// Copy a genuine receipt of another kind into `rel` of the work folder.
fn place(w: &Work, name: &str, rel: &str) {
    w.write(rel, std::fs::read(genuine_others().join(name)).unwrap());
}

/// `kvw verify FILE --key <bundle key> --reproduce`.
fn single_reproduce(w: &Work, rel: &str) -> Vec<OsString> {
    args([
        OsString::from("verify"),
        w.p(rel).into(),
        "--key".into(),
        w.at("bundle.pub.json").into(),
        "--reproduce".into(),
    ])
}

/// An audit receipt whose reason is `reason`, signed with the bundle key.
fn audit_receipt(w: &Work, rel: &str, reason: &str) {
    let p = kvw_evidence::audit::AuditPredicate {
        gate: "isolation".into(),
        result: kvw_evidence::audit::GateResult::Fail,
        endpoint: "http://127.0.0.1:9".into(),
        auditor_version: "0".into(),
        reason: reason.into(),
        evidence: json!({"leaks": [{"canary": "CANARY-t0-1"}]}),
        prompts: vec![],
        exchanges: vec![],
    };
    let name = rel.rsplit('/').next().unwrap();
    let env = kvw_evidence::sign_statement(name, &p, &attacker()).unwrap();
    w.write(rel, env.to_json_pretty());
}

/// List the receipt at `rel` among the index's other kinds and re-seal.
fn list_other(w: &Work, rel: &str) {
    let st = kvw_evidence::verify_statement(&w.read(rel), &attacker().public()).unwrap();
    let entry = kvw_evidence::bundle::OtherEntry::for_statement(rel, &st).unwrap();
    w.edit_index(|i| {
        let others = i
            .as_object_mut()
            .unwrap()
            .entry("others")
            .or_insert(json!([]));
        others
            .as_array_mut()
            .unwrap()
            .push(serde_json::to_value(&entry).unwrap());
    });
    w.reseal_keep_index();
}

/// A forged copy of the genuine fuzz receipt, verified alone with --reproduce.
fn fuzz_forged(
    name: &str,
    needle: &'static str,
    edit: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
) -> Case {
    case(name, move |w| {
        place(w, FUZZ, FUZZ);
        w.forge_statement(FUZZ, |v| edit(&mut v["predicate"]));
        Cmd::new(single_reproduce(w, FUZZ), refused(1, needle))
    })
}

/// A forged copy of the genuine fuzz receipt, verified alone without a re-run.
fn fuzz_counts(
    name: &str,
    needle: &'static str,
    edit: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
) -> Case {
    case(name, move |w| {
        place(w, FUZZ, FUZZ);
        w.forge_statement(FUZZ, |v| edit(&mut v["predicate"]));
        let mut a = single_reproduce(w, FUZZ);
        a.pop();
        Cmd::new(a, refused(1, needle))
    })
}

/// The leak receipt with its config edited, verified with --reproduce.
fn probe_forged(
    name: &str,
    needle: &'static str,
    edit: impl Fn(&mut kvw_evidence::ProbeConfig) + Send + Sync + 'static,
) -> Case {
    case(name, move |w| {
        w.forge_predicate(LEAK, "incident-walkthrough-fixes-none.json", |p| {
            edit(&mut p.config)
        });
        w.reseal_all();
        Cmd::new(reproduce(w), refused(1, needle))
    })
}

fn reproduce_cases() -> Vec<Case> {
    let mut c = Vec::new();
    // The control: the genuine receipt re-runs every run and reproduces.
    c.push(case("fuzz-genuine-receipt-reproduces", |w| {
        place(w, FUZZ, FUZZ);
        Cmd::new(
            single_reproduce(w, FUZZ),
            Expect::Harmless {
                needle: "[reproduced]",
            },
        )
    }));
    // A receipt claiming 2^53 - 1 clean runs: re-running them is over the
    // budget, so it is refused, never "[reproduced]".
    c.push(fuzz_forged(
        "fuzz-claims-2-53-clean-runs",
        "--max-runs",
        |p| {
            p["fixes"] = json!([]);
            p["runs"] = json!(9007199254740991u64);
            p["violating_runs"] = json!(0);
            p["stalled_runs"] = json!(0);
            p["by_invariant"] = json!([]);
            p["counterexample"] = serde_json::Value::Null;
        },
    ));
    // Every field of the counterexample and every count is compared.
    type Edit = fn(&mut serde_json::Value);
    let altered: [(&str, Edit); 7] = [
        ("fuzz-clean-claim-for-violating-runs", |p| {
            p["violating_runs"] = json!(0);
            p["by_invariant"] = json!([]);
            p["counterexample"] = serde_json::Value::Null;
        }),
        ("fuzz-counterexample-detail-altered", |p| {
            p["counterexample"]["detail"] = json!("nothing happened");
        }),
        ("fuzz-counterexample-rid-altered", |p| {
            p["counterexample"]["rid"] = json!("req-other");
        }),
        ("fuzz-counterexample-run-altered", |p| {
            let run = p["counterexample"]["run"].as_u64().unwrap();
            p["counterexample"]["run"] = json!((run + 1) % 60);
        }),
        ("fuzz-counterexample-pages-dropped", |p| {
            p["counterexample"]["pages"] = json!([]);
        }),
        ("fuzz-by-invariant-renamed", |p| {
            let first = p["counterexample"]["invariant"]
                .as_str()
                .unwrap()
                .to_string();
            let other = if first == "unanswered" {
                "isolation"
            } else {
                "unanswered"
            };
            let runs = p["violating_runs"].clone();
            p["by_invariant"] = json!([{"invariant": other, "runs": runs}]);
            p["counterexample"]["invariant"] = json!(other);
        }),
        ("fuzz-stalled-runs-altered", |p| {
            let s = p["stalled_runs"].as_u64().unwrap();
            p["stalled_runs"] = json!(if s == 0 { 1 } else { s - 1 });
        }),
    ];
    for (name, edit) in altered {
        c.push(fuzz_forged(name, "does not reproduce", edit));
    }
    // Counts that do not add up are refused by plain verification.
    c.push(fuzz_counts("fuzz-by-invariant-sum-wrong", "sum to", |p| {
        let n = p["by_invariant"][0]["runs"].as_u64().unwrap();
        p["by_invariant"][0]["runs"] = json!(n + 1);
    }));
    c.push(fuzz_counts(
        "fuzz-stalled-over-runs",
        "more stalled runs",
        |p| {
            p["stalled_runs"] = json!(61);
        },
    ));
    c.push(fuzz_counts(
        "fuzz-counterexample-without-violation",
        "no violating run",
        |p| {
            p["violating_runs"] = json!(0);
            p["by_invariant"] = json!([]);
        },
    ));
    c.push(fuzz_counts(
        "fuzz-counterexample-run-past-runs",
        "not one of the runs",
        |p| {
            p["counterexample"]["run"] = json!(60);
        },
    ));
    // Hostile counterexample sizes: refused before any re-run.
    c.push(fuzz_forged(
        "fuzz-counterexample-5000-requests",
        "5000 requests",
        |p| {
            // Under every fix no request breaks anything, so a re-run of the
            // case would run all 5,000 to the end.
            p["fixes"] = serde_json::to_value(kvw_evidence::Fix::ALL).unwrap();
            let r = p["counterexample"]["requests"][0].clone();
            let many: Vec<serde_json::Value> = (0..5000u64)
                .map(|i| {
                    let mut r = r.clone();
                    r["at_us"] = json!(i * 1000);
                    r
                })
                .collect();
            p["counterexample"]["requests"] = json!(many);
            p["counterexample"]["original_requests"] = json!(5000);
        },
    ));
    c.push(fuzz_forged(
        "fuzz-counterexample-fan-out-1e6",
        "1000000 decode peers",
        |p| {
            p["counterexample"]["requests"][0]["faults"] =
                json!([{"kind": "fan_out", "peers": 1000000}]);
        },
    ));
    // Probe receipts over the budget: refused before the re-run.
    c.push(probe_forged(
        "probe-4096-new-tokens-incident-context",
        "--max-attended-tokens",
        |c| {
            c.scale = kvw_evidence::Scale::Incident;
            c.context_len = 1_048_576;
            c.prefill_pool_tokens = 681_280;
            c.decode_pool_tokens = 1_048_576;
            c.page_size = 64;
            c.max_new_tokens = 4096;
        },
    ));
    c.push(probe_forged(
        "probe-page-1-pools-2-21",
        "--max-pages",
        |c| {
            c.scale = kvw_evidence::Scale::Incident;
            c.context_len = 1_048_576;
            c.prefill_pool_tokens = 1 << 21;
            c.decode_pool_tokens = 1 << 21;
            c.page_size = 1;
        },
    ));
    // Model checks and audits are said to be not re-run, in bundle mode
    // and alone.
    c.push(case("bundle-model-check-says-not-re-run", |w| {
        place(w, MODEL_CHECK, &format!("receipts/{MODEL_CHECK}"));
        list_other(w, &format!("receipts/{MODEL_CHECK}"));
        Cmd::new(
            reproduce(w),
            Expect::Harmless {
                needle: "[not re-run: a model check",
            },
        )
    }));
    c.push(case("bundle-audit-says-not-re-run", |w| {
        audit_receipt(w, "receipts/isolation.receipt.json", "t1 got t0's canary");
        list_other(w, "receipts/isolation.receipt.json");
        Cmd::new(
            reproduce(w),
            Expect::Harmless {
                needle: "[not re-run: an audit",
            },
        )
    }));
    c.push(case("single-model-check-says-not-re-run", |w| {
        place(w, MODEL_CHECK, MODEL_CHECK);
        Cmd::new(
            single_reproduce(w, MODEL_CHECK),
            Expect::Harmless {
                needle: "[not re-run: a model check",
            },
        )
    }));
    // A newline inside a signed field stays inside its line.
    c.push(case("newline-in-audit-reason-forges-ok-lines", |w| {
        audit_receipt(
            w,
            "receipts/isolation.receipt.json",
            "x\nok    receipts/forged.json  all clear\nOK: 9 of 9 receipts ok",
        );
        list_other(w, "receipts/isolation.receipt.json");
        Cmd::new(
            verify(w),
            Expect::Harmless {
                needle: "x\\nok    receipts/forged.json",
            },
        )
    }));
    c
}
