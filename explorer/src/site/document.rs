//! The HTML documents around the rendered components: the replay page and
//! the compare page (both hydrated when the browser build is present).
//!
//! Every document opens its `<head>` with [`head_start`]: the character
//! set, the Content-Security-Policy ([`crate::csp`]), the viewport, the
//! title and an empty icon. Text from a receipt reaches the document only
//! through the Leptos renderer (which escapes it) or as JSON inside a
//! `<script type="application/json">` with `<` escaped.

use leptos::prelude::*;

use crate::components::compare::{CompareApp, ComparePage, ComparePair, COMPARE_PAIR_ID};
use crate::components::island::Islands;
use crate::components::shell::SitePage;
use crate::components::ReplayCtx;
use crate::csp::{boot_script, early_check_script, JS_FLAG};
use crate::i18n::Lang;
use crate::page_data::{
    page_href, page_title, run_label, CatalogEntry, PageData, Shown, PAGE_DATA_ID,
};

/// Text escaped for HTML, by the renderer.
pub fn escape(text: &str) -> String {
    let text = text.to_string();
    Owner::new().with(|| view! { {text} }.to_html())
}

/// JSON safe to place inside a `<script>` element.
pub fn script_json<T: serde::Serialize>(data: &T) -> String {
    serde_json::to_string(data)
        .unwrap_or_default()
        .replace('<', "\\u003c")
}

/// The start of every page's `<head>`: charset, policy, viewport, `title`
/// (plain text, escaped here) and an empty icon.
pub fn head_start(title: &str) -> String {
    format!(
        "<meta charset=\"utf-8\">\n{}\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{}</title>\n<link rel=\"icon\" href=\"data:,\">",
        crate::csp::meta(),
        escape(title)
    )
}

/// The header of every page but the replay's (whose header is part of the
/// hydrated body): the brand, the site's own pages, and `langs`, the links
/// to the page in the other language (HTML the caller rendered).
pub fn site_header(root: &str, lang: Lang, langs: &str) -> String {
    let links = [
        (
            "index.html".to_string(),
            lang.pick("The replay", "La riproduzione"),
        ),
        (
            format!("{}/{}", lang.code(), super::layout::COMPARE_PAGE),
            lang.pick("Compare runs", "Confronta esecuzioni"),
        ),
        (
            super::layout::receipts_index_path(lang).to_string(),
            lang.pick(
                "All receipts, gates, model checks",
                "Tutte le ricevute, gate, model check",
            ),
        ),
    ];
    let nav = Owner::new().with(|| {
        view! {
            <nav class="site-links" aria-label=lang.pick("Site", "Sito")>
                {links.into_iter().map(|(href, words)| view! { <a href=format!("{root}{href}")>{words}</a> }).collect_view()}
            </nav>
        }
        .to_html()
    });
    format!(
        "<header class=\"site\"><p class=\"brand\"><a href=\"{root}index.html\">kvwitness</a></p>{nav}<nav class=\"langs\" aria-label=\"{}\">{langs}</nav></header>",
        lang.pick("Language", "Lingua")
    )
}

/// Render the `<body>` content of a replay page, with its build-time
/// `islands`.
pub fn render_replay_body(
    data: PageData,
    catalog: Vec<CatalogEntry>,
    shown: Shown,
    islands: Islands,
) -> String {
    Owner::new().with(|| {
        ReplayCtx::provide(data, catalog, shown);
        provide_context(islands);
        view! { <SitePage/> }.to_html()
    })
}

/// A complete replay page.
pub fn render_replay_page(
    data: &PageData,
    catalog: &[CatalogEntry],
    shown: Shown,
    islands: Islands,
    hydrate: bool,
) -> String {
    let lang = data.lang;
    let title = page_title(
        crate::page_data::entry(catalog, &data.receipt),
        &data.receipt,
        lang,
    );
    let alternates: String = Lang::ALL
        .into_iter()
        .map(|l| {
            let href = page_href(&data.root, l, &data.receipt);
            Owner::new()
                .with(|| view! { <link rel="alternate" hreflang=l.code() href=href/> }.to_html())
        })
        .collect();
    let (early, boot) = if hydrate {
        (
            format!("{}\n", early_check_script()),
            boot_script(&data.root, lang, "hydrate"),
        )
    } else {
        (String::new(), String::new())
    };
    let body = render_replay_body(data.clone(), catalog.to_vec(), shown, islands);
    let flag = if hydrate { JS_FLAG } else { "" };
    format!(
        "<!DOCTYPE html>\n<html lang=\"{lang}\" class=\"kvw-site\">\n<head>\n{head}\n<script type=\"application/json\" id=\"{PAGE_DATA_ID}\">{json}</script>\n{early}<link rel=\"stylesheet\" href=\"{root}style.css\">\n{flag}\n{alternates}\n{boot}\n</head>\n<body>{body}</body>\n</html>\n",
        lang = lang.code(),
        head = head_start(&title),
        root = data.root,
        json = script_json(data),
    )
}

/// A complete compare page: `pair` as verified at build time, redrawn in the
/// browser from the receipt files (and the picker's choice) when scripts run.
pub fn render_compare_page(
    data: &PageData,
    catalog: &[CatalogEntry],
    pair: &ComparePair,
    sides: (Shown, Shown),
    hydrate: bool,
) -> String {
    let (lang, root) = (data.lang, data.root.as_str());
    let label = |stem: &str| run_label(crate::page_data::entry(catalog, stem), stem, lang);
    let title = format!("{} ↔ {} — kvwitness", label(&pair.left), label(&pair.right));
    let other = Lang::ALL
        .into_iter()
        .filter(|l| *l != lang)
        .map(|l| {
            let href = format!("{root}{}", super::layout::compare_page(l, &pair.right));
            Owner::new().with(|| {
                view! { <a href=href hreflang=l.code() lang=l.code()>{l.endonym()}</a> }.to_html()
            })
        })
        .collect::<Vec<_>>()
        .join(" ");
    let app = CompareApp {
        data: data.clone(),
        // The picker is for readers with scripts, and the browser draws it
        // again from catalog.json when it mounts the page: the static page
        // lists only the two runs shown, which keeps each of the many
        // compare pages small.
        catalog: catalog
            .iter()
            .filter(|e| e.stem == pair.left || e.stem == pair.right)
            .cloned()
            .collect(),
        left: sides.0,
        right: sides.1,
        browser_checked: false,
    };
    let body = Owner::new().with(|| view! { <ComparePage app=app/> }.to_html());
    let (flag, boot) = if hydrate {
        (JS_FLAG, boot_script(root, data.lang, "compare"))
    } else {
        ("", String::new())
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"{code}\" class=\"kvw-site\">\n<head>\n{head}\n<link rel=\"stylesheet\" href=\"{root}style.css\">\n{flag}\n<script type=\"application/json\" id=\"{PAGE_DATA_ID}\">{json}</script>\n<script type=\"application/json\" id=\"{COMPARE_PAIR_ID}\">{pair_json}</script>\n{boot}\n</head>\n<body><a class=\"skip\" href=\"#main\">{skip}</a>{header}<main id=\"main\" class=\"kvw-main\">{body}</main></body>\n</html>\n",
        code = lang.code(),
        head = head_start(&title),
        json = script_json(data),
        pair_json = script_json(pair),
        skip = lang.pick("Skip to the comparison", "Vai al confronto"),
        header = site_header(root, lang, &other),
    )
}
