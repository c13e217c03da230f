//! Running `kvw` against hostile input, and the checks every attack gets.
//! The genuine bundle each attack starts from and the forging helpers come
//! from the shared testkit ([`kvw_testkit::work`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const KVW: &str = env!("CARGO_BIN_EXE_kvw");
/// Longest any attacked command may run.
pub const TIME_LIMIT: Duration = Duration::from_secs(30);
/// Address-space cap for every attacked command (KiB): no absurd allocation.
pub const MEMORY_LIMIT_KIB: u64 = 4 * 1024 * 1024;

pub use kvw_testkit::work::*;

fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("attacks")
}

/// A fresh copy of the genuine bundle in a private folder under this
/// binary's temporary root.
pub fn work() -> Work {
    Work::new(&tmp_root())
}

/// Where the command's stdout goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    Pipe,
    /// `/dev/full`: every write fails with ENOSPC.
    DevFull,
    /// A pipe whose reading end is closed before the command writes.
    Closed,
}

/// What a command did.
#[derive(Debug)]
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

/// Run `kvw args` under the time and memory limits.
pub fn run_kvw(args: &[OsString], sink: Sink, env: &[(&str, OsString)]) -> Ran {
    run_kvw_within(args, sink, env, MEMORY_LIMIT_KIB, TIME_LIMIT)
}

/// Run `kvw args` under an address-space cap of `memory_kib` KiB, killed
/// past `time_limit`.
pub fn run_kvw_within(
    args: &[OsString],
    sink: Sink,
    env: &[(&str, OsString)],
    memory_kib: u64,
    time_limit: Duration,
) -> Ran {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("ulimit -v {memory_kib} && exec \"$0\" \"$@\""))
        .arg(KVW)
        .args(args)
        .env("KVW_KEY", tmp_root().join("unused-signing-key.json"))
        .env_remove("KVW_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    match sink {
        Sink::Pipe => {
            cmd.stdout(Stdio::piped());
        }
        Sink::DevFull => {
            cmd.stdout(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap(),
            );
        }
        Sink::Closed => {
            // A pipe whose reader is gone: the first write gets EPIPE.
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            cmd.stdout(writer);
        }
    }
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().map(reader_thread);
    let err = child.stderr.take().map(reader_thread);
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > time_limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    let collect = |h: Option<std::thread::JoinHandle<Vec<u8>>>| {
        h.map(|h| String::from_utf8_lossy(&h.join().unwrap_or_default()).into_owned())
            .unwrap_or_default()
    };
    Ran {
        code: status.code(),
        stdout: collect(out),
        stderr: collect(err),
        elapsed,
        timed_out,
    }
}

fn reader_thread<R: std::io::Read + Send + 'static>(mut r: R) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

/// What an attack must come to.
#[derive(Clone, Debug)]
pub enum Expect {
    /// Refused: this exit code, one line on stderr containing the needle
    /// (or the needle in a FAIL line on stdout), no "OK" summary.
    Refused { code: i32, needle: &'static str },
    /// Neutralised but not an error (e.g. escaped output): exit 0, needle in stdout.
    Harmless { needle: &'static str },
}

/// One attack: how to build it and what must happen.
pub struct Case {
    pub name: String,
    pub setup: Box<dyn Fn(&Work) -> Cmd + Send + Sync>,
}

/// The command an attack runs.
pub struct Cmd {
    pub args: Vec<OsString>,
    pub expect: Expect,
    pub sink: Sink,
    pub env: Vec<(&'static str, OsString)>,
    /// A path that must not exist afterwards (e.g. a refused site's output).
    pub must_not_exist: Option<PathBuf>,
}

impl Cmd {
    pub fn new(args: Vec<OsString>, expect: Expect) -> Cmd {
        Cmd {
            args,
            expect,
            sink: Sink::Pipe,
            env: Vec::new(),
            must_not_exist: None,
        }
    }
}

pub fn refused(code: i32, needle: &'static str) -> Expect {
    Expect::Refused { code, needle }
}

pub fn args<I, S>(items: I) -> Vec<OsString>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    items.into_iter().map(Into::into).collect()
}

pub fn case(name: &str, setup: impl Fn(&Work) -> Cmd + Send + Sync + 'static) -> Case {
    Case {
        name: name.to_string(),
        setup: Box::new(setup),
    }
}

/// Run one case; `Err` says what went wrong.
pub fn check(case: &Case) -> Result<(), String> {
    let work = work();
    let cmd = (case.setup)(&work);
    let before = snapshot(work.root());
    let ran = run_kvw(&cmd.args, cmd.sink, &cmd.env);
    let after = snapshot(work.root());
    let all = format!("{}{}", ran.stdout, ran.stderr);
    let fail = |why: String| {
        Err(format!(
            "{why} (after {:?})\n  stdout: {:?}\n  stderr: {:?}",
            ran.elapsed, ran.stdout, ran.stderr
        ))
    };
    if ran.timed_out {
        return fail(format!("did not finish within {TIME_LIMIT:?}"));
    }
    if all.contains("panicked") || all.contains("RUST_BACKTRACE") {
        return fail("panicked".into());
    }
    if all.contains('\u{1b}') || all.contains('\u{9b}') || all.contains('\u{202e}') {
        return fail("printed a raw control character".into());
    }
    if all.contains("SECRET-") {
        return fail("printed a secret from outside the bundle".into());
    }
    let Some(code) = ran.code else {
        return fail("killed by a signal (crash or abort)".into());
    };
    match cmd.expect {
        Expect::Refused { code: want, needle } => {
            if code != want {
                return fail(format!("exit code {code}, expected {want}"));
            }
            let lines: Vec<&str> = ran
                .stderr
                .lines()
                .filter(|l| !l.trim().is_empty())
                .collect();
            if lines.len() != 1 {
                return fail(format!("{} lines on stderr, expected one", lines.len()));
            }
            if !all.contains(needle) {
                return fail(format!("output lacks {needle:?}"));
            }
            if ran.stdout.lines().any(|l| l.starts_with("OK")) {
                return fail("printed an OK summary".into());
            }
            if before != after {
                return fail("the file system changed on refusal".into());
            }
        }
        Expect::Harmless { needle } => {
            if code != 0 {
                return fail(format!("exit code {code}, expected 0"));
            }
            if !ran.stdout.contains(needle) {
                return fail(format!("stdout lacks {needle:?}"));
            }
        }
    }
    if let Some(path) = &cmd.must_not_exist {
        if path.symlink_metadata().is_ok() {
            return fail(format!("{} was written", path.display()));
        }
    }
    Ok(())
}

/// Run every case, in a few threads; panic listing every failure.
pub fn run_all(group: &str, cases: Vec<Case>) {
    let total = cases.len();
    let cases = std::sync::Arc::new(std::sync::Mutex::new(
        cases.into_iter().enumerate().collect::<Vec<_>>(),
    ));
    let failures = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let cases = cases.clone();
            let failures = failures.clone();
            std::thread::spawn(move || loop {
                let Some((_, case)) = cases.lock().unwrap().pop() else {
                    break;
                };
                if let Err(why) = check(&case) {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{}: {why}", case.name));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    println!(
        "{group}: {total} attacks, {} refused or neutralised",
        total - failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {total} {group} attacks got through:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
