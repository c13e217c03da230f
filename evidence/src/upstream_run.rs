//! The upstream-run predicate: one case run on a real SGLang release and on
//! the engine, compared field by field.
//!
//! A probe receipt records what the engine did; this one records what the
//! released upstream code did with the same inputs (`kvw upstream run`
//! drives the wheel's own classes with small stubs for their transport and
//! scheduler collaborators) next to what the engine did under the fixes that
//! release contains, and a verdict per field. A field one side cannot show
//! is "not applicable" with its reason, never "agree". The verdicts are
//! recomputed from the two observations when the receipt is checked, so a
//! receipt cannot claim agreement its observations do not carry. It travels
//! in the same DSSE/in-toto envelope as every receipt, under
//! [`UPSTREAM_RUN_PREDICATE_TYPE`]; the committed JSON Schema is
//! `evidence/schema/upstream-run-predicate.v1.schema.json`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{EvidenceError, Fix};

/// `predicateType` of an upstream-run receipt.
pub const UPSTREAM_RUN_PREDICATE_TYPE: &str = "https://kvwitness.dev/attestation/upstream-run/v1";

/// Path of the committed schema, relative to the crate root.
pub const UPSTREAM_RUN_SCHEMA_PATH: &str = "schema/upstream-run-predicate.v1.schema.json";

/// The SGLang releases the differential runs, oldest first, with the fixes
/// each one contains: 0.5.19 has neither, 0.5.20 has PR #36988, 0.5.21 and
/// later add PR #38935.
pub const RELEASES: [(&str, &[Fix]); 4] = [
    ("0.5.19", &[]),
    ("0.5.20", &[Fix::RetireAbortedPrefillResult]),
    (
        "0.5.21",
        &[Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject],
    ),
    (
        "0.5.23",
        &[Fix::RetireAbortedPrefillResult, Fix::RetireUnadmittedReject],
    ),
];

/// The differential's cases at the incident's two doors, each with the
/// replay step it stands beside: an over-long request at prefill's
/// admission door (step 2) and at decode's (step 5). Their `door` field is
/// what the released code decided (`admit`, `retire` or `refuse`).
pub const DOOR_CASES: [(u8, &str); 2] = [
    (
        2,
        "test_rejected_request_is_retired_at_each_pd_door.prefill",
    ),
    (5, "test_rejected_request_is_retired_at_each_pd_door.decode"),
];

/// The fixes a release contains, or `None` for a release the differential
/// does not know.
pub fn release_fixes(release: &str) -> Option<&'static [Fix]> {
    RELEASES
        .iter()
        .find(|(r, _)| *r == release)
        .map(|(_, f)| *f)
}

/// What a declared SGLang version contains of the fix matrix: the known
/// release it is judged by and that release's fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredRelease {
    /// The release of [`RELEASES`] whose fixes the version carries, or
    /// `None` for a version older than every one of them.
    pub basis: Option<&'static str>,
    pub fixes: &'static [Fix],
}

/// The fixes an SGLang `version` string contains (`0.5.21`, `v0.5.22`,
/// `0.5.20.post1`, `0.5.24rc0`), judged by [`RELEASES`]: the newest known
/// release at or below it. Every change of the table came after the oldest
/// release, so an older version contains none; changes only accumulate, so
/// a version newer than the newest contains at least its fixes. `None`
/// when the text is not a `MAJOR.MINOR.PATCH` version.
pub fn declared_release(version: &str) -> Option<DeclaredRelease> {
    let v = parse_version(version)?;
    let basis = RELEASES
        .iter()
        .rev()
        .find(|(r, _)| parse_version(r).is_some_and(|k| k <= v));
    Some(match basis {
        Some((r, fixes)) => DeclaredRelease {
            basis: Some(r),
            fixes,
        },
        None => DeclaredRelease {
            basis: None,
            fixes: &[],
        },
    })
}

/// The newest release of [`RELEASES`] whose fixes are exactly the upstream
/// ones among `fixes` (switches no release carries are left aside).
pub fn release_with(fixes: &[Fix]) -> Option<&'static str> {
    let upstream = |f: &Fix| RELEASES.iter().any(|(_, r)| r.contains(f));
    let mut want: Vec<Fix> = fixes.iter().copied().filter(upstream).collect();
    want.sort_by_key(|f| f.name());
    want.dedup();
    RELEASES
        .iter()
        .rev()
        .find(|(_, r)| {
            let mut have = r.to_vec();
            have.sort_by_key(|f| f.name());
            have == want
        })
        .map(|(r, _)| *r)
}

