//! Browser entry points (the `hydrate` build).
//!
//! [`hydrate`] runs on a replay page. The page embeds no receipt: it fetches
//! the file it links as "this receipt" (`receipts/<stem>.json`) and the
//! site's `catalog.json` (the receipt's bytes come from the inline WebCrypto
//! check in `<head>`, which fetched them first), verifies the receipt with the evidence crate
//! (compiled to wasm) and checks the catalog against its digest. Only when
//! the verified bytes are the ones the static page was rendered from (same
//! SHA-256) does it hydrate the server-rendered body; otherwise the static
//! replay is thrown away and the page is drawn from what this browser
//! verified, which for a tampered file is the warning. After that it adds
//! keyboard arrows, `#step-N` deep links and in-place receipt switching
//! (through the same fetch-and-verify), and marks the root `kvw-ready`.
//!
//! [`compare`] does the same for a compare page (two receipts, a picker) and
//! [`mount_to`] is the embedding entry point behind `<kvw-replay>`.

use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use kvw_evidence::canonical::sha256_hex;

use crate::components::actions::Actions;
use crate::components::compare::{CompareApp, ComparePage, ComparePair, COMPARE_PAIR_ID};
use crate::components::replay::Replay;
use crate::components::shell::SitePage;
use crate::components::trust_banner::TrustBanner;
use crate::components::ReplayCtx;
use crate::fixed::fixed;
use crate::i18n::Lang;
use crate::links::DEFAULT_ENGINE_SOURCE_BASE;
use crate::page_data::{CatalogEntry, PageData, Shown, PAGE_DATA_ID};
use crate::trust;

fn document() -> web_sys::Document {
    web_sys::window()
        .and_then(|w| w.document())
        .expect("a document")
}

fn log_error(message: &str) {
    web_sys::console::error_1(&JsValue::from_str(message));
}

fn read_json<T: serde::de::DeserializeOwned>(id: &str) -> Result<T, String> {
    let text = document()
        .get_element_by_id(id)
        .and_then(|e| e.text_content())
        .ok_or("no page data")?;
    // Bytes, like every other parse here: one JSON reader in the build.
    serde_json::from_slice(text.as_bytes()).map_err(|e| format!("page data: {e}"))
}

/// This build's language, refusing a page or element in another: a build
/// carries one language's strings (see [`Lang::spoken`]), so hydrating an
/// Italian page with the English build would rewrite it in English.
fn speaks(lang: Lang) -> Result<Lang, String> {
    if lang.spoken() == lang {
        Ok(lang)
    } else {
        Err(format!(
            "this browser build speaks {}, the page is in {}: load pkg/{}",
            lang.spoken().code(),
            lang.code(),
            crate::i18n::pkg_folder(lang)
        ))
    }
}

/// The page's data, in this build's language.
fn page_data() -> Result<PageData, String> {
    let data: PageData = read_json(PAGE_DATA_ID)?;
    speaks(data.lang)?;
    Ok(data)
}

/// Start fetching `url`; the request runs while other work goes on.
fn start_fetch(url: &str) -> Result<js_sys::Promise, String> {
    Ok(web_sys::window().ok_or("no window")?.fetch_with_str(url))
}

/// The body of a started fetch, as the exact bytes served.
async fn body_bytes(
    url: &str,
    request: Result<js_sys::Promise, String>,
) -> Result<Vec<u8>, String> {
    let js = |e: JsValue| e.as_string().unwrap_or_else(|| format!("{e:?}"));
    let response: web_sys::Response = JsFuture::from(request?)
        .await
        .map_err(|e| format!("cannot fetch {url}: {}", js(e)))?
        .dyn_into()
        .map_err(|_| "not a response".to_string())?;
    if !response.ok() {
        return Err(format!("HTTP {} for {url}", response.status()));
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(js)?)
        .await
        .map_err(js)?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

async fn fetch_bytes(url: &str) -> Result<Vec<u8>, String> {
    body_bytes(url, start_fetch(url)).await
}

async fn fetch_text(url: &str) -> Result<String, String> {
    String::from_utf8(fetch_bytes(url).await?).map_err(|_| format!("{url} is not UTF-8"))
}

/// Verify the bytes a started fetch of receipt `url` returns.
async fn verify_fetched(url: &str, request: Result<js_sys::Promise, String>, key: &str) -> Shown {
    let stem = stem_of(url);
    match body_bytes(url, request).await {
        Ok(bytes) => trust::check_bytes(&stem, &bytes, key),
        Err(reason) => Shown::Rejected { stem, reason },
    }
}

/// The catalog a started fetch returns, if its digest is the expected one.
async fn catalog_fetched(
    url: &str,
    request: Result<js_sys::Promise, String>,
    sha256: &str,
) -> Result<Vec<CatalogEntry>, String> {
    let bytes = body_bytes(url, request).await?;
    if sha256_hex(&bytes) != sha256 {
        return Err(format!("{url} is not the catalog this page was built with"));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{url}: {e}"))
}

/// `stem` of a receipt URL: the last path segment without `.json`.
fn stem_of(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".json").unwrap_or(last).to_string()
}

/// Milliseconds since the page's navigation started.
fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn set_root_attr(name: &str, value: Option<&str>) {
    if let Some(root) = document().document_element() {
        match value {
            Some(v) => {
                let _ = root.set_attribute(name, v);
            }
            None => {
                let _ = root.remove_attribute(name);
            }
        }
    }
}

fn set_flag(name: &str, on: bool) {
    set_root_attr(name, on.then_some("1"));
}

/// Write `#step-N` into the address bar without scrolling.
pub fn set_hash(n: u8) {
    if let Some(history) = web_sys::window().and_then(|w| w.history().ok()) {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&format!("#step-{n}")));
    }
}

