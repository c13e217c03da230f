#!/usr/bin/env python3
"""Verify a kvwitness bundle's receipts with securesystemslib, independently of kvw.

Usage: dsse_verify.py BUNDLE_DIR

For every receipts/*.json this checks, with securesystemslib's own DSSE and
ed25519 code (not ours):
  * Envelope.verify([SSlibKey from kvw.pub.json], threshold=1) accepts it;
  * the key id is the SHA-256 of the raw public key (the kvwitness convention);
  * the payload is exactly the RFC 8785 (JCS) canonical JSON of the statement
    it parses to, computed with the `rfc8785` package (not ours);
  * the in-toto Statement's _type and predicateType, the subject digest
    (SHA-256 of the predicate's JCS form), trace_sha256 and the seven steps;
  * manifest.json verifies the same way and its subjects are exactly the
    receipts and index.json, with the files' SHA-256;
  * a copy with one payload byte flipped, and a copy with one signature byte
    flipped, are both refused.
Exits non-zero if anything fails.
"""

import base64
import copy
import hashlib
import json
import pathlib
import sys

import rfc8785
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://kvwitness.dev/attestation/probe/v3"
# The other kinds a bundle carries; those with events carry their digest.
OTHER_TYPES = {
    "https://kvwitness.dev/attestation/model-check/v2",
    "https://kvwitness.dev/attestation/scenario/v3",
    "https://kvwitness.dev/attestation/gates/v3",
    "https://kvwitness.dev/attestation/fuzz/v2",
    "https://kvwitness.dev/attestation/audit/v2",
    "https://kvwitness.dev/attestation/upstream-run/v1",
}
PAYLOAD_TYPE = "application/vnd.in-toto+json"
MANIFEST_TYPE = "https://kvwitness.dev/attestation/bundle-manifest/v1"


