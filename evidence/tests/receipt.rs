//! Signing and verifying single receipts, and every way a receipt is refused.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use kvw_evidence::dsse::Envelope;
use kvw_evidence::receipt::{MAX_RECEIPT_BYTES, PAYLOAD_TYPE};
use kvw_evidence::sample::{sample_config, sample_predicate};
use kvw_evidence::statement::Statement;
use kvw_evidence::{
    reproducible_digest, sign_predicate, trace_sha256, verify_receipt, EvidenceError, Fix,
    PoisonMode, ProbePredicate, Scale, Signer,
};

const NAME: &str = "incident-walkthrough-none.json";

fn signer() -> Signer {
    Signer::from_seed(&[42u8; 32])
}

fn predicate() -> ProbePredicate {
    sample_predicate(sample_config(Scale::Walkthrough, &[], PoisonMode::Off, 1))
}

fn receipt_bytes() -> Vec<u8> {
    sign_predicate(NAME, &predicate(), &signer())
        .unwrap()
        .to_json_pretty()
        .into_bytes()
}

fn envelope() -> Envelope {
    Envelope::from_json(&receipt_bytes()).unwrap()
}

fn verify(bytes: &[u8]) -> Result<kvw_evidence::VerifiedReceipt, EvidenceError> {
    verify_receipt(bytes, &signer().public())
}

fn expect_err(bytes: &[u8], needle: &str) -> EvidenceError {
    let err = verify(bytes).expect_err("receipt must be refused");
    let text = err.to_string();
    assert!(
        text.contains(needle),
        "error {text:?} should mention {needle:?}"
    );
    assert!(!text.contains('\n'), "error must be one line: {text:?}");
    err
}

/// Re-sign a modified statement with the right key, so only the content check can catch it.
fn resign(statement: &Statement) -> Vec<u8> {
    let payload = kvw_evidence::canonical::to_canonical_json(statement).unwrap();
    Envelope::sign(PAYLOAD_TYPE, &payload, &signer())
        .to_json_pretty()
        .into_bytes()
}

fn statement() -> Statement {
    serde_json::from_slice(&envelope().payload_bytes().unwrap()).unwrap()
}

#[test]
fn round_trip() {
    let p = predicate();
    let verified = verify(&receipt_bytes()).unwrap();
    assert_eq!(verified.name, NAME);
    assert_eq!(verified.keyid, signer().keyid());
    assert_eq!(verified.predicate, p);
    assert_eq!(verified.reproducible_digest, reproducible_digest(&p));
    assert_eq!(p.trace_sha256, trace_sha256(&p.events, &p.steps));
}

#[test]
fn round_trip_incident_scale_with_fixes() {
    let p = sample_predicate(sample_config(
        Scale::Incident,
        &[Fix::PageTags, Fix::KvChecksum],
        PoisonMode::Refuse,
        9,
    ));
    let env = sign_predicate("x.json", &p, &signer()).unwrap();
    let verified = verify(env.to_json_pretty().as_bytes()).unwrap();
    assert_eq!(verified.predicate, p);
}

#[test]
fn reproducible_digest_ignores_engine_and_backend_only() {
    let p = predicate();
    let mut q = p.clone();
    q.engine.commit = "0123456789abcdef".into();
    q.backend.device = "NVIDIA H200".into();
    assert_eq!(reproducible_digest(&p), reproducible_digest(&q));
    q.verdict.http_status = 400;
    assert_ne!(reproducible_digest(&p), reproducible_digest(&q));
}

#[test]
fn flipped_byte_in_payload() {
    let mut env = envelope();
    let mut payload = env.payload_bytes().unwrap();
    let i = payload.len() / 2;
    payload[i] ^= 0x01;
    env.payload = STANDARD.encode(&payload);
    let err = expect_err(env.to_json_pretty().as_bytes(), "does not verify");
    assert!(matches!(err, EvidenceError::BadSignature { .. }));
}

#[test]
fn flipped_byte_in_signature() {
    let mut env = envelope();
    let mut sig = STANDARD.decode(&env.signatures[0].sig).unwrap();
    sig[10] ^= 0x80;
    env.signatures[0].sig = STANDARD.encode(&sig);
    let err = expect_err(env.to_json_pretty().as_bytes(), "does not verify");
    assert!(matches!(err, EvidenceError::BadSignature { .. }));
}

#[test]
fn another_key() {
    let other = Signer::from_seed(&[7u8; 32]);
    let err = verify_receipt(&receipt_bytes(), &other.public()).unwrap_err();
    assert!(
        matches!(err, EvidenceError::NoSignatureForKey { .. }),
        "{err}"
    );
    assert!(err.to_string().contains(&other.keyid()));
}

#[test]
fn another_key_claiming_our_keyid() {
    // A forged signature that names the right keyid but is made by another key.
    let mut env = envelope();
    let forged = Envelope::sign(
        PAYLOAD_TYPE,
        &env.payload_bytes().unwrap(),
        &Signer::from_seed(&[7u8; 32]),
    );
    env.signatures[0].sig = forged.signatures[0].sig.clone();
    expect_err(env.to_json_pretty().as_bytes(), "does not verify");
}

#[test]
fn truncated_file() {
    let bytes = receipt_bytes();
    let err = expect_err(&bytes[..bytes.len() / 2], "not valid");
    assert!(matches!(err, EvidenceError::Json { .. }));
}