/// `MAJOR.MINOR.PATCH` of a version string, ignoring a leading `v` and
/// anything after the patch number's digits.
fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let t = text.trim();
    let t = t.strip_prefix('v').unwrap_or(t);
    let mut parts = t.splitn(3, '.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let rest = parts.next()?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor, digits.parse().ok()?))
}

/// How one field compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Agree,
    Differ,
    /// One side cannot show the field.
    NotApplicable,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Differ => "differ",
            Verdict::NotApplicable => "n.a.",
        }
    }
}

/// One field's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FieldVerdict {
    pub field: String,
    pub verdict: Verdict,
    /// Why the field is not applicable, or what explains a difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Everything one case on one release established.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamRunPredicate {
    /// The SGLang release, e.g. `0.5.19`.
    pub release: String,
    /// File name of the installed wheel.
    pub wheel: String,
    /// SHA-256 of that wheel, hex.
    pub wheel_sha256: String,
    pub python: String,
    pub torch: String,
    /// SHA-256 over the probe sources (`upstream/probes/*.py`, by name).
    pub probe_sha256: String,
    /// The case, named after the upstream test it mirrors where there is one.
    pub case: String,
    /// The fixes the engine twin ran with: those the release contains.
    pub fixes: Vec<Fix>,
    /// The collaborators the probe replaced with stubs.
    pub stubs: Vec<String>,
    /// What the released code did, field by field (`{"na": reason}` for a
    /// field its API cannot show).
    pub upstream: BTreeMap<String, Value>,
    /// What the engine did with the same inputs.
    pub engine: BTreeMap<String, Value>,
    /// The comparison, one entry per field of either side.
    pub fields: Vec<FieldVerdict>,
    /// `kvw` version that ran the comparison.
    pub kvw_version: String,
}

/// Fields per verdict; a difference is `explained` when its entry carries
/// the reason (a limit of the stubs or of the engine's model).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub agree: usize,
    pub explained: usize,
    pub differ: usize,
    pub not_applicable: usize,
}

impl std::ops::AddAssign for Totals {
    fn add_assign(&mut self, o: Totals) {
        self.agree += o.agree;
        self.explained += o.explained;
        self.differ += o.differ;
        self.not_applicable += o.not_applicable;
    }
}

