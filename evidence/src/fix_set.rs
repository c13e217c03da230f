//! The set of boolean fix switches that are on: the one type every crate
//! parses `--fixes` into, prints in labels and file names, and decides
//! with. A set has no order and no repeats, so the canonical order of
//! receipts ([`Fix::ALL`]'s) comes for free from [`FixSet::list`].

use std::fmt;
use std::str::FromStr;

use crate::predicate::Fix;

/// The switches that are on, as a bit per [`Fix::ALL`] entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FixSet(u8);

/// A `--fixes` value that names no switch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown fix '{found}' (known: {known}, or none/all)")]
pub struct UnknownFix {
    pub found: String,
    pub known: String,
}

impl FixSet {
    /// No switch on.
    pub const NONE: FixSet = FixSet(0);
    /// Every switch on.
    pub const ALL: FixSet = FixSet((1 << Fix::ALL.len()) - 1);

    pub fn new(fixes: &[Fix]) -> Self {
        fixes.iter().copied().collect()
    }

    fn bit(f: Fix) -> u8 {
        1 << Fix::ALL.iter().position(|x| *x == f).unwrap_or(0)
    }

    pub fn has(&self, f: Fix) -> bool {
        self.0 & Self::bit(f) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The set with `f` on as well.
    pub fn with(self, f: Fix) -> Self {
        FixSet(self.0 | Self::bit(f))
    }

    /// The set with `f` off.
    pub fn without(self, f: Fix) -> Self {
        FixSet(self.0 & !Self::bit(f))
    }

    /// The switches that are on, in canonical order (as receipts list them).
    pub fn list(&self) -> Vec<Fix> {
        Fix::ALL.into_iter().filter(|f| self.has(*f)).collect()
    }

    /// `fixes` sorted into canonical order, each once.
    pub fn canonical(fixes: &[Fix]) -> Vec<Fix> {
        Self::new(fixes).list()
    }

    /// Every subset, from none to all, in the order of their bit masks.
    pub fn every() -> impl Iterator<Item = FixSet> {
        (0..=Self::ALL.0).map(FixSet)
    }

    /// No switch, then each switch alone.
    pub fn each_alone() -> impl Iterator<Item = FixSet> {
        std::iter::once(Self::NONE).chain(Fix::ALL.into_iter().map(|f| Self::NONE.with(f)))
    }

    /// `none`, `all`, or the switch names joined with `_`: the form file
    /// names carry.
    pub fn file_label(&self) -> String {
        self.to_string().replace(',', "_")
    }
}

impl FromIterator<Fix> for FixSet {
    fn from_iter<I: IntoIterator<Item = Fix>>(iter: I) -> Self {
        FixSet(iter.into_iter().fold(0, |acc, f| acc | Self::bit(f)))
    }
}

impl From<&[Fix]> for FixSet {
    fn from(fixes: &[Fix]) -> Self {
        Self::new(fixes)
    }
}

/// `none`, `all`, or the switch names in canonical order joined with `,`.
impl fmt::Display for FixSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        if *self == Self::ALL {
            return f.write_str("all");
        }
        let names: Vec<_> = self.list().into_iter().map(Fix::name).collect();
        f.write_str(&names.join(","))
    }
}

/// `none` (or nothing), `all`, or a comma list of switch names in any
/// order, repeats allowed.
impl FromStr for FixSet {
    type Err = UnknownFix;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "none" | "" => Ok(Self::NONE),
            "all" => Ok(Self::ALL),
            list => list
                .split(',')
                .map(str::trim)
                .map(|name| {
                    name.parse::<Fix>().map_err(|_| UnknownFix {
                        found: name.to_string(),
                        known: Fix::ALL.map(Fix::name).join(", "),
                    })
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_prints_as_it_parses() {
        for set in FixSet::every() {
            assert_eq!(set.to_string().parse::<FixSet>(), Ok(set), "{set}");
            assert_eq!(FixSet::new(&set.list()), set);
        }
        assert_eq!(FixSet::NONE.to_string(), "none");
        assert_eq!(FixSet::ALL.to_string(), "all");
        assert_eq!(FixSet::ALL.list(), Fix::ALL);
        assert_eq!(FixSet::every().count(), 64);
        assert_eq!(FixSet::each_alone().count(), 7);
    }

    #[test]
    fn lists_are_canonical_whatever_the_order_given() {
        let set: FixSet = " scrub-on-free, kv-checksum,kv-checksum ".parse().unwrap();
        assert_eq!(set.list(), [Fix::KvChecksum, Fix::ScrubOnFree]);
        assert_eq!(set.to_string(), "kv-checksum,scrub-on-free");
        assert_eq!(set.file_label(), "kv-checksum_scrub-on-free");
        assert_eq!("".parse::<FixSet>(), Ok(FixSet::NONE));
    }

    #[test]
    fn an_unknown_switch_is_named_with_the_known_ones() {
        let e = "kv-checksum,nope".parse::<FixSet>().unwrap_err();
        assert_eq!(e.found, "nope");
        assert!(e.to_string().contains("retire-aborted-prefill-result"));
        assert!(e.to_string().ends_with("or none/all)"));
    }
}
