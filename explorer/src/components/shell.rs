//! The page around the replay: header with the language switch, the main
//! landmark, the timeline and a footer pointing at the raw evidence.
//!
//! [`SitePage`] is rendered as the whole `<body>` so the browser can hydrate
//! the body as one tree.

use leptos::prelude::*;

use super::replay::Replay;
use super::timeline::TimelineView;
use super::trust_banner::TrustBanner;
use super::ReplayCtx;
use crate::i18n::Lang;
use crate::model::page_href;

#[component]
fn LangSwitch(lang: Lang) -> impl IntoView {
    let ctx = ReplayCtx::get();
    view! {
        <nav class="langs" aria-label=lang.pick("Language", "Lingua")>
            <ul>
                {Lang::ALL.into_iter().map(|l| {
                    let href = move || {
                        let stem = ctx.shown.with(|s| s.stem().to_string());
                        ctx.data.with_value(|d| page_href(&d.root, l, &stem))
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
    .into_any()
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
            <LangSwitch lang=lang/>
        </header>
        <main id="main" class="kvw-main">
            <h1>{lang.pick("A prefill/decode KV-cache leak, step by step", "Una fuga di KV-cache tra prefill e decode, passo per passo")}</h1>
            <p class="lede">{lang.pick(
                "In the 2026 incident, a prompt longer than the prefill pool was rejected, yet the rejection was not seen in time: decode read pages other tenants had left behind and answered HTTP 200. This page replays one run of the engine that reproduces it, from a signed receipt; the fix switches open the runs with each upstream fix.",
                "Nell'incidente del 2026 un prompt più lungo del pool di prefill veniva respinto, ma il rifiuto non era visto in tempo: il decode leggeva pagine lasciate da altri tenant e rispondeva HTTP 200. Questa pagina riproduce un'esecuzione del motore che lo ricrea, da una ricevuta firmata; gli interruttori aprono le esecuzioni con ciascuna correzione upstream.",
            )}</p>
            <TrustBanner/>
            <Replay/>
        </main>
        <aside class="kvw-aside">
            <TimelineView lang=lang/>
        </aside>
        <Footer lang=lang/>
    }
    .into_any()
}
