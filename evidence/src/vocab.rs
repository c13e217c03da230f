//! One vocabulary for names that appear on the command line, in receipts,
//! in file names and on pages: every switch and mode parses from and prints
//! as the same kebab-case word its serde form uses.

use std::fmt;
use std::str::FromStr;

use crate::predicate::{ChecksumScope, Fix, FreeListPolicy, PageTail, PoisonMode, Scale};

/// An unknown name, with the names that are known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} '{found}' (known: {known})")]
pub struct UnknownName {
    pub what: &'static str,
    pub found: String,
    pub known: String,
}

macro_rules! vocabulary {
    ($ty:ident, $what:literal, [$($variant:ident => $name:literal),+ $(,)?]) => {
        impl $ty {
            /// Every value, in canonical order.
            pub const VALUES: &'static [$ty] = &[$($ty::$variant),+];

            /// The value's name as written on the command line and in receipts.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::VALUES
                    .iter()
                    .copied()
                    .find(|v| v.name() == s)
                    .ok_or_else(|| UnknownName {
                        what: $what,
                        found: s.to_string(),
                        known: Self::VALUES
                            .iter()
                            .map(|v| v.name())
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
            }
        }
    };
}

vocabulary!(Scale, "scale", [Walkthrough => "walkthrough", Incident => "incident"]);
vocabulary!(FreeListPolicy, "free-list policy", [Lifo => "lifo", Fifo => "fifo"]);
vocabulary!(PoisonMode, "poison-on-free mode", [Off => "off", Log => "log", Refuse => "refuse"]);
vocabulary!(ChecksumScope, "checksum scope", [Reserved => "reserved", Received => "received"]);
vocabulary!(PageTail, "page tail", [Carried => "carried", Zeroed => "zeroed"]);
vocabulary!(Fix, "fix", [
    RetireAbortedPrefillResult => "retire-aborted-prefill-result",
    RetireUnadmittedReject => "retire-unadmitted-reject",
    KvChecksum => "kv-checksum",
    PageTags => "page-tags",
    DeferredRelease => "deferred-release",
    ScrubOnFree => "scrub-on-free",
]);

impl Fix {
    /// Parse a switch name; `None` if unknown.
    pub fn from_name(name: &str) -> Option<Fix> {
        name.parse().ok()
    }

    /// Where the switch comes from, for labels: the upstream change, or
    /// this project's own defense.
    pub fn origin(self) -> &'static str {
        match self {
            Fix::RetireAbortedPrefillResult => "SGLang PR #36988 (v0.5.20)",
            Fix::RetireUnadmittedReject => "SGLang PR #38935 (v0.5.21)",
            Fix::KvChecksum => "SGLang PR #39500",
            Fix::PageTags => "Cloudflare prototype",
            Fix::DeferredRelease => "SGLang PRs #35049, #40645, #41402, #41404; default per #41023",
            Fix::ScrubOnFree => "this project's own defense",
        }
    }

    /// `name (origin)`: the one label every surface uses for a switch.
    pub fn label(self) -> String {
        format!("{} ({})", self.name(), self.origin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for f in Fix::ALL {
            assert_eq!(f.name().parse::<Fix>().unwrap(), f);
            assert_eq!(
                serde_json::to_string(&f).unwrap(),
                format!("\"{}\"", f.name())
            );
        }
        for m in PoisonMode::VALUES {
            assert_eq!(
                serde_json::to_string(m).unwrap(),
                format!("\"{}\"", m.name())
            );
        }
        let e = "bogus".parse::<Scale>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown scale 'bogus' (known: walkthrough, incident)"
        );
    }
}
