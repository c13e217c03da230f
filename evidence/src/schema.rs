//! JSON Schema of the probe predicate.
//!
//! Consumers in other languages (the explorer's JavaScript, auditors'
//! scripts) validate receipts against a schema rather than against our Rust
//! types. The schema is generated from the types with `schemars`, committed
//! at `evidence/schema/probe-predicate.v3.schema.json`, and a test fails if
//! the committed file drifts from the types; regenerate it with
//! `KVW_UPDATE_SCHEMA=1 cargo test -p kvw-evidence --test schema`.

use crate::predicate::{ProbePredicate, PREDICATE_TYPE};

/// Path of the committed schema, relative to the crate root.
pub const SCHEMA_PATH: &str = "schema/probe-predicate.v3.schema.json";

/// The predicate's JSON Schema as pretty JSON with a trailing newline.
pub fn probe_predicate_schema() -> String {
    let mut schema = schemars::schema_for!(ProbePredicate);
    schema.insert("$id".into(), format!("{PREDICATE_TYPE}/schema.json").into());
    // A schema is a JSON object of plain values; it always serializes.
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

/// Committed schemas of the scenario, gates and fuzz predicates, relative
/// to the crate root, with their generators.
pub fn result_schemas() -> Vec<(&'static str, String)> {
    use crate::scenario::*;
    fn render<T: schemars::JsonSchema>(id: &str) -> String {
        let mut schema = schemars::schema_for!(T);
        schema.insert("$id".into(), format!("{id}/schema.json").into());
        let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
        text.push('\n');
        text
    }
    vec![
        (
            "schema/scenario-predicate.v3.schema.json",
            render::<ScenarioPredicate>(SCENARIO_PREDICATE_TYPE),
        ),
        (
            "schema/gates-predicate.v3.schema.json",
            render::<GatesPredicate>(GATES_PREDICATE_TYPE),
        ),
        (
            "schema/fuzz-predicate.v2.schema.json",
            render::<FuzzPredicate>(FUZZ_PREDICATE_TYPE),
        ),
        (
            crate::upstream_run::UPSTREAM_RUN_SCHEMA_PATH,
            render::<crate::upstream_run::UpstreamRunPredicate>(
                crate::upstream_run::UPSTREAM_RUN_PREDICATE_TYPE,
            ),
        ),
    ]
}
