//! Receipts: signing a probe predicate and verifying a signed one.
//!
//! A receipt is a DSSE envelope ([`crate::dsse`]) whose payload is an in-toto
//! Statement ([`crate::statement`]) whose predicate is a
//! [`ProbePredicate`]. [`verify_receipt`] is the single place that decides
//! whether a receipt is good; the CLI, bundles and the WebAssembly build all
//! call it. It checks, in order, and stops at the first failure:
//!
//! 1. size (at most [`MAX_RECEIPT_BYTES`]), JSON, no unknown fields;
//! 2. `payloadType` is [`PAYLOAD_TYPE`];
//! 3. a signature whose `keyid` is the key's verifies over the DSSE PAE;
//! 4. the Statement's `_type`, then `predicateType` == [`PREDICATE_TYPE`];
//! 5. the predicate parses, exactly one subject, its digest is the
//!    predicate's canonical SHA-256;
//! 6. `trace_sha256` is the canonical SHA-256 of `{events, steps}`, and the
//!    steps are exactly 1..=7 in order, referring to existing events.
//!
//! Two digests help comparing runs: the subject digest pins one predicate
//! exactly; the [`reproducible_digest`] leaves out what legitimately varies
//! between machines and builds (the engine version/commit and the backend),
//! so re-running a receipt's config at another commit must give the same one.

use serde_json::Value;

use crate::canonical::{canonical_sha256, sha256_hex, to_canonical_json};
use crate::dsse::Envelope;
use crate::error::EvidenceError;
use crate::predicate::{Event, ProbePredicate, Step, PREDICATE_TYPE};
use crate::signing::{PublicKey, Signer};
use crate::statement::{Statement, STATEMENT_TYPE};

/// DSSE `payloadType` of an in-toto Statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// Largest receipt accepted for verification (16 MiB).
pub const MAX_RECEIPT_BYTES: u64 = 16 * 1024 * 1024;

/// Number of steps every predicate carries.
pub const STEP_COUNT: usize = 7;

/// A receipt that passed [`verify_receipt`].
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedReceipt {
    /// The subject name (the receipt's file name when it was signed).
    pub name: String,
    /// Id of the key whose signature verified.
    pub keyid: String,
    /// Subject digest: canonical SHA-256 of the predicate.
    pub predicate_sha256: String,
    /// See [`reproducible_digest`].
    pub reproducible_digest: String,
    /// The verified predicate.
    pub predicate: ProbePredicate,
}

/// Lowercase hex SHA-256 of the canonical JSON of `{events, steps}`: the
/// value of a predicate's `trace_sha256`.
pub fn trace_sha256(events: &[Event], steps: &[Step]) -> String {
    // Plain data types with string keys always serialize.
    match (serde_json::to_value(events), serde_json::to_value(steps)) {
        (Ok(events), Ok(steps)) => trace_digest(&events, &steps),
        _ => String::new(),
    }
}

/// [`trace_sha256`] of `events` and `steps` as JSON: the form a verifier
/// holds, so the digest it checks is taken over exactly what was signed
/// (and the browser build carries no second, typed serializer).
fn trace_digest(events: &Value, steps: &Value) -> String {
    let mut trace = serde_json::Map::new();
    trace.insert("events".into(), events.clone());
    trace.insert("steps".into(), commit_independent(steps));
    canonical_sha256(&trace).unwrap_or_default()
}

/// The steps (as JSON) without the line numbers of the engine's own source:
/// those anchors belong to the engine commit (like `engine.commit`) and
/// move when unrelated code moves, while what happened stays the same.
/// Upstream lines are pinned to a fixed commit and stay in.
fn commit_independent(steps: &Value) -> Value {
    let mut steps = steps.clone();
    let sources = steps
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|step| step.get_mut("sources")?.as_array_mut())
        .flatten();
    for src in sources {
        if let Some(src) = src.as_object_mut() {
            if src.get("origin").and_then(Value::as_str) == Some("engine") {
                src.insert("line_start".into(), Value::Null);
                src.insert("line_end".into(), Value::Null);
            }
        }
    }
    steps
}

