//! Running `kvw` against hostile input: fixtures, forging helpers, and the
//! checks every attack gets.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kvw_evidence::bundle::readme::readme;
use kvw_evidence::bundle::{manifest, sums, BundleIndex, IndexEntry};
use kvw_evidence::canonical::{canonical_sha256, to_canonical_json};
use kvw_evidence::dsse::Envelope;
use kvw_evidence::receipt::PAYLOAD_TYPE;
use kvw_evidence::{
    sign_predicate, verify_receipt, write_bundle, Fix, PoisonMode, ProbePredicate, Scale, Signer,
};

pub const KVW: &str = env!("CARGO_BIN_EXE_kvw");
/// Longest any attacked command may run.
pub const TIME_LIMIT: Duration = Duration::from_secs(30);
/// Address-space cap for every attacked command (KiB): no absurd allocation.
pub const MEMORY_LIMIT_KIB: u64 = 4 * 1024 * 1024;

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

fn tmp_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("attacks")
}

/// A fresh, genuine bundle of three real walkthrough runs (leak, kv-checksum,
/// retire-unadmitted-reject), made once per test process.
fn base_bundle() -> &'static Path {
    static BASE: OnceLock<tempfile::TempDir> = OnceLock::new();
    BASE.get_or_init(|| {
        std::fs::create_dir_all(tmp_root()).unwrap();
        let tmp = tempfile::tempdir_in(tmp_root()).unwrap();
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
    pub fn new() -> Work {
        let base = base_bundle();
        let tmp = tempfile::tempdir_in(tmp_root()).unwrap();
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
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -v {MEMORY_LIMIT_KIB} && exec \"$0\" \"$@\""
        ))
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
        if start.elapsed() > TIME_LIMIT {
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
    let work = Work::new();
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

/// A file name made of raw bytes (not necessarily UTF-8).
pub fn raw_name(bytes: &[u8]) -> OsString {
    std::ffi::OsStr::from_bytes(bytes).to_os_string()
}
