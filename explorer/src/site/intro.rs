//! The two parts of a replay page that depend on the whole bundle rather
//! than on the receipt on screen: the ten-second card (who, when, what
//! happened, what this page is and what its badge proves) and the fix
//! matrix (which fix gives which answer, with the release that shipped it
//! and whether the record says it was there for GLM-5.3). Both are drawn
//! here, at build time, and reach the page as
//! [`Islands`](crate::components::island::Islands): the browser build
//! carries none of this code.
//!
//! Incident facts (dates, counts, pool size) are the public record's, as the
//! project's design notes list them; every outcome in the matrix is read
//! from a verified receipt of the bundle.

use kvw_evidence::{Outcome, ProbePredicate, Provenance, Scale};
use leptos::either::Either;
use leptos::prelude::*;

use crate::catalog::{all_switches, switch_set};
use crate::components::glossary::Glossary;
use crate::components::island::Islands;
use crate::components::provenance::describe;
use crate::components::timeline::TimelineView;
use crate::i18n::Lang;
use crate::page_data::page_href;
use crate::switch_info::{info, pr_url, Origin};

/// One verified probe run of the bundle.
pub struct Run<'a> {
    pub stem: &'a str,
    pub predicate: &'a ProbePredicate,
}

impl Run<'_> {
    fn prompt_len(&self) -> u64 {
        self.predicate
            .requests
            .iter()
            .find(|r| r.probed)
            .map_or(0, |r| r.prompt_len)
    }

    fn group(&self) -> (&str, Scale) {
        (&self.predicate.probe.name, self.predicate.config.scale)
    }
}

/// `n` with thin groups of three digits, as both languages write it.
fn grouped(n: u64, lang: Lang) -> String {
    let digits = n.to_string();
    let sep = lang.pick(",", ".");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push_str(sep);
        }
        out.push(c);
    }
    out
}

/// What the client got, as one of the answers the matrix tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// HTTP 200 carrying other tenants' data.
    Leak,
    /// HTTP 200 without foreign data, but not the request's own answer.
    Wrong,
    /// An error status only after `secs` seconds of waiting.
    ErrorAfter { status: u16, secs: u64 },
    /// An error status at once.
    ErrorAtOnce { status: u16 },
    /// HTTP 200 with the request's own answer.
    Correct,
}

impl Answer {
    pub fn of(p: &ProbePredicate) -> Answer {
        let v = &p.verdict;
        match v.outcome {
            Outcome::Leak => Answer::Leak,
            Outcome::WrongAnswer => Answer::Wrong,
            Outcome::Correct => Answer::Correct,
            Outcome::Refused if v.latency_us >= 1_000_000 => Answer::ErrorAfter {
                status: v.http_status,
                secs: v.latency_us / 1_000_000,
            },
            Outcome::Refused => Answer::ErrorAtOnce {
                status: v.http_status,
            },
        }
    }

    /// CSS modifier: the colour says bad, slow or right before the words do.
    fn slug(self) -> &'static str {
        match self {
            Answer::Leak => "leak",
            Answer::Wrong => "wrong",
            Answer::ErrorAfter { .. } => "slow",
            Answer::ErrorAtOnce { status } if status < 500 => "right",
            Answer::ErrorAtOnce { .. } => "error",
            Answer::Correct => "right",
        }
    }

    fn words(self, lang: Lang) -> String {
        match self {
            Answer::Leak => lang.pick("leak (200)", "fuga (200)").to_string(),
            Answer::Wrong => lang.pick("wrong (200)", "sbagliata (200)").to_string(),
            Answer::ErrorAfter { status, secs } => {
                format!("{status} {} {secs} s", lang.pick("after", "dopo"))
            }
            Answer::ErrorAtOnce { status } => {
                format!("{status} {}", lang.pick("at once", "subito"))
            }
            Answer::Correct => lang.pick("right (200)", "giusta (200)").to_string(),
        }
    }
}

/// Whether the public record puts a switch on the GLM-5.3 deployment, in a
/// few words.
fn on_glm53(switch: &str, lang: Lang) -> &'static str {
    let silent = lang.pick("record silent", "la fonte tace");
    match switch {
        "" => lang.pick("what ran", "ciò che girava"),
        "retire-aborted-prefill-result" | "deferred-release" => silent,
        "retire-unadmitted-reject" => lang.pick("no, later", "no, dopo"),
        "kv-checksum" => lang.pick("no (record)", "no (fonte)"),
        "page-tags" => lang.pick("no, off", "no, spento"),
        "pool-covers-context" => lang.pick("yes, 9 Sep", "sì, 9 set"),
        _ => "—",
    }
}