/// Members of a predicate a re-run must reproduce: everything but `engine`
/// (changes with every commit) and `backend` (CPU or GPU must agree).
const REPRODUCIBLE: [&str; 8] = [
    "probe",
    "config",
    "requests",
    "events",
    "steps",
    "assumptions",
    "verdict",
    "trace_sha256",
];

/// Lowercase hex SHA-256 of the canonical JSON of everything but `engine`,
/// `backend` and the engine's own line numbers (see [`REPRODUCIBLE`]).
pub fn reproducible_digest(p: &ProbePredicate) -> String {
    serde_json::to_value(p)
        .map(|p| reproducible_digest_of(&p))
        .unwrap_or_default()
}

/// [`reproducible_digest`] of a predicate as JSON.
fn reproducible_digest_of(p: &Value) -> String {
    let part: serde_json::Map<String, Value> = REPRODUCIBLE
        .iter()
        .map(|&key| {
            let value = p.get(key).cloned().unwrap_or(Value::Null);
            let value = if key == "steps" {
                commit_independent(&value)
            } else {
                value
            };
            (key.to_string(), value)
        })
        .collect();
    canonical_sha256(&part).unwrap_or_default()
}

/// A predicate as it was signed: parsed, and its canonical JSON (the bytes
/// its subject digest is taken over).
#[derive(Debug, Clone, Copy)]
pub struct SignedJson<'a> {
    pub value: &'a Value,
    pub canonical: &'a [u8],
}

impl SignedJson<'_> {
    /// The predicate's trace digest (see [`trace_sha256`]) over what was signed.
    fn trace_digest(&self) -> String {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some([d]) = self.digests_of_members([&TRACE_MEMBERS]) {
            return d;
        }
        let part = |key| self.value.get(key).unwrap_or(&Value::Null);
        trace_digest(part("events"), part("steps"))
    }

    /// The predicate's [`reproducible_digest`] over what was signed.
    fn reproducible_digest(&self) -> String {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some([d]) = self.digests_of_members([&reproducible_sorted()]) {
            return d;
        }
        reproducible_digest_of(self.value)
    }

    /// [`Self::trace_digest`] and [`Self::reproducible_digest`], reading
    /// the signed bytes once for both.
    fn trace_and_reproducible_digests(&self) -> (String, String) {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some([trace, reproducible]) =
            self.digests_of_members([&TRACE_MEMBERS, &reproducible_sorted()])
        {
            return (trace, reproducible);
        }
        (self.trace_digest(), self.reproducible_digest())
    }

    /// For each key list in `sets`, SHA-256 of the canonical JSON of those
    /// members (keys sorted; a missing one is null): the steps without the
    /// engine's line numbers, each other member as the signed bytes hold
    /// it. The members are found, and the steps written, once for all.
    #[cfg(not(target_arch = "wasm32"))]
    fn digests_of_members<const N: usize>(&self, sets: [&[&str]; N]) -> Option<[String; N]> {
        let members = crate::canonical_spans::members(self.canonical)?;
        let steps = self.value.get("steps").unwrap_or(&Value::Null);
        let steps = to_canonical_json(&commit_independent(steps)).ok()?;
        Some(sets.map(|keys| {
            let parts: Vec<(&str, &[u8])> = keys
                .iter()
                .map(|&key| {
                    let bytes = match key {
                        "steps" => steps.as_slice(),
                        _ => members.get(key).copied().unwrap_or(b"null"),
                    };
                    (key, bytes)
                })
                .collect();
            sha256_hex(&crate::canonical_spans::object(&parts))
        }))
    }
}

/// Members of a predicate its trace digest covers, in canonical order.
#[cfg(not(target_arch = "wasm32"))]
const TRACE_MEMBERS: [&str; 2] = ["events", "steps"];

