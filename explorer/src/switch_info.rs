//! What each fix switch is, in words a reader without SGLang knowledge follows.
//!
//! A switch name such as `retire-unadmitted-reject` says nothing to a first
//! reader. Each switch here gets its origin (an upstream pull request and the
//! release that merged it, a vendor prototype, this project's own defense, or
//! a configuration change) and one line on what it changes in the serving
//! path. Its *outcome* is never written here: the page reads it from the
//! catalog, i.e. from the signed receipt of the run with the switch on.
//! Sources: the README's switch table and the pull requests it cites.

use crate::catalog::{POISON_LOG, POISON_REFUSE, POOL_COVERS_CONTEXT};
use crate::i18n::Lang;

/// Where a switch comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Upstream SGLang pull requests, with the release that first shipped them.
    Upstream {
        prs: &'static [u32],
        version: Option<&'static str>,
    },
    /// A vendor's prototype, never merged upstream.
    Prototype,
    /// A defense of this project, not an upstream feature.
    OwnDefense,
    /// A deployment setting rather than a code change.
    Configuration,
}

/// One switch described.
#[derive(Debug, Clone, Copy)]
pub struct SwitchInfo {
    pub name: &'static str,
    pub origin: Origin,
    /// What the switch changes, one line, English and Italian.
    pub what: (&'static str, &'static str),
}

impl SwitchInfo {
    /// What it changes, in `lang`.
    pub fn what(&self, lang: Lang) -> &'static str {
        lang.pick(self.what.0, self.what.1)
    }
}

/// Upstream pull request URL.
pub fn pr_url(pr: u32) -> String {
    format!("https://github.com/sgl-project/sglang/pull/{pr}")
}

const INFO: [SwitchInfo; 9] = [
    SwitchInfo {
        name: "retire-aborted-prefill-result",
        origin: Origin::Upstream {
            prs: &[36988],
            version: Some("v0.5.20"),
        },
        what: (
            "Prefill drops the result of a request that was already rejected, so the one-page handoff never reaches decode.",
            "Il prefill scarta il risultato di una richiesta già respinta: il passaggio di una sola pagina non arriva al decode.",
        ),
    },
    SwitchInfo {
        name: "retire-unadmitted-reject",
        origin: Origin::Upstream {
            prs: &[38935],
            version: Some("v0.5.21"),
        },
        what: (
            "The admission door retires a rejected request before any bootstrap, sender or placeholder batch is created.",
            "L'ingresso di ammissione ritira la richiesta respinta prima che si creino bootstrap, mittente o batch segnaposto.",
        ),
    },
    SwitchInfo {
        name: "kv-checksum",
        origin: Origin::Upstream {
            prs: &[39500],
            version: None,
        },
        what: (
            "Decode checks an Adler-32 checksum over the transferred pages before it computes anything.",
            "Il decode controlla un checksum Adler-32 sulle pagine trasferite prima di calcolare.",
        ),
    },
    SwitchInfo {
        name: "page-tags",
        origin: Origin::Prototype,
        what: (
            "Every page carries its owner's tag; decode refuses to read a page that belongs to someone else.",
            "Ogni pagina porta l'etichetta del suo proprietario; il decode rifiuta di leggere una pagina altrui.",
        ),
    },
    SwitchInfo {
        name: "deferred-release",
        origin: Origin::Upstream {
            prs: &[35049, 40645, 41402, 41404],
            version: None,
        },
        what: (
            "Pages of an aborted request stay reserved until late writes into them have drained.",
            "Le pagine di una richiesta interrotta restano trattenute finché le scritture in ritardo non sono terminate.",
        ),
    },
    SwitchInfo {
        name: "scrub-on-free",
        origin: Origin::OwnDefense,
        what: (
            "Freed pages are zeroed, so nobody's old bytes can be read again.",
            "Le pagine liberate vengono azzerate: nessuno può più rileggerne i vecchi byte.",
        ),
    },
    SwitchInfo {
        name: POISON_LOG,
        origin: Origin::OwnDefense,
        what: (
            "Freed pages are filled with a marker; reading one is logged and counted, not stopped.",
            "Le pagine liberate sono riempite con un marcatore; leggerne una viene registrato e contato, non fermato.",
        ),
    },
    SwitchInfo {
        name: POISON_REFUSE,
        origin: Origin::OwnDefense,
        what: (
            "Freed pages are filled with a marker; reading one stops the request with an error.",
            "Le pagine liberate sono riempite con un marcatore; leggerne una ferma la richiesta con un errore.",
        ),
    },
    SwitchInfo {
        name: POOL_COVERS_CONTEXT,
        origin: Origin::Configuration,
        what: (
            "The prefill pool is sized to hold the whole context, so the long prompt is never rejected.",
            "Il pool di prefill può contenere l'intero contesto: il prompt lungo non viene mai respinto.",
        ),
    },
];

/// The description of switch `name`, if it is one of the site's switches.
pub fn info(name: &str) -> Option<&'static SwitchInfo> {
    INFO.iter().find(|i| i.name == name)
}

/// The origin in words (without links), e.g. "upstream fix, merged in v0.5.20".
pub fn origin_words(origin: Origin, lang: Lang) -> String {
    match origin {
        Origin::Upstream {
            version: Some(v), ..
        } => format!(
            "{} {v}",
            lang.pick(
                "upstream fix, released in",
                "correzione upstream, rilasciata in"
            )
        ),
        Origin::Upstream { version: None, .. } => {
            lang.pick("upstream fix", "correzione upstream").to_string()
        }
        Origin::Prototype => lang
            .pick(
                "vendor prototype (Cloudflare, switched off), not upstream",
                "prototipo del fornitore (Cloudflare, disattivato), non upstream",
            )
            .to_string(),
        Origin::OwnDefense => lang
            .pick(
                "our own defense, not upstream",
                "difesa nostra, non upstream",
            )
            .to_string(),
        Origin::Configuration => lang
            .pick(
                "configuration, no code change",
                "configurazione, nessuna modifica al codice",
            )
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::all_switches;

    #[test]
    fn every_switch_is_described_in_both_languages() {
        for name in all_switches() {
            let i = info(name).unwrap_or_else(|| panic!("{name} has no description"));
            assert!(!i.what.0.is_empty() && !i.what.1.is_empty() && i.what.0 != i.what.1);
        }
        assert!(info("no-such-switch").is_none());
    }
}