/// Where a switch comes from, in a few words: its first pull request and
/// release ([`crate::switch_info`]), or what it is when it is not upstream.
#[component]
fn Source(name: String, lang: Lang) -> impl IntoView {
    let (pr, words) = match info(&name).map(|i| i.origin) {
        Some(Origin::Upstream { prs, version }) => (prs.first().copied(), version.unwrap_or("")),
        Some(Origin::Prototype) => (
            None,
            lang.pick("Cloudflare prototype", "prototipo Cloudflare"),
        ),
        Some(Origin::Configuration) => (None, lang.pick("configuration", "configurazione")),
        Some(Origin::OwnDefense) | None => (None, lang.pick("ours", "nostra")),
    };
    view! {
        {pr.map(|pr| view! { <a href=pr_url(pr)>{format!("#{pr}")}</a>" " })}
        {words}
    }
}

/// One row of the matrix: a run of the bundle, or the one answer the bundle
/// has no run for.
struct Row {
    label: String,
    switch: String,
    stem: Option<String>,
    answer: Answer,
    /// How many model assumptions the run's receipt rests on.
    assumptions: usize,
    note: Option<String>,
}

/// The row of a verified run.
fn run_row(label: String, switch: &str, run: &Run) -> Row {
    Row {
        label,
        switch: switch.to_string(),
        stem: Some(run.stem.to_string()),
        answer: Answer::of(run.predicate),
        assumptions: run.predicate.assumptions.len(),
        note: None,
    }
}

/// The rows for `current`'s probe and scale: no fix, each switch alone,
/// every fix together.
fn rows(runs: &[Run], current: &Run, lang: Lang) -> Vec<Row> {
    let group: Vec<&Run> = runs
        .iter()
        .filter(|r| r.group() == current.group())
        .collect();
    let with = |wanted: &[&str]| {
        group.iter().find(|r| {
            let on = switch_set(r.predicate);
            on.len() == wanted.len() && wanted.iter().all(|w| on.iter().any(|o| o == w))
        })
    };
    let mut out = Vec::new();
    if let Some(r) = with(&[]) {
        out.push(run_row(lang.pick("no fix", "nessuna").to_string(), "", r));
    }
    // The canary modes are left to the switches: one leaks like no fix,
    // the other stops it like the checksum.
    for name in all_switches()
        .into_iter()
        .filter(|n| !n.starts_with("poison-on-free"))
    {
        if let Some(r) = with(&[name]) {
            out.push(run_row(name.to_string(), name, r));
        }
        if name == "retire-unadmitted-reject" {
            // Upstream measured this one on 1P1D with decode's own input
            // cap rejecting too; the bundle's runs give decode a larger pool.
            out.push(Row {
                label: format!(
                    "↳ {} {}*",
                    lang.pick("+ decode pool", "+ pool di decode"),
                    current.predicate.config.prefill_pool_tokens
                ),
                switch: name.to_string(),
                stem: None,
                answer: Answer::ErrorAtOnce { status: 400 },
                assumptions: 0,
                note: Some(format!(
                    "{} kvw probe --fixes {name} --decode-pool {}",
                    lang.pick(
                        "* not in this bundle: upstream's 1P1D measurement (#38935), decode's own cap rejecting too; to sign one:",
                        "* non in questo bundle: misura upstream su 1P1D (#38935), anche il limite del decode respinge; per firmarne una:",
                    ),
                    current.predicate.config.prefill_pool_tokens
                )),
            });
        }
    }
    let every: Vec<&str> = kvw_evidence::Fix::ALL.iter().map(|f| f.name()).collect();
    if let Some(r) = with(&every) {
        out.push(run_row(
            lang.pick("every fix", "tutte le correzioni").to_string(),
            "*",
            r,
        ));
    }
    out
}

/// The one row of a combination the matrix does not list.
fn own_row(run: &Run) -> Row {
    run_row(switch_set(run.predicate).join(" + "), "*", run)
}

