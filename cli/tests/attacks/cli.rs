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
}