#[test]
fn invalid_json() {
    expect_err(b"{\"payloadType\": ", "not valid");
    expect_err(b"\xff\xfe not json", "not valid");
    expect_err(b"", "not valid");
}

#[test]
fn unknown_envelope_field() {
    let mut value: serde_json::Value = serde_json::from_slice(&receipt_bytes()).unwrap();
    value["extra"] = serde_json::json!(1);
    expect_err(&serde_json::to_vec(&value).unwrap(), "unknown field");
}

#[test]
fn wrong_payload_type() {
    let mut env = envelope();
    env.payload_type = "application/json".into();
    let err = expect_err(env.to_json_pretty().as_bytes(), "payloadType");
    assert!(matches!(err, EvidenceError::PayloadType { .. }));
}

#[test]
fn unknown_predicate_version() {
    let mut st = statement();
    st.predicate_type = "https://kvwitness.dev/attestation/probe/v1".into();
    let err = expect_err(&resign(&st), "unknown predicate version");
    assert!(matches!(err, EvidenceError::UnknownPredicate { .. }));
}

#[test]
fn wrong_statement_type() {
    let mut st = statement();
    st.statement_type = "https://in-toto.io/Statement/v0.1".into();
    expect_err(&resign(&st), "_type");
}

#[test]
fn subject_digest_mismatch() {
    let mut st = statement();
    st.subject[0].digest.sha256 = "00".repeat(32);
    expect_err(&resign(&st), "subject");
}

#[test]
fn predicate_changed_under_the_subject() {
    let mut st = statement();
    st.predicate["verdict"]["leak"] = serde_json::json!(false);
    expect_err(&resign(&st), "does not match the predicate");
}

#[test]
fn trace_digest_mismatch() {
    let mut p = predicate();
    p.steps[2].reached = !p.steps[2].reached;
    let st = Statement::for_predicate(NAME, kvw_evidence::PREDICATE_TYPE, &p).unwrap();
    let err = expect_err(&resign(&st), "trace_sha256");
    assert!(matches!(err, EvidenceError::TraceDigest { .. }));
}

#[test]
fn six_steps() {
    let mut p = predicate();
    p.steps.pop();
    p.trace_sha256 = trace_sha256(&p.events, &p.steps);
    let st = Statement::for_predicate(NAME, kvw_evidence::PREDICATE_TYPE, &p).unwrap();
    expect_err(&resign(&st), "6 steps");
    assert!(
        sign_predicate(NAME, &p, &signer()).is_err(),
        "signing must refuse it too"
    );
}

#[test]
fn steps_out_of_order() {
    let mut p = predicate();
    p.steps.swap(3, 4);
    p.trace_sha256 = trace_sha256(&p.events, &p.steps);
    let st = Statement::for_predicate(NAME, kvw_evidence::PREDICATE_TYPE, &p).unwrap();
    expect_err(&resign(&st), "numbered");
}

#[test]
fn oversized_receipt() {
    let mut bytes = receipt_bytes();
    bytes.resize(MAX_RECEIPT_BYTES as usize + 1, b' ');
    let err = expect_err(&bytes, "limit");
    assert!(matches!(err, EvidenceError::TooLarge { .. }));
}

#[test]
fn bad_receipt_names_are_refused_when_signing() {
    for name in [
        "../x.json",
        "a/b.json",
        "x.txt",
        ".json",
        ".hidden.json",
        "sp ace.json",
    ] {
        assert!(
            sign_predicate(name, &predicate(), &signer()).is_err(),
            "{name}"
        );
    }
}

/// Sign arbitrary payload bytes with the right key.
fn sign_raw(payload: &[u8]) -> Vec<u8> {
    Envelope::sign(PAYLOAD_TYPE, payload, &signer())
        .to_json_pretty()
        .into_bytes()
}

#[test]
fn payload_must_be_canonical_json() {
    let canonical = envelope().payload_bytes().unwrap();
    assert!(verify(&sign_raw(&canonical)).is_ok());
    // The same statement, spelled differently: whitespace, other key order.
    let pretty = serde_json::to_vec_pretty(&statement()).unwrap();
    expect_err(&sign_raw(&pretty), "not canonical JSON");
    let plain = serde_json::to_vec(&statement()).unwrap();
    expect_err(&sign_raw(&plain), "not canonical JSON");
    // A trailing newline.
    let mut newline = canonical.clone();
    newline.push(b'\n');
    expect_err(&sign_raw(&newline), "not canonical JSON");
}

#[test]
fn duplicate_keys_in_the_signed_payload_are_refused() {
    let canonical = String::from_utf8(envelope().payload_bytes().unwrap()).unwrap();
    // "http_status":<n> appears once; add a second, later one (last wins in
    // serde_json, first wins in other parsers).
    let at = canonical.find("\"http_status\":").unwrap();
    let doubled = format!(
        "{}\"http_status\":500,{}",
        &canonical[..at],
        &canonical[at..]
    );
    expect_err(&sign_raw(doubled.as_bytes()), "not canonical JSON");
    // Duplicate top-level member: the statement is read as JSON first, so
    // the same check refuses it.
    let top = canonical.replacen('{', "{\"_type\":\"x\",", 1);
    expect_err(&sign_raw(top.as_bytes()), "not canonical JSON");
}