#[component]
fn Matrix(
    rows: Vec<Row>,
    current: String,
    root: String,
    lang: Lang,
    /// Where the whole matrix is, when this one holds the run on screen only.
    whole: Option<String>,
) -> impl IntoView {
    let notes: Vec<String> = rows.iter().filter_map(|r| r.note.clone()).collect();
    view! {
        <section aria-labelledby="matrix-h">
            <h2 id="matrix-h">{lang.pick("Which fix gives the right answer?", "Quale correzione dà la risposta giusta?")}</h2>
            <p class="hint">{lang.pick(
                "Right: HTTP 400 at once for the over-long prompt. Each row opens its signed run.",
                "Giusto: HTTP 400 subito per il prompt troppo lungo. Ogni riga apre la sua esecuzione firmata.",
            )}</p>
            <table>
                <thead><tr>
                    <th scope="col">{lang.pick("Switch on", "Interruttore acceso")}</th>
                    <th scope="col">{lang.pick("Answer", "Risposta")}</th>
                    <th scope="col">{lang.pick("From", "Origine")}</th>
                    <th scope="col">{lang.pick("On GLM-5.3, per the record", "Su GLM-5.3, secondo la fonte")}</th>
                </tr></thead>
                <tbody>
                    {rows.into_iter().map(|r| {
                        let here = r.stem.as_deref() == Some(current.as_str());
                        let label = match r.stem.clone() {
                            Some(stem) => Either::Left(view! {
                                <a href=page_href(&root, lang, &stem)>{r.label.clone()}</a>
                            }),
                            None => Either::Right(view! { <span>{r.label.clone()}</span> }),
                        };
                        let every = r.switch == "*";
                        let source = (!r.switch.is_empty() && !every).then(|| view! { <Source name=r.switch.clone() lang=lang/> });
                        let glm = if every { "" } else { on_glm53(&r.switch, lang) };
                        view! {
                            <tr data-stem=r.stem.clone() aria-current=here.then_some("page")>
                                <th scope="row">{label}</th>
                                <td><span class=format!("answer a-{}", r.answer.slug())>{r.answer.words(lang)}</span>
                                    {(r.assumptions > 0).then(|| view! {
                                        " "<span class="prov-mini prov-model-assumption"><span aria-hidden="true">"?"</span>
                                        <span class="sr-only">{format!("{} {}", r.assumptions, lang.pick("model assumption(s)", "ipotesi del modello"))}</span></span>
                                    })}</td>
                                <td>{source}</td>
                                <td>{glm}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <p class="hint">{lang.pick(
                "◔ decode waits for KV that prefill never sends, until its timeout. ? the run rests on model assumptions, listed on its page.",
                "◔ il decode attende KV che il prefill non invia mai, fino al timeout. ? l'esecuzione poggia su ipotesi del modello, elencate nella sua pagina.",
            )}{notes.into_iter().map(|n| view! { " "<span class="note">{n}</span> }).collect_view()}</p>
            {whole.map(|href| view! {
                <p><a href=href id="kvw-whole-matrix">{lang.pick("Every switch alone, and every fix together", "Ogni interruttore da solo, e tutte le correzioni insieme")}<span aria-hidden="true">" →"</span></a></p>
            })}
        </section>
    }
}

/// What "this page" is, in words: a run at walkthrough scale, with how much
/// smaller it is than the incident, or a run at the incident's own numbers.
fn scale_words(
    scale: Scale,
    prompt: u64,
    pool: u64,
    incident_prompt: Option<u64>,
    lang: Lang,
) -> String {
    let (p, q) = (grouped(prompt, lang), grouped(pool, lang));
    match (scale, lang) {
        (Scale::Incident, Lang::En) => format!(
            "A signed simulation at the incident's own numbers, not a recording: a {p}-token prompt against the {q}-token prefill pool."
        ),
        (Scale::Incident, _) => format!(
            "Una simulazione firmata con i numeri dell'incidente, non una registrazione: un prompt di {p} token contro il pool di prefill di {q} token."
        ),
        (Scale::Walkthrough, _) => {
            let r = grouped(incident_prompt.unwrap_or(681_281) / prompt.max(1), lang);
            match lang {
                Lang::En => format!(
                    "A signed simulation, not a recording: a {p}-token prompt against a {q}-token prefill pool, about {r} times smaller than the incident."
                ),
                _ => format!(
                    "Una simulazione firmata, non una registrazione: un prompt di {p} token contro un pool di prefill di {q} token, circa {r} volte più piccola dell'incidente."
                ),
            }
        }
    }
}

/// The card of a page the matrix does not list (a combination of
/// switches): the facts in one sentence, and the way to the whole card.
#[component]
fn ShortIntro(href: String, lang: Lang) -> impl IntoView {
    view! {
        <p class="intro-short">
            {lang.pick(
                "A signed simulation, not a recording, of the leak at Cloudflare Workers AI (GLM-5.3 on SGLang with prefill and decode split, 27 Aug – 9 Sep 2026: 155 responses carried other requests' data). ",
                "Una simulazione firmata, non una registrazione, della fuga in Cloudflare Workers AI (GLM-5.3 su SGLang con prefill e decode separati, 27 ago – 9 set 2026: 155 risposte contenevano dati di altre richieste). ",
            )}
            <a href=href>{lang.pick("What happened, what the badge proves, which fix works", "Cosa è successo, cosa prova il bollino, quale correzione funziona")}<span aria-hidden="true">" →"</span></a>
        </p>
    }
}

#[component]
fn Intro(
    scale: Scale,
    prompt: u64,
    pool: u64,
    /// The run without fixes at the other scale: its stem and prompt length.
    counterpart: Option<(String, u64)>,
    keyid: String,
    lang: Lang,
    root: String,
) -> impl IntoView {
    let incident_prompt = counterpart
        .as_ref()
        .filter(|_| scale == Scale::Walkthrough)
        .map(|(_, n)| *n);
    let marks = [
        Provenance::Disclosed,
        Provenance::UpstreamTest,
        Provenance::UpstreamCode,
        Provenance::UpstreamThread,
        Provenance::UpstreamRun,
        Provenance::ModelAssumption,
    ]
    .map(|p| describe(p, lang));
    let other_scale = counterpart.map(|(stem, _)| {
        let what = match scale {
            Scale::Walkthrough => lang.pick("At the incident's scale", "Alla scala dell'incidente"),
            Scale::Incident => lang.pick("At walkthrough scale", "In scala dimostrativa"),
        };
        view! { " "<a href=page_href(&root, lang, &stem) id="kvw-scale-link">{what}<span aria-hidden="true">" →"</span></a> }
    });
    view! {
        <dl>
            <dt>{lang.pick("What happened", "Cosa è successo")}</dt>
            <dd>{lang.pick(
                "27 Aug – 9 Sep 2026, Cloudflare Workers AI, GLM-5.3 on SGLang with prefill and decode split: prompts over the 681,280-token prefill pool were rejected by prefill, yet decode answered HTTP 200 from other customers' KV pages. 155 responses carried other requests' data. Fixes: SGLang 0.5.21 and 0.5.22; disclosed 26 Oct.",
                "27 ago – 9 set 2026, Cloudflare Workers AI, GLM-5.3 su SGLang con prefill e decode separati: i prompt oltre il pool di prefill da 681.280 token venivano respinti dal prefill, ma il decode rispondeva HTTP 200 con pagine KV di altri clienti. 155 risposte contenevano dati di altre richieste. Correzioni: SGLang 0.5.21 e 0.5.22; divulgazione il 26 ott.",
            )}</dd>
            <dt>{lang.pick("This page", "Questa pagina")}</dt>
            <dd>{scale_words(scale, prompt, pool, incident_prompt, lang)}{other_scale}</dd>
            <dt>{lang.pick("The badge", "Il bollino")}</dt>
            <dd>
                {lang.pick(
                    "Proves the receipt file is unchanged since it was signed with the key in ",
                    "Prova che il file della ricevuta non è cambiato da quando è stato firmato con la chiave in ",
                )}<a href=format!("{root}kvw.pub.json")>"kvw.pub.json"</a>
                " ("<code>{keyid.get(..16).unwrap_or(&keyid).to_string()}</code>"), "
                {lang.pick(
                    "not that the incident happened this way. Check it: ",
                    "non che l'incidente sia andato così. Verificalo: ",
                )}<code>"kvw verify evidence/bundles/incident"</code>
            </dd>
            <dt>{lang.pick("Marks", "Simboli")}</dt>
            <dd class="marks">
                {marks.into_iter().map(|(symbol, label, slug)| view! {
                    <span class=format!("mark-{slug}")><span aria-hidden="true" class=format!("prov-{slug}")>{symbol}</span>" "{label}</span>" · "
                }).collect_view()}
                {lang.pick(
                    "tenant: one customer; canary: a secret string in each tenant's prompt, so a leak shows.",
                    "tenant: un cliente; canary: una stringa segreta nel prompt di ogni tenant, così una fuga si vede.",
                )}
            </dd>
        </dl>
    }
}

/// The page's headline: what happened, for a run that leaks; what the
/// fixes on screen changed, for one that does not.
fn headline(run: &Run, lang: Lang) -> String {
    let on = switch_set(run.predicate);
    if run.predicate.verdict.leak || on.is_empty() {
        return lang
            .pick(
                "A rejected prompt that read another customer's data",
                "Un prompt respinto che ha letto i dati di un altro cliente",
            )
            .to_string();
    }
    format!(
        "{} {} — {}",
        lang.pick(
            "The same rejected prompt with",
            "Lo stesso prompt respinto con"
        ),
        on.join(" + "),
        kvw_words::probe::outcome_line(run.predicate, lang)
    )
}

/// The islands of the replay page of `current` in `lang`, from every
/// verified probe run of the bundle.
pub fn islands(runs: &[Run], current: &str, keyid: &str, root: &str, lang: Lang) -> Islands {
    let aside =
        Owner::new().with(|| view! { <Glossary lang=lang/><TimelineView lang=lang/> }.to_html());
    let Some(run) = runs.iter().find(|r| r.stem == current) else {
        return Islands {
            aside,
            ..Islands::default()
        };
    };
    let scale = run.predicate.config.scale;
    let counterpart = runs
        .iter()
        .find(|r| {
            r.predicate.probe.name == run.predicate.probe.name
                && r.predicate.config.scale != scale
                && switch_set(r.predicate).is_empty()
        })
        .map(|r| (r.stem.to_string(), r.prompt_len()));
    let (prompt, pool) = (run.prompt_len(), run.predicate.config.prefill_pool_tokens);
    let root = root.to_string();
    let (current, keyid) = (current.to_string(), keyid.to_string());
    let rows = rows(runs, run, lang);
    let render = |f: &dyn Fn() -> AnyView| Owner::new().with(|| f().to_html());
    let headline = headline(run, lang);
    // The whole card and matrix go on the pages the matrix lists; a
    // combination's page gets the card in one sentence and its own row,
    // with the way to the whole: the site stays within its size.
    let baseline = rows
        .iter()
        .find(|r| r.switch.is_empty())
        .and_then(|r| r.stem.clone());
    let listed = rows
        .iter()
        .any(|r| r.stem.as_deref() == Some(current.as_str()));
    let (rows, whole) = match baseline {
        Some(base) if !listed => (
            vec![own_row(run)],
            Some(format!("{}#kvw-matrix", page_href(&root, lang, &base))),
        ),
        _ => (rows, None),
    };
    let intro = match whole.clone() {
        Some(href) => render(&|| view! { <ShortIntro href=href.clone() lang=lang/> }.into_any()),
        None => render(&|| {
            view! { <Intro scale=scale prompt=prompt pool=pool counterpart=counterpart.clone() keyid=keyid.clone() lang=lang root=root.clone()/> }
                .into_any()
        }),
    };
    let matrix = {
        let rows = std::cell::RefCell::new(Some(rows));
        render(&|| {
            let rows = rows.borrow_mut().take().unwrap_or_default();
            view! { <Matrix rows=rows current=current.clone() root=root.clone() lang=lang whole=whole.clone()/> }
                .into_any()
        })
    };
    Islands {
        headline: render(&|| view! { <h1>{headline.clone()}</h1> }.into_any()),
        ribbons: super::ribbon::ribbons(run.predicate, lang),
        intro,
        matrix,
        aside,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_as_each_language_writes_them() {
        assert_eq!(grouped(681_280, Lang::En), "681,280");
        assert_eq!(grouped(681_280, Lang::It), "681.280");
        assert_eq!(grouped(128, Lang::En), "128");
        assert_eq!(grouped(1_048_576, Lang::En), "1,048,576");
    }
}