/// [`REPRODUCIBLE`] in canonical (sorted) order.
#[cfg(not(target_arch = "wasm32"))]
fn reproducible_sorted() -> [&'static str; REPRODUCIBLE.len()] {
    let mut keys = REPRODUCIBLE;
    keys.sort_unstable();
    keys
}

/// Check a predicate's own consistency: seven steps numbered 1..=7 whose
/// event indices point into `events`, and a matching `trace_sha256`.
pub fn check_predicate(p: &ProbePredicate) -> Result<(), EvidenceError> {
    check_trace(p, &trace_sha256(&p.events, &p.steps))?;
    check_steps(p)
}

/// [`check_predicate`] of a predicate parsed from signed JSON, given the
/// trace digest recomputed from that JSON ([`SignedJson::trace_digest`]).
fn check_signed_predicate(p: &ProbePredicate, signed_trace: &str) -> Result<(), EvidenceError> {
    check_trace(p, signed_trace)?;
    check_steps(p)
}

fn check_trace(p: &ProbePredicate, expected: &str) -> Result<(), EvidenceError> {
    if p.trace_sha256 != expected {
        return Err(EvidenceError::TraceDigest {
            found: p.trace_sha256.clone(),
            expected: expected.to_string(),
        });
    }
    Ok(())
}

fn check_steps(p: &ProbePredicate) -> Result<(), EvidenceError> {
    if p.steps.len() != STEP_COUNT {
        return Err(EvidenceError::Steps(format!(
            "{} steps, expected exactly {STEP_COUNT}",
            p.steps.len()
        )));
    }
    for (i, step) in p.steps.iter().enumerate() {
        if usize::from(step.step) != i + 1 {
            return Err(EvidenceError::Steps(format!(
                "entry {} is numbered {}, expected {}",
                i + 1,
                step.step,
                i + 1
            )));
        }
        if let Some(bad) = step.events.iter().find(|&&e| e as usize >= p.events.len()) {
            return Err(EvidenceError::Steps(format!(
                "step {} refers to event {bad}, but the run has {} events",
                step.step,
                p.events.len()
            )));
        }
    }
    Ok(())
}

