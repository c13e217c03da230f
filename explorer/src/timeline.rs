//! The disclosed timeline of the incident.
//!
//! These dates come from the public record (vendor disclosure and upstream
//! releases), not from any receipt, so they are fixed data here.

use crate::i18n::Lang;

/// What the record says about an entry's time of day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// A date only.
    Date,
    /// A time the record states in UTC.
    Utc(&'static str),
    /// A time the record gives without a time zone.
    Unzoned(&'static str),
}

/// One dated entry.
pub struct Moment {
    /// ISO date.
    pub date: &'static str,
    pub clock: Clock,
    pub en: &'static str,
    pub it: &'static str,
}

impl Moment {
    pub fn text(&self, lang: Lang) -> &'static str {
        lang.pick(self.en, self.it)
    }

    /// The date and, where the record gives one, the time, with `UTC` only
    /// where the record says so and a `*` where it names no zone.
    pub fn when(&self) -> String {
        match self.clock {
            Clock::Date => self.date.to_string(),
            Clock::Utc(t) => format!("{} {t} UTC", self.date),
            Clock::Unzoned(t) => format!("{} {t}*", self.date),
        }
    }
}

/// The note under the timeline for the `*` of [`Clock::Unzoned`].
pub fn unzoned_note(lang: Lang) -> &'static str {
    lang.pick(
        "* The report gives these times without a time zone; only the report of the leak (23:11) is stated in UTC.",
        "* Il rapporto indica questi orari senza fuso orario; solo quello della segnalazione (23:11) è espresso in UTC.",
    )
}

/// The timeline, oldest first.
pub const TIMELINE: &[Moment] = &[
    Moment {
        date: "2026-07-06",
        clock: Clock::Date,
        en: "SGLang issue #30233: a long prompt in PD mode transfers a single token.",
        it: "Issue SGLang #30233: in modalità PD un prompt lungo trasferisce un solo token.",
    },
    Moment {
        date: "2026-08-27",
        clock: Clock::Date,
        en: "Exposure window opens.",
        it: "Inizia la finestra di esposizione.",
    },
    Moment {
        date: "2026-09-06",
        clock: Clock::Date,
        en: "PR #36988 (retire aborted prefill results) merged, later in v0.5.20.",
        it: "Unita la PR #36988 (ritiro dei risultati di prefill abortiti), poi in v0.5.20.",
    },
    Moment {
        date: "2026-09-08",
        clock: Clock::Utc("23:11"),
        en: "Leak reported to the vendor.",
        it: "La fuga viene segnalata al fornitore.",
    },
    Moment {
        date: "2026-09-09",
        clock: Clock::Unzoned("13:22"),
        en: "Incident declared; reproduced with two accounts in 25 minutes.",
        it: "Incidente dichiarato; riprodotto con due account in 25 minuti.",
    },
    Moment {
        date: "2026-09-09",
        clock: Clock::Unzoned("14:00"),
        en: "Model made private (HTTP 400): from here on no public request reaches it.",
        it: "Il modello diventa privato (HTTP 400): da qui in poi nessuna richiesta pubblica lo raggiunge.",
    },
    Moment {
        date: "2026-09-09",
        clock: Clock::Unzoned("14:35"),
        en: "Cause found.",
        it: "Causa individuata.",
    },
    Moment {
        date: "2026-09-09",
        clock: Clock::Unzoned("14:52"),
        en: "All prefill nodes on a correct configuration.",
        it: "Tutti i nodi di prefill con una configurazione corretta.",
    },
    Moment {
        date: "2026-09-09",
        clock: Clock::Unzoned("19:40"),
        en: "Model available to the public again, on a rebuilt deployment that carries the engine fix.",
        it: "Il modello torna disponibile al pubblico, su un'installazione rifatta che include la correzione del motore.",
    },
    Moment {
        date: "2026-09-16",
        clock: Clock::Date,
        en: "PR #38935 (retire unadmitted rejects) merged, later in v0.5.21.",
        it: "Unita la PR #38935 (ritiro delle richieste respinte mai ammesse), poi in v0.5.21.",
    },
    Moment {
        date: "2026-10-02",
        clock: Clock::Date,
        en: "SGLang 0.5.21 released.",
        it: "Rilasciato SGLang 0.5.21.",
    },
    Moment {
        date: "2026-10-19",
        clock: Clock::Date,
        en: "SGLang 0.5.22 released.",
        it: "Rilasciato SGLang 0.5.22.",
    },
    Moment {
        date: "2026-10-26",
        clock: Clock::Date,
        en: "Public disclosure: 155 responses carried other requests' data.",
        it: "Divulgazione pubblica: 155 risposte contenevano dati di altre richieste.",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The record states one time in UTC (the report of the leak, 23:11 on
    /// 8 September); the times of 9 September come without a zone.
    #[test]
    fn only_the_report_of_the_leak_is_in_utc() {
        let utc: Vec<_> = TIMELINE
            .iter()
            .filter(|m| matches!(m.clock, Clock::Utc(_)))
            .collect();
        assert_eq!(utc.len(), 1);
        assert_eq!(utc[0].when(), "2026-09-08 23:11 UTC");
        for m in TIMELINE.iter().filter(|m| m.date == "2026-09-09") {
            assert!(matches!(m.clock, Clock::Unzoned(_)), "{}", m.en);
            assert!(!m.when().contains("UTC"));
        }
    }

    /// The model went private at 14:00, which is where public requests
    /// stop; going public again at 19:40 is not where the exposure closes.
    #[test]
    fn the_exposure_ends_when_the_model_goes_private() {
        let at = |t| {
            TIMELINE
                .iter()
                .find(|m| m.clock == Clock::Unzoned(t))
                .unwrap()
        };
        assert!(at("14:00").en.contains("no public request"));
        assert!(at("14:00").it.contains("nessuna richiesta pubblica"));
        assert!(!at("19:40").en.contains("exposure"));
        assert!(!at("19:40").it.contains("esposizione"));
    }
}
