//! The page around the replay: header with the language switch, the main
//! landmark, the timeline and a footer pointing at the raw evidence.
//!
//! [`SitePage`] is rendered as the whole `<body>` so the browser can hydrate
//! the body as one tree.

use leptos::prelude::*;

use super::island::{Island, Which};
use super::replay::Replay;
use super::trust_banner::TrustBanner;
use super::ReplayCtx;
use crate::i18n::Lang;
use crate::page_data::page_href;

#[component]
fn LangSwitch(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    view! {
        <nav class="langs" aria-label=lang.pick("Language", "Lingua")>
            <ul>
                {Lang::ALL.into_iter().map(|l| {
                    // The other language opens on the same receipt and step.
                    let href = move || {
                        let stem = ctx.shown.with(|s| s.stem().to_string());
                        let page = ctx.data.with_value(|d| page_href(&d.root, l, &stem));
                        format!("{page}#step-{}", ctx.current.get())
                    };
                    view! {
                        <li><a href=href hreflang=l.code() lang=l.code() aria-current=(l == lang).then_some("page")>{l.endonym()}</a></li>
                    }
                }).collect_view()}
            </ul>
        </nav>
    }
}

#[component]
fn Footer(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    let root = ctx.data.with_value(|d| d.root.clone());
    let receipt_href = move || {
        let stem = ctx.shown.with(|s| s.stem().to_string());
        ctx.data.with_value(|d| d.receipt_href(&stem))
    };
    view! {
        <footer class="kvw-footer">
            <ul>
                <li><a href=receipt_href id="kvw-receipt-link">{lang.pick("This receipt (DSSE envelope)", "Questa ricevuta (busta DSSE)")}</a></li>
                <li><a href=format!("{root}kvw.pub.json")>{lang.pick("Public key", "Chiave pubblica")}</a></li>
                <li><a href=format!("{root}receipts/")>{lang.pick("All receipts", "Tutte le ricevute")}</a></li>
            </ul>
            <p>{lang.pick("Verify offline: ", "Verifica offline: ")}<code>"kvw verify"</code></p>
        </footer>
    }
}

/// The whole body of a replay page.
#[component]
pub fn SitePage() -> impl IntoView {
    let ctx = ReplayCtx::get();
    let (lang, root) = ctx.data.with_value(|d| (d.lang, d.root.clone()));
    view! {
        <a class="skip" href="#replay">{lang.pick("Skip to the replay", "Vai alla riproduzione")}</a>
        <header class="site">
            <p class="brand"><a href=format!("{root}index.html")>"kvwitness"</a></p>
            <nav class="site-links" aria-label=lang.pick("Site", "Sito")>
                <a href="#glossary">{lang.pick("Glossary", "Glossario")}</a>
                <a href=format!("{root}{}/compare.html", lang.code())>{lang.pick("Compare runs", "Confronta esecuzioni")}</a>
                <a href=format!("{root}receipts/index.html")>{lang.pick("All receipts, gates, model checks", "Tutte le ricevute, gate, model check")}</a>
            </nav>
            <LangSwitch lang=lang/>
        </header>
        <main id="main" class="kvw-main">
            <Island which=Which::Headline/>
            <Island which=Which::Intro/>
            <Island which=Which::Matrix/>
            <TrustBanner/>
            <Replay/>
        </main>
        <aside class="kvw-aside">
            <Island which=Which::Aside/>
        </aside>
        <Footer lang=lang/>
    }
}