/// Check that `name` is usable as a receipt name: a plain file name of
/// letters, digits, `.`, `_`, `-`, ending in `.json`.
pub fn check_receipt_name(name: &str) -> Result<(), EvidenceError> {
    let refuse = |reason| {
        Err(EvidenceError::Name {
            name: name.to_string(),
            reason,
        })
    };
    if name.len() > 200 {
        return refuse("is longer than 200 characters");
    }
    if !name.ends_with(".json") || name.len() == ".json".len() {
        return refuse("must be a file name ending in .json");
    }
    if name.starts_with('.') {
        return refuse("must not start with a dot");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return refuse("may hold only letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

/// A predicate type a receipt can carry: probe runs today, and each other
/// kind of result (scenario, gate, fuzz, model check, audit) with its own
/// `predicateType`. [`sign_statement`] and [`verify_statement`] handle every
/// kind the same way; the kind adds only its own consistency check.
pub trait PredicateKind: serde::Serialize + serde::de::DeserializeOwned {
    /// The `predicateType` URI, versioned.
    const PREDICATE_TYPE: &'static str;
    /// Short name used in error messages, e.g. `probe predicate`.
    const WHAT: &'static str;
    /// Internal consistency beyond what the types enforce.
    fn check(&self) -> Result<(), EvidenceError> {
        Ok(())
    }
    /// [`PredicateKind::check`] of a predicate parsed from `signed`, the JSON
    /// it was signed as. A kind whose check digests part of itself may take
    /// that part from `signed`, so the digest covers what was signed.
    fn check_signed(&self, signed: &SignedJson<'_>) -> Result<(), EvidenceError> {
        let _ = signed;
        self.check()
    }
}

impl PredicateKind for ProbePredicate {
    const PREDICATE_TYPE: &'static str = PREDICATE_TYPE;
    const WHAT: &'static str = "probe predicate";
    fn check(&self) -> Result<(), EvidenceError> {
        check_predicate(self)
    }
    fn check_signed(&self, signed: &SignedJson<'_>) -> Result<(), EvidenceError> {
        check_signed_predicate(self, &signed.trace_digest())
    }
}

/// Sign `predicate` as the receipt named `name` (the receipt's file name,
/// without folder). Refuses a predicate that would not verify.
pub fn sign_statement<P: PredicateKind>(
    name: &str,
    predicate: &P,
    signer: &Signer,
) -> Result<Envelope, EvidenceError> {
    check_receipt_name(name)?;
    predicate.check()?;
    let statement = Statement::for_predicate(name, P::PREDICATE_TYPE, predicate)
        .map_err(|e| EvidenceError::json("statement", e))?;
    let payload = to_canonical_json(&statement).map_err(|e| EvidenceError::json("statement", e))?;
    Ok(Envelope::sign(PAYLOAD_TYPE, &payload, signer))
}

/// Sign a probe predicate (see [`sign_statement`]).
pub fn sign_predicate(
    name: &str,
    predicate: &ProbePredicate,
    signer: &Signer,
) -> Result<Envelope, EvidenceError> {
    sign_statement(name, predicate, signer)
}

/// Read the receipt file at `path` (refusing one over
/// [`MAX_RECEIPT_BYTES`]) and [`verify_receipt`] it; errors name the file.
#[cfg(not(target_arch = "wasm32"))]
pub fn verify_receipt_file(
    path: &std::path::Path,
    key: &PublicKey,
) -> Result<VerifiedReceipt, EvidenceError> {
    let bytes = crate::fsutil::read_limited(path, MAX_RECEIPT_BYTES, "receipt")?;
    verify_receipt(&bytes, key).map_err(|e| e.in_file(path))
}

/// Read the receipt file at `path` (refusing one over
/// [`MAX_RECEIPT_BYTES`]) and [`verify_statement`] it, whatever its
/// predicate kind; errors name the file.
#[cfg(not(target_arch = "wasm32"))]
pub fn verify_statement_file(
    path: &std::path::Path,
    key: &PublicKey,
) -> Result<VerifiedStatement, EvidenceError> {
    let bytes = crate::fsutil::read_limited(path, MAX_RECEIPT_BYTES, "receipt")?;
    verify_statement(&bytes, key).map_err(|e| e.in_file(path))
}

/// A statement whose envelope, signature and subject digest verified; the
/// predicate is still raw JSON of type `predicate_type`.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedStatement {
    /// The subject name (the receipt's file name when it was signed).
    pub name: String,
    /// Id of the key whose signature verified.
    pub keyid: String,
    /// The statement's `predicateType`.
    pub predicate_type: String,
    /// Subject digest: canonical SHA-256 of the predicate.
    pub predicate_sha256: String,
    /// The predicate, as signed.
    pub predicate: serde_json::Value,
    /// The predicate's canonical JSON, the bytes its subject digest is
    /// taken over.
    pub predicate_json: Vec<u8>,
}

impl VerifiedStatement {
    /// The predicate as it was signed.
    pub fn signed(&self) -> SignedJson<'_> {
        SignedJson {
            value: &self.predicate,
            canonical: &self.predicate_json,
        }
    }

    /// Parse the predicate as kind `P`, refusing another `predicateType`,
    /// and run the kind's own check.
    pub fn parse<P: PredicateKind>(&self) -> Result<P, EvidenceError> {
        let predicate = self.parse_unchecked::<P>()?;
        predicate.check_signed(&self.signed())?;
        Ok(predicate)
    }

    /// [`Self::parse`] without the kind's own check.
    fn parse_unchecked<P: PredicateKind>(&self) -> Result<P, EvidenceError> {
        if self.predicate_type != P::PREDICATE_TYPE {
            return Err(EvidenceError::UnknownPredicate {
                found: self.predicate_type.clone(),
                expected: P::PREDICATE_TYPE,
            });
        }
        serde_json::from_slice(&self.predicate_json).map_err(|e| EvidenceError::json(P::WHAT, e))
    }
}

/// Open a DSSE envelope signed by `key` and return the in-toto Statement it
/// carries: the `payloadType`, the signature, the Statement's `_type`, and
/// that the signed bytes are exactly the canonical (RFC 8785) JSON of what
/// they parse to — duplicate keys, whitespace, other key orders or number
/// spellings would let two parsers read two different statements. Receipts
/// and the bundle manifest are both opened here.
pub(crate) fn open_statement(
    bytes: &[u8],
    key: &PublicKey,
    what: &'static str,
) -> Result<(Statement, Vec<u8>), EvidenceError> {
    let envelope = Envelope::from_json(bytes)?;
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(EvidenceError::PayloadType {
            found: envelope.payload_type,
            expected: PAYLOAD_TYPE,
        });
    }
    let payload = envelope.verify(key)?;
    let statement = canonical_statement(&payload, what)?;
    if statement.statement_type != STATEMENT_TYPE {
        return Err(EvidenceError::StatementType {
            found: statement.statement_type,
            expected: STATEMENT_TYPE,
        });
    }
    Ok((statement, payload))
}