fn na_reason(v: &Value) -> Option<String> {
    v.as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.get("na"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Compare two observations field by field. A field missing on one side,
/// or marked `{"na": reason}` there, is not applicable; `explain` gives the
/// reason a differing field carries.
pub fn compare(
    upstream: &BTreeMap<String, Value>,
    engine: &BTreeMap<String, Value>,
    explain: impl Fn(&str) -> Option<String>,
) -> Vec<FieldVerdict> {
    let mut names: Vec<&String> = upstream.keys().chain(engine.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|field| {
            let (verdict, reason) = match (upstream.get(field), engine.get(field)) {
                (None, _) => (
                    Verdict::NotApplicable,
                    Some("the release's code does not show it".to_string()),
                ),
                (_, None) => (
                    Verdict::NotApplicable,
                    Some("the engine does not model it".to_string()),
                ),
                (Some(u), Some(e)) => match (na_reason(u), na_reason(e)) {
                    (Some(r), _) => (Verdict::NotApplicable, Some(format!("upstream: {r}"))),
                    (_, Some(r)) => (Verdict::NotApplicable, Some(format!("engine: {r}"))),
                    _ if u == e => (Verdict::Agree, None),
                    _ => (Verdict::Differ, explain(field)),
                },
            };
            FieldVerdict {
                field: field.clone(),
                verdict,
                reason,
            }
        })
        .collect()
}

impl UpstreamRunPredicate {
    /// Count of fields per verdict.
    pub fn totals(&self) -> Totals {
        let n = |v, explained: bool| {
            self.fields
                .iter()
                .filter(|f| {
                    f.verdict == v && (v != Verdict::Differ || f.reason.is_some() == explained)
                })
                .count()
        };
        Totals {
            agree: n(Verdict::Agree, false),
            explained: n(Verdict::Differ, true),
            differ: n(Verdict::Differ, false),
            not_applicable: n(Verdict::NotApplicable, false),
        }
    }

    /// One line: the case's totals.
    pub fn summary(&self) -> String {
        let t = self.totals();
        format!(
            "{} agree, {} differ with the reason given, {} differ unexplained, {} n.a.",
            t.agree, t.explained, t.differ, t.not_applicable
        )
    }
}

impl crate::receipt::PredicateKind for UpstreamRunPredicate {
    const PREDICATE_TYPE: &'static str = UPSTREAM_RUN_PREDICATE_TYPE;
    const WHAT: &'static str = "upstream-run predicate";
    fn check(&self) -> Result<(), EvidenceError> {
        let bad = |m: String| Err(EvidenceError::Steps(m));
        let Some(fixes) = release_fixes(&self.release) else {
            return bad(format!("unknown SGLang release {:?}", self.release));
        };
        if self.fixes != fixes {
            return bad(format!(
                "engine fixes {:?} are not those SGLang {} contains",
                self.fixes, self.release
            ));
        }
        let hex64 = |s: &str| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex64(&self.wheel_sha256) || !hex64(&self.probe_sha256) {
            return bad("wheel_sha256 and probe_sha256 must be SHA-256 hex digests".into());
        }
        // The verdicts must be the ones the observations give; a signed
        // reason may only stand on a difference or a not-applicable field.
        let reasons: BTreeMap<&str, &str> = self
            .fields
            .iter()
            .filter_map(|f| Some((f.field.as_str(), f.reason.as_deref()?)))
            .collect();
        let again = compare(&self.upstream, &self.engine, |f| {
            reasons.get(f).map(|r| r.to_string())
        });
        if again != self.fields {
            return bad(format!(
                "case {}: the field verdicts are not those the two observations give",
                self.case
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod release_tests {
    use super::*;

    #[test]
    fn a_declared_version_is_judged_by_the_newest_known_release_at_or_below_it() {
        let fixes = |v: &str| declared_release(v).map(|d| (d.basis, d.fixes.len()));
        assert_eq!(fixes("0.5.19"), Some((Some("0.5.19"), 0)));
        assert_eq!(fixes("v0.5.20"), Some((Some("0.5.20"), 1)));
        assert_eq!(fixes("0.5.20.post1"), Some((Some("0.5.20"), 1)));
        assert_eq!(fixes("0.5.22"), Some((Some("0.5.21"), 2)));
        assert_eq!(fixes("0.6.0rc1"), Some((Some("0.5.23"), 2)));
        assert_eq!(fixes("0.4.9"), Some((None, 0)));
        assert_eq!(fixes("b1234"), None);
        assert_eq!(fixes("0.5"), None);
        assert_eq!(release_with(&[]), Some("0.5.19"));
        assert_eq!(release_with(&Fix::ALL), Some("0.5.23"));
        assert_eq!(release_with(&[Fix::RetireUnadmittedReject]), None);
        assert_eq!(
            release_with(&[Fix::KvChecksum, Fix::RetireAbortedPrefillResult]),
            Some("0.5.20")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obs(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_field_one_side_cannot_show_is_never_agree() {
        let u = obs(json!({"door": "admit", "queue": {"na": "no queue in this release"}, "x": 1}));
        let e = obs(json!({"door": "admit", "queue": "bootstrap", "y": 2}));
        let v = compare(&u, &e, |_| None);
        let get = |f: &str| v.iter().find(|x| x.field == f).unwrap().verdict;
        assert_eq!(get("door"), Verdict::Agree);
        assert_eq!(get("queue"), Verdict::NotApplicable);
        assert_eq!(get("x"), Verdict::NotApplicable);
        assert_eq!(get("y"), Verdict::NotApplicable);
    }

    #[test]
    fn check_refuses_a_verdict_the_observations_do_not_give() {
        let u = obs(json!({"door": "admit"}));
        let e = obs(json!({"door": "retire"}));
        let mut p = UpstreamRunPredicate {
            release: "0.5.19".into(),
            wheel: "w.whl".into(),
            wheel_sha256: "a".repeat(64),
            python: "3.11".into(),
            torch: "2".into(),
            probe_sha256: "b".repeat(64),
            case: "c".into(),
            fixes: vec![],
            stubs: vec![],
            fields: compare(&u, &e, |_| None),
            upstream: u,
            engine: e,
            kvw_version: "0".into(),
        };
        use crate::receipt::PredicateKind;
        assert!(p.check().is_ok());
        p.fields[0].verdict = Verdict::Agree;
        assert!(p.check().is_err());
        p.fields[0].verdict = Verdict::Differ;
        p.fixes = vec![Fix::RetireUnadmittedReject];
        assert!(p.check().is_err(), "0.5.19 contains no fix");
    }
}
