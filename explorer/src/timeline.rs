//! The disclosed timeline of the incident.
//!
//! These dates come from the public record (vendor disclosure and upstream
//! releases), not from any receipt, so they are fixed data here.

use crate::i18n::Lang;

/// One dated entry.
pub struct Moment {
    /// ISO date, with UTC time where the record gives one.
    pub when: &'static str,
    pub en: &'static str,
    pub it: &'static str,
}

impl Moment {
    pub fn text(&self, lang: Lang) -> &'static str {
        lang.pick(self.en, self.it)
    }
}

/// The timeline, oldest first.
pub const TIMELINE: &[Moment] = &[
    Moment {
        when: "2026-07-06",
        en: "SGLang issue #30233: a long prompt in PD mode transfers a single token.",
        it: "Issue SGLang #30233: in modalità PD un prompt lungo trasferisce un solo token.",
    },
    Moment {
        when: "2026-08-27",
        en: "Exposure window opens.",
        it: "Inizia la finestra di esposizione.",
    },
    Moment {
        when: "2026-09-06",
        en: "PR #36988 (retire aborted prefill results) merged, later in v0.5.20.",
        it: "Unita la PR #36988 (ritiro dei risultati di prefill abortiti), poi in v0.5.20.",
    },
    Moment {
        when: "2026-09-08 23:11 UTC",
        en: "Leak reported to the vendor.",
        it: "La fuga viene segnalata al fornitore.",
    },
    Moment {
        when: "2026-09-09 13:22 UTC",
        en: "Incident declared; reproduced with two accounts in 25 minutes.",
        it: "Incidente dichiarato; riprodotto con due account in 25 minuti.",
    },
    Moment {
        when: "2026-09-09 14:00 UTC",
        en: "Model made private (HTTP 400).",
        it: "Modello reso privato (HTTP 400).",
    },
    Moment {
        when: "2026-09-09 14:35 UTC",
        en: "Cause found.",
        it: "Causa individuata.",
    },
    Moment {
        when: "2026-09-09 14:52 UTC",
        en: "All prefill nodes on a correct configuration.",
        it: "Tutti i nodi di prefill con una configurazione corretta.",
    },
    Moment {
        when: "2026-09-09 19:40 UTC",
        en: "Model public again on a patched engine; exposure window closes.",
        it:
            "Modello di nuovo pubblico su un motore corretto; la finestra di esposizione si chiude.",
    },
    Moment {
        when: "2026-09-16",
        en: "PR #38935 (retire unadmitted rejects) merged, later in v0.5.21.",
        it: "Unita la PR #38935 (ritiro delle richieste respinte mai ammesse), poi in v0.5.21.",
    },
    Moment {
        when: "2026-10-02",
        en: "SGLang 0.5.21 released.",
        it: "Rilasciato SGLang 0.5.21.",
    },
    Moment {
        when: "2026-10-19",
        en: "SGLang 0.5.22 released.",
        it: "Rilasciato SGLang 0.5.22.",
    },
    Moment {
        when: "2026-10-26",
        en: "Public disclosure: 155 responses carried other requests' data.",
        it: "Divulgazione pubblica: 155 risposte contenevano dati di altre richieste.",
    },
];