/// The statement the signed `payload` holds, refusing a payload that is not
/// exactly the canonical JSON of what it parses to.
fn canonical_statement(payload: &[u8], what: &'static str) -> Result<Statement, EvidenceError> {
    let json_err = |e| EvidenceError::json(what, e);
    // Native: read the JSON once, compare it with its canonical form, and
    // move the predicate into the statement.
    #[cfg(not(target_arch = "wasm32"))]
    let (statement, canonical) = {
        let json: Value = serde_json::from_slice(payload).map_err(json_err)?;
        let canonical = crate::canonical::canonical_json_of(&json).map_err(json_err)?;
        (Statement::from_json(json).map_err(json_err)?, canonical)
    };
    // The browser: serde's typed reader, then the statement written again
    // (less code there, where a receipt is verified one at a time).
    #[cfg(target_arch = "wasm32")]
    let (statement, canonical) = {
        let statement: Statement = serde_json::from_slice(payload).map_err(json_err)?;
        let canonical = to_canonical_json(&statement).map_err(json_err)?;
        (statement, canonical)
    };
    if canonical != payload {
        return Err(EvidenceError::NotCanonical);
    }
    Ok(statement)
}

/// Verify a receipt of any predicate kind: size, envelope, `payloadType`,
/// the signature of `key`, the Statement's `_type`, exactly one subject whose
/// digest is the canonical SHA-256 of the predicate.
pub fn verify_statement(bytes: &[u8], key: &PublicKey) -> Result<VerifiedStatement, EvidenceError> {
    if bytes.len() as u64 > MAX_RECEIPT_BYTES {
        return Err(EvidenceError::TooLarge {
            what: "receipt",
            size: bytes.len() as u64,
            limit: MAX_RECEIPT_BYTES,
        });
    }
    let (statement, payload) = open_statement(bytes, key, "in-toto statement")?;
    let [subject] = statement.subject.as_slice() else {
        return Err(EvidenceError::Subject(format!(
            "{} subjects, expected exactly one",
            statement.subject.len()
        )));
    };
    if subject.name.is_empty() {
        return Err(EvidenceError::Subject("empty name".into()));
    }
    // The name becomes a file name, a URL and HTML; only the strict pattern.
    if let Err(e) = check_receipt_name(&subject.name) {
        return Err(EvidenceError::Subject(e.to_string()));
    }
    let predicate_json = predicate_bytes(&statement, &payload)?;
    let digest = sha256_hex(&predicate_json);
    if subject.digest.sha256 != digest {
        return Err(EvidenceError::Subject(format!(
            "digest {} does not match the predicate's sha256 {digest}",
            subject.digest.sha256
        )));
    }
    Ok(VerifiedStatement {
        name: subject.name.clone(),
        keyid: key.keyid(),
        predicate_type: statement.predicate_type,
        predicate_sha256: digest,
        predicate: statement.predicate,
        predicate_json,
    })
}

