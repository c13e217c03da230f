//! The fix matrix as a set of switches over the site's receipts.
//!
//! A receipt's *switch set* is the names of its defenses that are on: every
//! boolean [`Fix`] in its config, `poison-on-free=log` or `poison-on-free=refuse` for
//! the canary mode (one switch per mode; at most one is on), and
//! `pool-covers-context` when the prefill pool holds the whole
//! context (the configuration fix). Two receipts of the same probe and scale
//! are siblings across a switch when their sets differ by exactly that name,
//! so toggling a switch is a lookup, and a combination nobody ran shows as
//! unavailable rather than as a guess.

use std::collections::BTreeSet;

use kvw_evidence::{Fix, PoisonMode, ProbePredicate};

use crate::page_data::CatalogEntry;

/// Switch name of the configuration fix (prefill pool ≥ context length).
pub const POOL_COVERS_CONTEXT: &str = "pool-covers-context";
/// Switch names of the `poison-on-free` modes (this project's own defense).
pub const POISON_LOG: &str = "poison-on-free=log";
pub const POISON_REFUSE: &str = "poison-on-free=refuse";

/// All switch names in display order.
pub fn all_switches() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Fix::ALL.iter().map(|f| f.name()).collect();
    names.extend([POISON_LOG, POISON_REFUSE, POOL_COVERS_CONTEXT]);
    names
}

/// Two switches that are modes of the same flag: turning one on turns the
/// other off.
fn exclusive(a: &str, b: &str) -> bool {
    a != b && a.starts_with("poison-on-free=") && b.starts_with("poison-on-free=")
}

/// The switches that are on in a predicate, in display order.
pub fn switch_set(predicate: &ProbePredicate) -> Vec<String> {
    let config = &predicate.config;
    let mut on: Vec<String> = Fix::ALL
        .iter()
        .filter(|f| config.fixes.contains(f))
        .map(|f| f.name().to_string())
        .collect();
    match config.poison_on_free {
        PoisonMode::Off => {}
        PoisonMode::Log => on.push(POISON_LOG.to_string()),
        PoisonMode::Refuse => on.push(POISON_REFUSE.to_string()),
    }
    if config.prefill_pool_tokens >= config.context_len {
        on.push(POOL_COVERS_CONTEXT.to_string());
    }
    on
}

/// Summarise a verified predicate for the catalog.
pub fn entry_for(stem: &str, predicate: &ProbePredicate) -> CatalogEntry {
    CatalogEntry {
        stem: stem.to_string(),
        probe: predicate.probe.name.clone(),
        scale: predicate.config.scale,
        switches: switch_set(predicate),
        http_status: predicate.verdict.http_status,
        leak: predicate.verdict.leak,
        outcome: crate::Lang::ALL
            .iter()
            .map(|l| kvw_words::probe::outcome_line(predicate, *l))
            .collect(),
    }
}

/// One switch as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchView {
    pub name: String,
    pub on: bool,
    /// Stem of the receipt with this switch flipped, if the site has one.
    pub sibling: Option<String>,
}

/// The switches to show next to `current`: every switch used by any receipt
/// of the same probe and scale, with the sibling across each.
pub fn switches_for(catalog: &[CatalogEntry], current: &CatalogEntry) -> Vec<SwitchView> {
    let group: Vec<&CatalogEntry> = catalog
        .iter()
        .filter(|e| e.probe == current.probe && e.scale == current.scale)
        .collect();
    let used: BTreeSet<&str> = group
        .iter()
        .flat_map(|e| e.switches.iter().map(String::as_str))
        .collect();
    let mine: BTreeSet<&str> = current.switches.iter().map(String::as_str).collect();
    all_switches()
        .into_iter()
        .filter(|name| used.contains(name))
        .map(|name| {
            let mut wanted = mine.clone();
            if !wanted.remove(name) {
                wanted.retain(|w| !exclusive(w, name));
                wanted.insert(name);
            }
            let sibling = group
                .iter()
                .find(|e| {
                    e.switches
                        .iter()
                        .map(String::as_str)
                        .collect::<BTreeSet<_>>()
                        == wanted
                })
                .map(|e| e.stem.clone());
            SwitchView {
                name: name.to_string(),
                on: mine.contains(name),
                sibling,
            }
        })
        .collect()
}