fn step_from_hash() -> Option<u8> {
    let hash = web_sys::window()?.location().hash().ok()?;
    let n: u8 = hash.strip_prefix("#step-")?.parse().ok()?;
    (1..=7).contains(&n).then_some(n)
}

fn query_param(name: &str) -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    search.trim_start_matches('?').split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name)
            .then(|| {
                js_sys::decode_uri_component(&v.replace('+', " "))
                    .ok()
                    .and_then(|s| s.as_string())
            })
            .flatten()
    })
}

/// Fetch, verify and show the receipt at `url` in place (inside an embed).
async fn load(ctx: ReplayCtx, url: String) {
    let stem = stem_of(&url);
    set_flag("data-kvw-loading", true);
    ctx.shown.set(Shown::Loading { stem: stem.clone() });
    let key = ctx.data.with_value(|d| d.public_key.clone());
    let shown = verify_fetched(&url, start_fetch(&url), &key).await;
    ctx.shown.set(shown);
    ctx.browser_checked.set(true);
    set_flag("data-kvw-loading", false);
}

/// What the replay's controls do in the browser.
fn actions() -> Actions {
    Actions {
        switch_to: Some(switch_to),
        set_hash: Some(set_hash),
    }
}

/// Show the receipt `stem`: on a page of the site, open its own page
/// (every combination is a static page with its own address, readable
/// without scripts); inside an embed, which must not leave the host page,
/// fetch, verify and swap it in place.
pub fn switch_to(ctx: ReplayCtx, stem: String) {
    let (url, page) = ctx
        .data
        .with_value(|d| (d.receipt_href(&stem), d.page_href(&stem)));
    if ctx.embedded {
        leptos::task::spawn_local(load(ctx, url));
    } else if let Some(w) = web_sys::window() {
        let _ = w.location().set_href(&page);
    }
}

/// The step change an arrow key asks for, if any.
fn arrow(ev: &web_sys::KeyboardEvent) -> Option<i32> {
    if ev.alt_key() || ev.ctrl_key() || ev.meta_key() {
        return None;
    }
    let typing = ev
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
    let delta = match ev.key().as_str() {
        "ArrowRight" => 1,
        "ArrowLeft" => -1,
        _ => return None,
    };
    (!typing).then_some(delta)
}

fn step_by(ctx: ReplayCtx, delta: i32) {
    ctx.go(ctx.current.get_untracked() as i32 + delta);
    if !ctx.embedded {
        set_hash(ctx.current.get_untracked());
    }
}

/// Keyboard arrows and `#step-N` navigation.
fn install_navigation(ctx: ReplayCtx) {
    let keys = window_event_listener(leptos::ev::keydown, move |ev| {
        if let Some(delta) = arrow(&ev) {
            ev.prevent_default();
            step_by(ctx, delta);
        }
    });
    let hashes = window_event_listener(leptos::ev::hashchange, move |_| {
        if let Some(n) = step_from_hash() {
            ctx.current.set(n);
        }
    });
    // The listeners live as long as the page.
    std::mem::forget(keys);
    std::mem::forget(hashes);
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| log_error(&info.to_string())));
}

fn mark_ready() {
    if let Some(root) = document().document_element() {
        let _ = root.class_list().add_1("kvw-ready");
    }
    set_flag("data-kvw-ready", true);
}

