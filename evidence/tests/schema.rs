//! The committed JSON Schema must match the predicate types.

use kvw_evidence::schema::{probe_predicate_schema, SCHEMA_PATH};

/// `generated` against the schema committed at `rel` (under the crate),
/// compared as JSON values so key order (which depends on serde_json
/// features other crates may switch on) does not count as drift; with
/// `KVW_UPDATE_SCHEMA` set, the committed file is rewritten instead.
fn check_committed(rel: &str, generated: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if std::env::var_os("KVW_UPDATE_SCHEMA").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed: Option<serde_json::Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let generated: serde_json::Value = serde_json::from_str(generated).unwrap();
    assert!(
        committed.as_ref() == Some(&generated),
        "{} is out of date with the predicate types; regenerate it with \
         `KVW_UPDATE_SCHEMA=1 cargo test -p kvw-evidence --test schema` and commit the result",
        path.display()
    );
}

#[test]
fn committed_schema_matches_the_types() {
    check_committed(SCHEMA_PATH, &probe_predicate_schema());
}

#[test]
fn sample_predicates_are_valid_json_objects_with_schema_required_fields() {
    // The schema lists the predicate's top-level fields as required.
    let schema: serde_json::Value = serde_json::from_str(&probe_predicate_schema()).unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for field in [
        "probe",
        "engine",
        "backend",
        "config",
        "steps",
        "verdict",
        "trace_sha256",
    ] {
        assert!(required.contains(&field), "{field} missing from required");
    }
}

#[test]
fn committed_result_schemas_match_the_types() {
    for (rel, generated) in kvw_evidence::schema::result_schemas() {
        check_committed(rel, &generated);
    }
}