/// The canonical JSON of a statement's predicate: on native targets the
/// slice of the signed payload that holds it (the payload was checked to be
/// canonical), in the browser written again.
fn predicate_bytes(statement: &Statement, payload: &[u8]) -> Result<Vec<u8>, EvidenceError> {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(p) =
        crate::canonical_spans::members(payload).and_then(|m| m.get("predicate").copied())
    {
        return Ok(p.to_vec());
    }
    let _ = payload;
    to_canonical_json(&statement.predicate).map_err(|e| EvidenceError::json("predicate", e))
}

/// Verify a probe receipt's bytes against `key` (see the module
/// documentation for every check). Errors name the first check that failed.
pub fn verify_receipt(bytes: &[u8], key: &PublicKey) -> Result<VerifiedReceipt, EvidenceError> {
    VerifiedReceipt::from_statement(verify_statement(bytes, key)?)
}

impl VerifiedReceipt {
    /// The probe receipt a verified statement carries; refuses other kinds.
    pub fn from_statement(statement: VerifiedStatement) -> Result<Self, EvidenceError> {
        // `parse` with the probe kind's check, both digests taken in one
        // reading of the signed bytes.
        let (trace, reproducible_digest) = statement.signed().trace_and_reproducible_digests();
        let predicate: ProbePredicate = statement.parse_unchecked()?;
        check_signed_predicate(&predicate, &trace)?;
        Ok(VerifiedReceipt {
            name: statement.name,
            keyid: statement.keyid,
            predicate_sha256: statement.predicate_sha256,
            reproducible_digest,
            predicate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{sample_config, sample_predicate};
    use crate::{PoisonMode, Scale};

    /// On native targets verification takes its digests over slices of the
    /// signed bytes; they are the digests the browser build computes by
    /// writing the JSON again, for a whole predicate and for one with
    /// members missing.
    #[test]
    fn digests_over_the_signed_bytes_are_those_of_the_json_written_again() {
        let signer = Signer::generate();
        let p = sample_predicate(sample_config(Scale::Walkthrough, &[], PoisonMode::Off, 3));
        let env = sign_predicate("sample.json", &p, &signer).unwrap();
        let verified = verify_statement(env.to_json_pretty().as_bytes(), &signer.public()).unwrap();
        assert_eq!(
            verified.predicate_json,
            to_canonical_json(&verified.predicate).unwrap()
        );
        let mut partial = verified.predicate.clone();
        let map = partial.as_object_mut().unwrap();
        map.remove("events");
        map.remove("verdict");
        let partial_json = to_canonical_json(&partial).unwrap();
        for signed in [
            verified.signed(),
            SignedJson {
                value: &partial,
                canonical: &partial_json,
            },
        ] {
            let part = |key| signed.value.get(key).unwrap_or(&Value::Null);
            assert_eq!(
                signed.trace_digest(),
                trace_digest(part("events"), part("steps"))
            );
            assert_eq!(
                signed.reproducible_digest(),
                reproducible_digest_of(signed.value)
            );
            assert!(signed.digests_of_members([&TRACE_MEMBERS]).is_some());
            assert_eq!(
                signed.trace_and_reproducible_digests(),
                (signed.trace_digest(), signed.reproducible_digest())
            );
        }
        assert_eq!(
            verified.signed().reproducible_digest(),
            reproducible_digest(&p)
        );
    }
}
