//! The file name of every receipt kvwitness writes, built here and nowhere
//! else: `kvw probe`, `kvw gates --out`, `kvw fuzz --out`, `kvw upstream
//! run --out` and `kvw bundle` write these names, the explorer links to
//! them, and a bundle's README rows name them.

use crate::fix_set::FixSet;
use crate::predicate::{PoisonMode, Scale};

/// The switch names joined with `_`, or `none`: the fix-matrix form, which
/// spells every switch even when all are on (the published names).
fn spelled_out(fixes: FixSet) -> String {
    if fixes.is_empty() {
        return "none".into();
    }
    let names: Vec<_> = fixes.list().into_iter().map(|f| f.name()).collect();
    names.join("_")
}

/// `incident-<scale>-fixes-<switches>.json`: one run of the fix matrix.
pub fn probe_fixes(scale: Scale, fixes: FixSet) -> String {
    format!("incident-{scale}-fixes-{}.json", spelled_out(fixes))
}

/// `incident-<scale>-poison-on-free-<mode>.json`.
pub fn probe_poison(scale: Scale, mode: PoisonMode) -> String {
    format!("incident-{scale}-poison-on-free-{mode}.json")
}

/// `incident-<scale>-pool-ge-context.json`: the configuration answer.
pub fn probe_pool_ge_context(scale: Scale) -> String {
    format!("incident-{scale}-pool-ge-context.json")
}

/// `gates-fixes-<label>.json`.
pub fn gates(fixes: FixSet) -> String {
    format!("gates-fixes-{}.json", fixes.file_label())
}

/// `scenario-<name>-fixes-<label>`: a scenario receipt's name without
/// `.json`, which is also its page's name.
pub fn scenario_stem(scenario: &str, fixes: FixSet) -> String {
    format!("scenario-{scenario}-fixes-{}", fixes.file_label())
}

/// `scenario-<name>-fixes-<label>.json`.
pub fn scenario(scenario: &str, fixes: FixSet) -> String {
    format!("{}.json", scenario_stem(scenario, fixes))
}

/// `fuzz-fixes-<label>-seed-<seed>.json`.
pub fn fuzz(fixes: FixSet, seed: u64) -> String {
    format!("fuzz-fixes-{}-seed-{seed}.json", fixes.file_label())
}

/// `upstream-<release with dashes>-<case>.json`, every character of the
/// case outside `[A-Za-z0-9-]` turned into `-`.
pub fn upstream(release: &str, case: &str) -> String {
    let slug: String = case
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("upstream-{}-{slug}.json", release.replace('.', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predicate::Fix;

    #[test]
    fn names_match_the_published_bundle() {
        assert_eq!(
            probe_fixes(Scale::Walkthrough, FixSet::NONE),
            "incident-walkthrough-fixes-none.json"
        );
        assert_eq!(
            probe_fixes(
                Scale::Incident,
                FixSet::new(&[Fix::ScrubOnFree, Fix::KvChecksum])
            ),
            "incident-incident-fixes-kv-checksum_scrub-on-free.json"
        );
        assert!(probe_fixes(Scale::Walkthrough, FixSet::ALL)
            .ends_with("deferred-release_scrub-on-free.json"));
        assert_eq!(
            probe_poison(Scale::Incident, PoisonMode::Refuse),
            "incident-incident-poison-on-free-refuse.json"
        );
        assert_eq!(gates(FixSet::ALL), "gates-fixes-all.json");
        assert_eq!(
            scenario("x_y", FixSet::NONE),
            "scenario-x_y-fixes-none.json"
        );
        assert_eq!(fuzz(FixSet::ALL, 7), "fuzz-fixes-all-seed-7.json");
        assert_eq!(
            upstream("0.5.21", "door/prefill"),
            "upstream-0-5-21-door-prefill.json"
        );
    }
}