def refuse_duplicates(pairs):
    """json.loads hook: a repeated key is an error, not last-wins."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def canonical_sha256(value):
    """SHA-256 of the RFC 8785 (JCS) canonical JSON of value."""
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def parse_payload(envelope_dict):
    """The statement, refusing duplicate keys and non-canonical bytes."""
    payload = base64.b64decode(envelope_dict["payload"])
    statement = json.loads(payload, object_pairs_hook=refuse_duplicates)
    if rfc8785.dumps(statement) != payload:
        raise ValueError("payload is not the RFC 8785 canonical form of its statement")
    return statement


def commit_independent(steps):
    """The steps without the engine's own line numbers (they move with the
    engine commit); upstream references are pinned and stay."""
    out = json.loads(json.dumps(steps))
    for step in out:
        for src in step["sources"]:
            if src["origin"] == "engine":
                src["line_start"] = None
                src["line_end"] = None
    return out


def verifies(envelope_dict, key):
    """True if securesystemslib accepts the envelope with this key."""
    envelope = Envelope.from_dict(copy.deepcopy(envelope_dict))
    try:
        envelope.verify([key], 1)
    except VerificationError:
        return False
    return True


def flip_payload_byte(envelope_dict):
    tampered = copy.deepcopy(envelope_dict)
    payload = bytearray(base64.b64decode(tampered["payload"]))
    payload[len(payload) // 2] ^= 0x01
    tampered["payload"] = base64.b64encode(bytes(payload)).decode()
    return tampered


def flip_signature_byte(envelope_dict):
    tampered = copy.deepcopy(envelope_dict)
    sig = bytearray(base64.b64decode(tampered["signatures"][0]["sig"]))
    sig[10] ^= 0x80
    tampered["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    return tampered


def check_receipt(path, key):
    """Return None if the receipt is good, else a one-line reason."""
    envelope_dict = json.loads(path.read_text(encoding="utf-8"))
    if envelope_dict.get("payloadType") != PAYLOAD_TYPE:
        return f"payloadType is {envelope_dict.get('payloadType')!r}"
    if not verifies(envelope_dict, key):
        return "securesystemslib refused the signature"
    statement = parse_payload(envelope_dict)
    if statement.get("_type") != STATEMENT_TYPE:
        return f"statement _type is {statement.get('_type')!r}"
    kind = statement.get("predicateType")
    if kind != PREDICATE_TYPE and kind not in OTHER_TYPES:
        return f"unknown predicateType {kind!r}"
    predicate = statement["predicate"]
    subjects = statement.get("subject", [])
    if len(subjects) != 1:
        return f"{len(subjects)} subjects, expected one"
    if subjects[0]["name"] != path.name:
        return f"subject name {subjects[0]['name']!r} is not the file name"
    digest = canonical_sha256(predicate)
    if subjects[0]["digest"]["sha256"] != digest:
        return f"subject digest does not match the predicate (recomputed {digest})"
    if kind == PREDICATE_TYPE:
        trace = {"events": predicate["events"], "steps": commit_independent(predicate["steps"])}
        if predicate["trace_sha256"] != canonical_sha256(trace):
            return "trace_sha256 does not match the events and steps"
        if [s["step"] for s in predicate["steps"]] != list(range(1, 8)):
            return "steps are not 1..7"
    else:
        traced = predicate.get("counterexample") if kind.endswith("/fuzz/v2") else predicate
        if traced and "events" in traced:
            if traced["trace_sha256"] != canonical_sha256(traced["events"]):
                return "trace_sha256 does not match the events"
    if verifies(flip_payload_byte(envelope_dict), key):
        return "a copy with a flipped payload byte was ACCEPTED"
    if verifies(flip_signature_byte(envelope_dict), key):
        return "a copy with a flipped signature byte was ACCEPTED"
    return None


def check_manifest(bundle, key, receipts):
    """Return None if manifest.json is good, else a one-line reason."""
    envelope_dict = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    if not verifies(envelope_dict, key):
        return "securesystemslib refused the manifest signature"
    statement = parse_payload(envelope_dict)
    if statement.get("_type") != STATEMENT_TYPE or statement.get("predicateType") != MANIFEST_TYPE:
        return "manifest is not a bundle-manifest statement"
    listed = {s["name"]: s["digest"]["sha256"] for s in statement["subject"]}
    wanted = {str(p.relative_to(bundle)) for p in receipts} | {"index.json"}
    if set(listed) != wanted:
        return f"manifest subjects differ from the files: {sorted(set(listed) ^ wanted)}"
    for name, digest in listed.items():
        if hashlib.sha256((bundle / name).read_bytes()).hexdigest() != digest:
            return f"manifest digest of {name} does not match the file"
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    bundle = pathlib.Path(sys.argv[1])
    key_dict = json.loads((bundle / "kvw.pub.json").read_text(encoding="utf-8"))
    expected_keyid = hashlib.sha256(bytes.fromhex(key_dict["keyval"]["public"])).hexdigest()
    if key_dict["keyid"] != expected_keyid:
        print(f"FAIL  kvw.pub.json: keyid is not sha256 of the raw key ({expected_keyid})")
        return 1
    key = SSlibKey.from_dict(key_dict["keyid"], copy.deepcopy(key_dict))

    receipts = sorted((bundle / "receipts").glob("*.json"))
    if not receipts:
        print("FAIL  no receipts in the bundle")
        return 1
    failed = 0
    for path in receipts:
        try:
            reason = check_receipt(path, key)
        except Exception as error:  # any parse error is a failure, not a crash
            reason = f"{type(error).__name__}: {error}"
        rel = path.relative_to(bundle)
        if reason is None:
            print(f"ok    {rel}  (securesystemslib; tampered copies refused)")
        else:
            failed += 1
            print(f"FAIL  {rel}: {reason}")
    try:
        reason = check_manifest(bundle, key, receipts)
    except Exception as error:
        reason = f"{type(error).__name__}: {error}"
    if reason is None:
        print("ok    manifest.json  (securesystemslib, rfc8785; subjects are exactly the files)")
    else:
        failed += 1
        print(f"FAIL  manifest.json: {reason}")
    print(f"securesystemslib: {len(receipts) - failed} of {len(receipts)} receipts ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