/// The receipt with no switch on for the same probe and scale, if any.
pub fn baseline_for<'a>(
    catalog: &'a [CatalogEntry],
    current: &CatalogEntry,
) -> Option<&'a CatalogEntry> {
    catalog
        .iter()
        .find(|e| e.probe == current.probe && e.scale == current.scale && e.switches.is_empty())
}

/// The receipt a site opens on: the incident probe with no fix at walkthrough
/// scale when present, else the first with no fix, else the first.
pub fn default_entry(catalog: &[CatalogEntry]) -> Option<&CatalogEntry> {
    use kvw_evidence::Scale;
    catalog
        .iter()
        .find(|e| e.probe == "incident" && e.scale == Scale::Walkthrough && e.switches.is_empty())
        .or_else(|| catalog.iter().find(|e| e.switches.is_empty()))
        .or_else(|| catalog.first())
}

/// The pair the compare picker opens on: the default run against the run
/// of its probe and scale whose answer differs from it (status or leak)
/// with the most switches on, so the first comparison a reader sees shows
/// what the fixes change.
pub fn showcase_pair(catalog: &[CatalogEntry]) -> Option<(&CatalogEntry, &CatalogEntry)> {
    let base = default_entry(catalog)?;
    catalog
        .iter()
        .filter(|e| e.probe == base.probe && e.scale == base.scale)
        .filter(|e| e.http_status != base.http_status || e.leak != base.leak)
        .max_by_key(|e| e.switches.len())
        .map(|e| (base, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvw_evidence::Scale;

    fn entry(stem: &str, switches: &[&str]) -> CatalogEntry {
        CatalogEntry {
            stem: stem.into(),
            probe: "incident".into(),
            scale: Scale::Walkthrough,
            switches: switches.iter().map(|s| s.to_string()).collect(),
            http_status: 200,
            leak: true,
            outcome: Vec::new(),
        }
    }

    #[test]
    fn the_picker_opens_on_a_pair_whose_answers_differ() {
        let mut all = entry("all", &["kv-checksum", "retire-unadmitted-reject"]);
        (all.http_status, all.leak) = (400, false);
        let mut one = entry("one", &["retire-unadmitted-reject"]);
        (one.http_status, one.leak) = (500, false);
        // Same answer as the base: never the showcase, however many switches.
        let same = entry("same", &["a", "b", "c"]);
        let catalog = vec![entry("base", &[]), one, same, all];
        let (a, b) = showcase_pair(&catalog).unwrap();
        assert_eq!((a.stem.as_str(), b.stem.as_str()), ("base", "all"));
        assert!(
            showcase_pair(&catalog[..1]).is_none(),
            "nothing differs from the base"
        );
    }

    #[test]
    fn toggling_finds_the_sibling_or_reports_none() {
        let catalog = vec![
            entry("base", &[]),
            entry("r", &["retire-unadmitted-reject"]),
            entry("c", &["kv-checksum"]),
        ];
        let switches = switches_for(&catalog, &catalog[0]);
        assert_eq!(switches.len(), 2);
        assert!(switches.iter().all(|s| !s.on && s.sibling.is_some()));
        let from_r = switches_for(&catalog, &catalog[1]);
        let checksum = from_r.iter().find(|s| s.name == "kv-checksum").unwrap();
        assert_eq!(checksum.sibling, None, "r+checksum was never run");
        let retire = from_r
            .iter()
            .find(|s| s.name == "retire-unadmitted-reject")
            .unwrap();
        assert!(retire.on);
        assert_eq!(retire.sibling.as_deref(), Some("base"));
    }

    #[test]
    fn canary_modes_are_one_switch_each_and_exclusive() {
        let catalog = vec![
            entry("base", &[]),
            entry("log", &[POISON_LOG]),
            entry("raise", &[POISON_REFUSE]),
        ];
        let from_log = switches_for(&catalog, &catalog[1]);
        let raise = from_log.iter().find(|s| s.name == POISON_REFUSE).unwrap();
        assert!(!raise.on);
        assert_eq!(
            raise.sibling.as_deref(),
            Some("raise"),
            "log → raise, not log+raise"
        );
        let log = from_log.iter().find(|s| s.name == POISON_LOG).unwrap();
        assert_eq!(log.sibling.as_deref(), Some("base"));
    }
}