/// A promise the inline check (`early_check.js`) left on `window`, if any.
fn early_promise(name: &str) -> Option<js_sys::Promise> {
    let window = web_sys::window()?;
    js_sys::Reflect::get(&window, &JsValue::from_str(name))
        .ok()?
        .dyn_into()
        .ok()
}

/// The wasm verdict, unless the inline WebCrypto check refused the same
/// bytes: two verifiers that disagree show the warning, never the replay.
async fn agree_with_early(shown: Shown) -> Shown {
    let Some(early) = early_promise("kvwEarly") else {
        return shown;
    };
    let verdict = JsFuture::from(early).await.ok().and_then(|v| v.as_string());
    match (verdict.as_deref(), shown) {
        (Some("bad"), Shown::Verified { stem, .. }) => Shown::Rejected {
            stem,
            reason: "the browser's WebCrypto check refused these bytes".to_string(),
        },
        (_, shown) => shown,
    }
}

/// Record when the verdict was known: `data-kvw-verify-ms` (fetch and
/// verification), `data-kvw-wasm-ms` (since navigation start) and, unless
/// the inline check showed it first, `data-kvw-badge-ms`.
fn record_timing(started: f64) {
    set_root_attr("data-kvw-verify-ms", Some(&fixed(now_ms() - started, 1)));
    let at = fixed(now_ms(), 1);
    set_root_attr("data-kvw-wasm-ms", Some(&at));
    // The inline WebCrypto check may have shown the badge already.
    let shown_early = document()
        .document_element()
        .is_some_and(|root| root.has_attribute("data-kvw-badge-ms"));
    if !shown_early {
        set_root_attr("data-kvw-badge-ms", Some(&at));
    }
}

/// Hydrate a replay page (called by the page's module script).
#[wasm_bindgen]
pub async fn hydrate() {
    install_panic_hook();
    let data = match page_data() {
        Ok(data) => data,
        Err(e) => return log_error(&e),
    };
    let started = now_ms();
    let receipt_url = data.receipt_href(&data.receipt);
    let catalog_url = data.catalog_href();
    let catalog_req = start_fetch(&catalog_url);
    // The inline check started fetching the receipt before this module
    // loaded; verify those same bytes rather than asking again.
    let shown = match early_promise("kvwReceipt") {
        Some(bytes) => match JsFuture::from(bytes).await {
            Ok(buffer) => trust::check_bytes(
                &data.receipt,
                &js_sys::Uint8Array::new(&buffer).to_vec(),
                &data.public_key,
            ),
            Err(e) => Shown::Rejected {
                stem: data.receipt.clone(),
                reason: format!("cannot fetch {receipt_url}: {e:?}"),
            },
        },
        None => verify_fetched(&receipt_url, start_fetch(&receipt_url), &data.public_key).await,
    };
    let shown = agree_with_early(shown).await;
    let catalog = catalog_fetched(&catalog_url, catalog_req, &data.catalog_sha256).await;
    record_timing(started);
    let same_bytes =
        matches!(&shown, Shown::Verified { sha256, .. } if *sha256 == data.receipt_sha256);
    let catalog_ok = catalog.is_ok();
    let catalog = catalog.unwrap_or_else(|e| {
        log_error(&e);
        Vec::new()
    });
    let app = move || {
        let ctx = ReplayCtx::provide_with(data, catalog, shown, false, actions());
        install_navigation(ctx);
        // Runs after hydration, so the first client render matches the static one.
        set_timeout(
            move || {
                ctx.browser_checked.set(true);
                if let Some(n) = step_from_hash() {
                    ctx.current.set(n);
                }
                // An address of an older site named the receipt in its
                // query: a receipt of this site opens its own page; any
                // other is fetched, verified and shown (or refused) here.
                if let Some(url) = query_param("receipt") {
                    let stem = stem_of(&url);
                    match (ctx.entry(&stem), web_sys::window()) {
                        (Some(_), Some(w)) => {
                            let page = ctx.data.with_value(|d| d.page_href(&stem));
                            let _ = w.location().replace(&page);
                        }
                        _ => leptos::task::spawn_local(load(ctx, url)),
                    }
                }
                mark_ready();
            },
            std::time::Duration::from_millis(0),
        );
        view! { <SitePage/> }
    };
    if same_bytes && catalog_ok {
        leptos::mount::hydrate_body(app);
    } else {
        // The static page shows bytes this browser did not verify: start over
        // from what it did verify (for a tampered file, the warning).
        document().body().expect("a body").set_inner_html("");
        leptos::mount::mount_to_body(app);
    }
}

