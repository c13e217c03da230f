//! The receipts index of each language and the embed example: the two
//! pages of a site that list receipts rather than show one.

use leptos::prelude::*;

use super::document::head_start;
use super::layout::{receipts_index_path, GATES_PAGE};
use super::load::{Kind, LoadedBundle};
use crate::i18n::Lang;

/// Links from the receipts index of `lang` to the pages of the other kinds
/// a bundle carries (gate tables, scenario and randomized-run replays,
/// model-check counterexamples, audits), relative to the index.
fn result_links(bundle: &LoadedBundle, lang: Lang) -> Vec<(String, String)> {
    let pages = match lang {
        Lang::En => "../en/",
        Lang::It => "",
    };
    let mut links = Vec::new();
    if bundle
        .receipts
        .iter()
        .any(|l| matches!(l.kind, Kind::Gates(_)))
    {
        links.push((
            format!("{pages}{GATES_PAGE}"),
            lang.pick(
                "The four acceptance gates, with and without fixes",
                "I quattro gate di accettazione, con e senza correzioni",
            )
            .to_string(),
        ));
    }
    // Model checks, then randomized runs, scenarios, audits and upstream runs.
    let order = |k: &Kind| match k {
        Kind::ModelCheck(_) => Some((0, lang.pick("Model check", "Verifica del modello"))),
        Kind::Fuzz(_) => Some((1, lang.pick("Randomized runs", "Esecuzioni casuali"))),
        Kind::Scenario(_) => Some((2, "Scenario")),
        Kind::Audit(_) => Some((3, lang.pick("Endpoint audit", "Audit di un endpoint"))),
        Kind::UpstreamRun(_) => Some((4, lang.pick("Real SGLang release", "Release SGLang reale"))),
        Kind::Probe(_) | Kind::Gates(_) => None,
    };
    let mut others: Vec<(usize, &str, &str)> = bundle
        .receipts
        .iter()
        .filter_map(|l| order(&l.kind).map(|(rank, label)| (rank, label, l.stem.as_str())))
        .collect();
    others.sort_by_key(|(rank, _, _)| *rank);
    for (_, label, stem) in others {
        links.push((format!("{pages}{stem}.html"), format!("{label}: {stem}")));
    }
    links
}

/// The receipts index of `lang`: every probe receipt with a link to it and
/// to its replay, the public key, and the pages of the other kinds.
pub fn receipts_index(bundle: &LoadedBundle, lang: Lang) -> String {
    let (files, pages, root) = match lang {
        Lang::En => ("", "../en/", "../"),
        Lang::It => ("../receipts/", "", "../"),
    };
    let items: String = bundle
        .probes()
        .map(|(l, _)| {
            let status = lang.pick("verified", "verificata");
            let file = format!("{}.json", l.stem);
            let href = format!("{files}{file}");
            let replay = format!("{pages}{}.html", l.stem);
            let replay_word = lang.pick("replay", "riproduzione");
            Owner::new().with(|| {
                view! {
                    <li>
                        <a href=href><code>{file}</code></a>
                        " — " {status} " — " <a href=replay>{replay_word}</a>
                    </li>
                }
                .to_html()
            }) + "\n"
        })
        .collect();
    let others = result_links(bundle, lang);
    let other_items: String = others
        .into_iter()
        .map(|(href, label)| {
            Owner::new().with(|| view! { <li><a href=href>{label}</a></li> }.to_html()) + "\n"
        })
        .collect();
    let other_section = if other_items.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>{}</h2><ul>\n{other_items}</ul>",
            lang.pick(
                "Gates, scenarios, model checks and audits",
                "Gate, scenari, verifiche del modello e audit"
            )
        )
    };
    let other_lang = Lang::ALL.into_iter().find(|l| *l != lang).unwrap_or(lang);
    let other_href = format!("{root}{}", receipts_index_path(other_lang));
    let other_link = Owner::new().with(|| {
        view! { <a href=other_href hreflang=other_lang.code() lang=other_lang.code()>{other_lang.endonym()}</a> }
            .to_html()
    });
    let title = lang.pick("Receipts", "Ricevute");
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\"><head>{head}<link rel=\"stylesheet\" href=\"{root}style.css\"></head><body><a class=\"skip\" href=\"#main\">{skip}</a>{header}<main id=\"main\" class=\"kvw-main\"><h1>{title}</h1><p>{key}: <a href=\"{root}kvw.pub.json\"><code>kvw.pub.json</code></a></p>{other_section}<h2>{probes}</h2><ul>\n{items}</ul></main></body></html>\n",
        code = lang.code(),
        head = head_start(&format!("{title} — kvwitness")),
        skip = lang.pick("Skip to content", "Vai al contenuto"),
        header = super::document::site_header(root, lang, &other_link),
        key = lang.pick("Public key", "Chiave pubblica"),
        probes = lang.pick("Probe runs", "Esecuzioni della sonda"),
    )
}

/// `embed-example.html` showing the receipt `stem`, with the policy in its
/// `<head>`; the element is written by the renderer, so its attributes are
/// escaped.
pub fn embed_example(stem: &str) -> String {
    let template = crate::csp::EMBED_EXAMPLE;
    let src = format!("receipts/{stem}.json");
    let page = format!("en/{stem}.html");
    let element = Owner::new().with(|| {
        view! {
            <kvw-replay id="embedded" src=src lang="en">
                <p data-kvw-fallback=""><a href=page>"Open the replay"</a>" (this link is what readers without JavaScript see)."</p>
            </kvw-replay>
        }
        .to_html()
    });
    let start = template.find("<kvw-replay").unwrap_or(0);
    let end = template
        .find("</kvw-replay>")
        .map_or(start, |e| e + "</kvw-replay>".len());
    let page = format!("{}{element}{}", &template[..start], &template[end..]);
    // The policy goes right after the character set, before anything loads.
    let charset = "<meta charset=\"utf-8\">";
    page.replacen(charset, &format!("{charset}\n{}", crate::csp::meta()), 1)
}
