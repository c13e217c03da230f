//! Attacks on the rest of the command line (issue items 6 and 10): absurd
//! sizes for `kvw probe`, output that cannot be written, `kvw bundle --out`.

use std::ffi::OsString;

use crate::harness::*;

fn probe(extra: &[&str]) -> Vec<OsString> {
    let mut a = args(["probe", "incident"]);
    a.extend(args(extra.iter().copied()));
    a
}

fn p(name: &str, code: i32, needle: &'static str, extra: &'static [&'static str]) -> Case {
    case(name, move |_| Cmd::new(probe(extra), refused(code, needle)))
}

fn with_sink(
    name: &str,
    sink: Sink,
    needle: &'static str,
    make: fn(&Work) -> Vec<OsString>,
) -> Case {
    case(name, move |w| {
        let mut cmd = Cmd::new(make(w), refused(1, needle));
        cmd.sink = sink;
        cmd
    })
}

fn bundle_out(w: &Work, out: &str) -> Vec<OsString> {
    args([
        OsString::from("bundle"),
        "--scales".into(),
        "incident".into(),
        "--key".into(),
        w.at("nokey.json").into(),
        "--out".into(),
        w.at(out).into(),
    ])
}

pub fn cases() -> Vec<Case> {
    vec![
        p(
            "probe-prefill-pool-1e12-syntax",
            2,
            "invalid value",
            &["--prefill-pool", "1e12"],
        ),
        p(
            "probe-prefill-pool-10-12",
            1,
            "exceeds",
            &["--prefill-pool", "1000000000000"],
        ),
        p(
            "probe-prefill-pool-2-40",
            1,
            "exceeds",
            &["--prefill-pool", "1099511627776"],
        ),
        p(
            "probe-prefill-pool-u64-max",
            1,
            "exceeds",
            &["--prefill-pool", "18446744073709551615"],
        ),
        p(
            "probe-prefill-pool-overflow",
            2,
            "invalid value",
            &["--prefill-pool", "18446744073709551616"],
        ),
        p(
            "probe-prefill-pool-negative",
            2,
            "",
            &["--prefill-pool", "-1"],
        ),
        p(
            "probe-incident-prefill-pool-2-40",
            1,
            "exceeds",
            &["--scale", "incident", "--prefill-pool", "1099511627776"],
        ),
        p("probe-page-size-0", 1, "page size", &["--page-size", "0"]),
        p(
            "probe-page-size-u32-max",
            1,
            "larger than 1024",
            &["--page-size", "4294967295"],
        ),
        p(
            "probe-seed-2-60",
            1,
            "seed",
            &["--seed", "1152921504606846976"],
        ),
        p(
            "probe-seed-u64-max",
            1,
            "seed",
            &["--seed", "18446744073709551615"],
        ),
        p(
            "probe-unknown-fix-with-escape",
            2,
            "unknown fix",
            &["--fixes", "\u{1b}[2Jnope"],
        ),
        with_sink(
            "probe-stdout-dev-full",
            Sink::DevFull,
            "No space left",
            |_| probe(&[]),
        ),
        with_sink(
            "probe-stdout-closed-pipe",
            Sink::Closed,
            "Broken pipe",
            |_| probe(&[]),
        ),
        with_sink(
            "verify-stdout-dev-full",
            Sink::DevFull,
            "cannot write to standard output",
            |w| args([OsString::from("verify"), w.bundle.clone().into()]),
        ),
        with_sink(
            "verify-stdout-closed-pipe",
            Sink::Closed,
            "cannot write to standard output",
            |w| args([OsString::from("verify"), w.bundle.clone().into()]),
        ),
        with_sink(
            "help-stdout-dev-full",
            Sink::DevFull,
            "cannot write to standard output",
            |_| args(["--help"]),
        ),
        with_sink(
            "verify-single-stdout-dev-full",
            Sink::DevFull,
            "cannot write to standard output",
            |w| {
                args([
                    OsString::from("verify"),
                    w.p(LEAK).into(),
                    "--key".into(),
                    w.at("bundle.pub.json").into(),
                ])
            },
        ),
        case("bundle-out-unrelated-folder-refused-before-probes", |w| {
            std::fs::create_dir(w.at("notes")).unwrap();
            std::fs::write(w.at("notes/todo.txt"), b"keep").unwrap();
            Cmd::new(bundle_out(w, "notes"), refused(1, "not a bundle"))
        }),
        case("bundle-out-is-a-file", |w| {
            std::fs::write(w.at("file"), b"x").unwrap();
            Cmd::new(bundle_out(w, "file"), refused(1, "not a folder"))
        }),
        case("bundle-out-is-a-link", |w| {
            std::os::unix::fs::symlink(w.at("outside"), w.at("link")).unwrap();
            Cmd::new(bundle_out(w, "link"), refused(1, "not a folder"))
        }),
        case("bundle-out-bundle-with-stray-file", |w| {
            std::fs::write(w.p("stray.txt"), b"x").unwrap();
            let mut a = bundle_out(w, "x");
            let n = a.len();
            a[n - 1] = w.bundle.clone().into();
            Cmd::new(a, refused(1, "not a bundle"))
        }),
    ]
    .into_iter()
    .chain(flag_cases())
    .chain(operator_file_cases())
    .chain(output_cases())
    .collect()
}

/// `kvw <args>` refused with `code` and `needle`.
fn k(name: &str, code: i32, needle: &'static str, extra: &'static [&'static str]) -> Case {
    case(name, move |_| {
        Cmd::new(args(extra.iter().copied()), refused(code, needle))
    })
}

/// Absurd flag values: bounded at parse time, never an overflow or an
/// allocation of 2^64 results; runs unbounded by default get a limit.
fn flag_cases() -> Vec<Case> {
    const U64_MAX: &str = "18446744073709551615";
    vec![
        k(
            "check-timeout-u64-max",
            2,
            "1..=86400",
            &["check", "--timeout", U64_MAX],
        ),
        k(
            "fuzz-runs-u64-max",
            2,
            "1..=10000000",
            &["fuzz", "--runs", U64_MAX],
        ),
        k(
            "fuzz-runs-2-53",
            2,
            "1..=10000000",
            &["fuzz", "--runs", "9007199254740991"],
        ),
        k(
            "bench-fuzz-runs-u64-max",
            2,
            "0..=10000000",
            &["bench", "--fuzz-runs", U64_MAX],
        ),
        k(
            "bench-reps-2-32",
            2,
            "1..=100",
            &["bench", "--reps", "4294967295"],
        ),
        k(
            "bench-check-budget-past-ten-minutes",
            2,
            "0..=600",
            &["bench", "--check-budget", "601"],
        ),
        k(
            "probe-incident-page-size-1",
            1,
            "--max-pages",
            &[
                "probe",
                "incident",
                "--scale",
                "incident",
                "--page-size",
                "1",
            ],
        ),
        k(
            "verify-max-runs-u64-max",
            2,
            "1..=10000000",
            &["verify", ".", "--reproduce", "--max-runs", U64_MAX],
        ),
        case("check-default-timeout-stated", |_| {
            Cmd::new(
                args(["check", "--help"]),
                Expect::Harmless {
                    needle: "Default 600",
                },
            )
        }),
        case("check-4-requests-every-fault-stops-at-timeout", |_| {
            Cmd::new(
                args([
                    "check",
                    "--requests",
                    "4",
                    "--faults",
                    "aborts,lost-ack",
                    "--fixes",
                    "all",
                    "--timeout",
                    "2",
                ]),
                refused(1, "verdict is undecided"),
            )
        }),
    ]
}

/// Files an operator names: regular files under a size cap only, never
/// a device, a FIFO or a link to one.
fn operator_file_cases() -> Vec<Case> {
    fn bundle_mc(w: &Work, file: &std::path::Path) -> Vec<OsString> {
        args([
            OsString::from("bundle"),
            "--incident-matrix".into(),
            "outcomes".into(),
            "--key".into(),
            w.at("nokey.json").into(),
            "--out".into(),
            w.at("new-bundle").into(),
            "--model-check".into(),
            file.into(),
        ])
    }
    fn serve_keys(file: &std::path::Path) -> Vec<OsString> {
        args([
            OsString::from("serve"),
            "--openai".into(),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--for-seconds".into(),
            "1".into(),
            "--keys-file".into(),
            file.into(),
        ])
    }
    fn site_narratives(w: &Work, needle: &'static str, bad: impl Fn(&std::path::Path)) -> Cmd {
        let dir = w.at("narratives");
        for lang in ["en", "it"] {
            std::fs::create_dir_all(dir.join(lang)).unwrap();
            for n in 1..=7 {
                std::fs::write(dir.join(lang).join(format!("step-{n}.md")), "# step\n").unwrap();
            }
        }
        let step = dir.join("en").join("step-1.md");
        std::fs::remove_file(&step).unwrap();
        bad(&step);
        let mut cmd = Cmd::new(
            crate::site::build_with(w, ["--narratives".into(), dir.into()]),
            refused(1, needle),
        );
        cmd.must_not_exist = Some(w.at("site"));
        cmd
    }
    let zero = std::path::Path::new("/dev/zero");
    vec![
        case("bundle-model-check-dev-zero", move |w| {
            Cmd::new(bundle_mc(w, zero), refused(1, "a device"))
        }),
        case("bundle-model-check-fifo", |w| {
            mkfifo(&w.at("mc.fifo"));
            Cmd::new(bundle_mc(w, &w.at("mc.fifo")), refused(1, "a FIFO"))
        }),
        case("bundle-model-check-link-to-dev-zero", move |w| {
            std::os::unix::fs::symlink(zero, w.at("mc.json")).unwrap();
            Cmd::new(bundle_mc(w, &w.at("mc.json")), refused(1, "a device"))
        }),
        case("serve-keys-file-dev-zero", move |_| {
            Cmd::new(serve_keys(zero), refused(1, "a device"))
        }),
        case("serve-keys-file-fifo", |w| {
            mkfifo(&w.at("keys.fifo"));
            Cmd::new(serve_keys(&w.at("keys.fifo")), refused(1, "a FIFO"))
        }),
        case("serve-keys-file-over-limit", |w| {
            std::fs::write(w.at("keys.txt"), vec![b'#'; 2 * 1024 * 1024]).unwrap();
            Cmd::new(serve_keys(&w.at("keys.txt")), refused(1, "limit"))
        }),
        case("site-narrative-step-links-to-dev-zero", move |w| {
            site_narratives(w, "is a device", |step| {
                std::os::unix::fs::symlink(zero, step).unwrap()
            })
        }),
        case("site-narrative-step-fifo", |w| {
            site_narratives(w, "is a FIFO", mkfifo)
        }),
    ]
}

/// One output rule: an existing file is refused unless --force, and left
/// as it was.
fn output_cases() -> Vec<Case> {
    fn existing(w: &Work, name: &str) -> OsString {
        std::fs::write(w.at(name), b"keep me").unwrap();
        w.at(name).into()
    }
    vec![
        case("probe-out-existing-file", |w| {
            let mut a = probe(&[]);
            a.extend([OsString::from("--out"), existing(w, "r.json")]);
            Cmd::new(a, refused(1, "already exists"))
        }),
        case("check-out-existing-file", |w| {
            let a = args([
                OsString::from("check"),
                "--fixes".into(),
                "all".into(),
                "--out".into(),
                existing(w, "mc.json"),
            ]);
            Cmd::new(a, refused(1, "already exists"))
        }),
        case("scenario-out-existing-file", |w| {
            let a = args([
                OsString::from("scenario"),
                "run".into(),
                "late_write_corrupts_next_tenant".into(),
                "--out".into(),
                existing(w, "s.json"),
            ]);
            Cmd::new(a, refused(1, "already exists"))
        }),
        case("audit-out-existing-receipt-before-any-request", |w| {
            std::fs::create_dir(w.at("au")).unwrap();
            std::fs::write(w.at("au/isolation.receipt.json"), b"keep me").unwrap();
            let a = args([
                OsString::from("audit"),
                "--endpoint".into(),
                "http://127.0.0.1:9".into(),
                "--key".into(),
                "k1".into(),
                "--key".into(),
                "k2".into(),
                "--gates".into(),
                "isolation".into(),
                "--out".into(),
                w.at("au").into(),
            ]);
            Cmd::new(a, refused(2, "already exists"))
        }),
        case("fuzz-out-existing-receipt", |w| {
            std::fs::create_dir(w.at("fz")).unwrap();
            std::fs::write(w.at("fz/fuzz-fixes-all-seed-2026.json"), b"keep me").unwrap();
            let a = args([
                OsString::from("fuzz"),
                "--runs".into(),
                "2".into(),
                "--out".into(),
                w.at("fz").into(),
            ]);
            Cmd::new(a, refused(1, "already exists"))
        }),
    ]
}