/// Draw a compare page from receipts this browser verified: the pair in the
/// page's query (`?a=STEM&b=STEM`) or the pair it was built for.
#[wasm_bindgen]
pub async fn compare() {
    install_panic_hook();
    let data = match page_data() {
        Ok(data) => data,
        Err(e) => return log_error(&e),
    };
    let started = now_ms();
    let catalog_url = data.catalog_href();
    let catalog_req = start_fetch(&catalog_url);
    let pair: ComparePair = match read_json(COMPARE_PAIR_ID) {
        Ok(pair) => pair,
        Err(e) => return log_error(&e),
    };
    let (left, right) = (pair.left, pair.right);
    let left = query_param("a")
        .filter(|s| trust::plain_stem(s))
        .unwrap_or(left);
    let right = query_param("b")
        .filter(|s| trust::plain_stem(s))
        .unwrap_or(right);
    let (lu, ru) = (data.receipt_href(&left), data.receipt_href(&right));
    let (lr, rr) = (start_fetch(&lu), start_fetch(&ru));
    let left = verify_fetched(&lu, lr, &data.public_key).await;
    let right = verify_fetched(&ru, rr, &data.public_key).await;
    let catalog = catalog_fetched(&catalog_url, catalog_req, &data.catalog_sha256)
        .await
        .unwrap_or_else(|e| {
            log_error(&e);
            Vec::new()
        });
    record_timing(started);
    let Some(main) = document().get_element_by_id("main") else {
        return log_error("no main element");
    };
    let main: web_sys::HtmlElement = main.unchecked_into();
    main.set_inner_html("");
    leptos::mount::mount_to(main, move || {
        let app = CompareApp {
            data,
            catalog,
            left,
            right,
            browser_checked: true,
        };
        view! { <ComparePage app=app/> }
    })
    .forget();
    mark_ready();
}

/// Mount the replay of the receipt at `receipt_url`, verified with the key at
/// `public_key_url`, into `element`. `lang` is `en` or `it`; `sync_url` lets
/// the replay write `#step-N` into the host page's address. A receipt or key
/// that cannot be fetched is an error (the element's `data-kvw-error`, set
/// by `embed.js`); one that does not verify mounts its warning, never a
/// replay, and puts the reason in `data-kvw-error` too (`site/EMBED.md`).
#[wasm_bindgen]
pub async fn mount_to(
    element: web_sys::HtmlElement,
    receipt_url: String,
    public_key_url: String,
    lang: String,
    sync_url: bool,
) -> Result<(), JsValue> {
    install_panic_hook();
    let lang = speaks(Lang::from_tag(&lang)).map_err(|e| JsValue::from_str(&e))?;
    let public_key = fetch_text(&public_key_url)
        .await
        .map_err(|e| JsValue::from_str(&e))?;
    let stem = stem_of(&receipt_url);
    let bytes = fetch_bytes(&receipt_url)
        .await
        .map_err(|e| JsValue::from_str(&e))?;
    let shown = trust::check_bytes(&stem, &bytes, &public_key);
    let refused = match &shown {
        Shown::Rejected { reason, .. } => Some(reason.clone()),
        _ => None,
    };
    let data = PageData {
        lang,
        root: String::new(),
        receipt: stem,
        narratives: Vec::new(),
        engine_source_base: DEFAULT_ENGINE_SOURCE_BASE.to_string(),
        receipt_sha256: String::new(),
        catalog_sha256: String::new(),
        public_key,
        upstream_doors: Vec::new(),
    };
    let _ = element.class_list().add_2("kvw-embed", "kvw-ready");
    // Arrow keys step the replay while it (or anything inside it) has focus.
    if !element.has_attribute("tabindex") {
        let _ = element.set_attribute("tabindex", "0");
    }
    let host = element.clone();
    leptos::mount::mount_to(element.clone(), move || {
        let ctx = ReplayCtx::provide_with(data, Vec::new(), shown, !sync_url, actions());
        ctx.browser_checked.set(true);
        let keys =
            Closure::<dyn Fn(web_sys::KeyboardEvent)>::new(move |ev: web_sys::KeyboardEvent| {
                if let Some(delta) = arrow(&ev) {
                    ev.prevent_default();
                    step_by(ctx, delta);
                }
            });
        let _ = host.add_event_listener_with_callback("keydown", keys.as_ref().unchecked_ref());
        keys.forget();
        view! { <div class="kvw-embed-root"><TrustBanner/><Replay/></div> }
    })
    .forget();
    match refused {
        Some(reason) => {
            let _ = element.set_attribute("data-kvw-error", &reason);
        }
        None => {
            let _ = element.set_attribute("data-kvw-ready", "1");
        }
    }
    Ok(())
}
