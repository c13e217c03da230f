//! Browser entry points (the `hydrate` build).
//!
//! [`hydrate`] runs on a replay page: it reads the page data the static
//! renderer embedded, verifies the embedded receipt with the evidence crate
//! (compiled to wasm) and only then hydrates the server-rendered body with
//! the same components. If the browser's own check fails, the static replay
//! is thrown away and replaced by the warning. After hydration it adds
//! keyboard arrows, `#step-N` deep links and in-place receipt switching, and
//! finally marks the root element `kvw-ready` (the style sheet reveals the
//! script-only controls; tests wait for the flag).
//!
//! [`mount_to`] is the embedding entry point behind `<kvw-replay>`: it fetches
//! a receipt and a key, verifies, and mounts the replay into any element.

use leptos::prelude::*;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use crate::components::replay::Replay;
use crate::components::shell::SitePage;
use crate::components::trust_banner::TrustBanner;
use crate::components::ReplayCtx;
use crate::i18n::Lang;
use crate::links::DEFAULT_ENGINE_SOURCE_BASE;
use crate::model::{PageData, Shown, PAGE_DATA_ID};
use crate::trust;

fn document() -> web_sys::Document {
    web_sys::window()
        .and_then(|w| w.document())
        .expect("a document")
}

fn log_error(message: &str) {
    web_sys::console::error_1(&JsValue::from_str(message));
}

fn read_page_data() -> Result<PageData, String> {
    let text = document()
        .get_element_by_id(PAGE_DATA_ID)
        .and_then(|e| e.text_content())
        .ok_or("no page data")?;
    serde_json::from_str(&text).map_err(|e| format!("page data: {e}"))
}

/// Fetch a URL (relative to the page) as text.
async fn fetch_text(url: &str) -> Result<String, String> {
    let window = web_sys::window().ok_or("no window")?;
    let js = |e: JsValue| e.as_string().unwrap_or_else(|| format!("{e:?}"));
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(url))
        .await
        .map_err(|e| format!("cannot fetch {url}: {}", js(e)))?
        .dyn_into()
        .map_err(|_| "not a response".to_string())?;
    if !response.ok() {
        return Err(format!("HTTP {} for {url}", response.status()));
    }
    let text = JsFuture::from(response.text().map_err(js)?)
        .await
        .map_err(js)?;
    text.as_string()
        .ok_or_else(|| "response is not text".to_string())
}

/// `stem` of a receipt URL: the last path segment without `.json`.
fn stem_of(url: &str) -> String {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let last = path.rsplit('/').next().unwrap_or(path);
    last.strip_suffix(".json").unwrap_or(last).to_string()
}

/// A high-resolution clock in milliseconds, for the verification timing.
fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map_or(0.0, |p| p.now())
}

fn set_flag(name: &str, on: bool) {
    if let Some(root) = document().document_element() {
        if on {
            let _ = root.set_attribute(name, "1");
        } else {
            let _ = root.remove_attribute(name);
        }
    }
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
                js_sys::decode_uri_component(v)
                    .ok()
                    .and_then(|s| s.as_string())
            })
            .flatten()
    })
}

/// Fetch, verify and show the receipt at `url`; optionally push `page` to history.
async fn load(ctx: ReplayCtx, url: String, page: Option<String>) {
    let stem = stem_of(&url);
    set_flag("data-kvw-loading", true);
    ctx.shown.set(Shown::Loading { stem: stem.clone() });
    let key = ctx.data.with_value(|d| d.public_key.clone());
    let shown = match fetch_text(&url).await {
        Ok(text) => trust::check(&stem, &text, &key),
        Err(reason) => Shown::Rejected { stem, reason },
    };
    ctx.shown.set(shown);
    ctx.browser_checked.set(true);
    if let (Some(page), Some(history)) = (page, web_sys::window().and_then(|w| w.history().ok())) {
        let _ = history.push_state_with_url(&JsValue::NULL, "", Some(&page));
    }
    set_flag("data-kvw-loading", false);
}

/// Show the receipt `stem` of this site in place.
pub fn switch_to(ctx: ReplayCtx, stem: String, push: bool) {
    let (url, page) = ctx.data.with_value(|d| {
        let url = d.receipt_href(&stem);
        // Pages in a language folder have siblings in the same folder. The
        // site's index sits one level up, where relative links would break
        // if the address moved into a folder, so it names the receipt in its
        // query instead (which `hydrate` understands on reload).
        let page = if d.root.is_empty() || d.root == "./" {
            format!("?receipt={url}")
        } else {
            d.page_href(&stem)
        };
        (url, page)
    });
    leptos::task::spawn_local(load(ctx, url, push.then_some(page)));
}

/// Keyboard arrows and `#step-N` navigation.
fn install_navigation(ctx: ReplayCtx) {
    let keys = window_event_listener(leptos::ev::keydown, move |ev| {
        if ev.alt_key() || ev.ctrl_key() || ev.meta_key() {
            return;
        }
        let typing = ev
            .target()
            .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
            .is_some_and(|el| matches!(el.tag_name().as_str(), "INPUT" | "TEXTAREA" | "SELECT"));
        let delta = match ev.key().as_str() {
            "ArrowRight" => 1,
            "ArrowLeft" => -1,
            _ => return,
        };
        if typing {
            return;
        }
        ev.prevent_default();
        ctx.go(ctx.current.get_untracked() as i32 + delta);
        set_hash(ctx.current.get_untracked());
    });
    let hashes = window_event_listener(leptos::ev::hashchange, move |_| {
        if let Some(n) = step_from_hash() {
            ctx.current.set(n);
        }
    });
    // Back and Forward after an in-place switch: show the receipt of the address.
    let history = window_event_listener(leptos::ev::popstate, move |_| {
        let path = web_sys::window()
            .and_then(|w| w.location().pathname().ok())
            .unwrap_or_default();
        let page = path.rsplit('/').next().unwrap_or_default();
        let from_query = query_param("receipt").map(|url| stem_of(&url));
        let stem = from_query
            .as_deref()
            .unwrap_or(page.strip_suffix(".html").unwrap_or(page));
        let (known, first) = ctx
            .data
            .with_value(|d| (d.entry(stem).is_some(), d.receipt.clone()));
        let stem = if known { stem.to_string() } else { first };
        if ctx.shown.with_untracked(|s| s.stem() != stem) {
            switch_to(ctx, stem, false);
        }
    });
    // The listeners live as long as the page.
    std::mem::forget(keys);
    std::mem::forget(hashes);
    std::mem::forget(history);
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| log_error(&info.to_string())));
}

/// Hydrate a replay page (called by the page's module script).
#[wasm_bindgen]
pub fn hydrate() {
    install_panic_hook();
    let data = match read_page_data() {
        Ok(data) => data,
        Err(e) => return log_error(&e),
    };
    let started = now_ms();
    let shown = trust::check(&data.receipt, &data.envelope, &data.public_key);
    if let Some(root) = document().document_element() {
        let _ = root.set_attribute("data-kvw-verify-ms", &format!("{:.2}", now_ms() - started));
    }
    let verified = matches!(shown, Shown::Verified { .. });
    let app = move || {
        let ctx = ReplayCtx::provide(data, shown);
        install_navigation(ctx);
        // Runs after hydration, so the first client render matches the static one.
        set_timeout(
            move || {
                if let Some(n) = step_from_hash() {
                    ctx.current.set(n);
                }
                ctx.browser_checked.set(true);
                if let Some(url) = query_param("receipt") {
                    leptos::task::spawn_local(load(ctx, url, None));
                }
                if let Some(root) = document().document_element() {
                    let _ = root.class_list().add_1("kvw-ready");
                }
                set_flag("data-kvw-ready", true);
            },
            std::time::Duration::from_millis(0),
        );
        view! { <SitePage/> }
    };
    if verified {
        leptos::mount::hydrate_body(app);
    } else {
        // The static page may claim more than this browser can confirm: start over.
        document().body().expect("a body").set_inner_html("");
        leptos::mount::mount_to_body(app);
    }
}

/// Mount the replay of the receipt at `receipt_url`, verified with the key at
/// `public_key_url`, into `element`. `lang` is `en` or `it`.
#[wasm_bindgen]
pub async fn mount_to(
    element: web_sys::HtmlElement,
    receipt_url: String,
    public_key_url: String,
    lang: String,
) -> Result<(), JsValue> {
    install_panic_hook();
    let public_key = fetch_text(&public_key_url)
        .await
        .map_err(|e| JsValue::from_str(&e))?;
    let (envelope, shown) = match fetch_text(&receipt_url).await {
        Ok(text) => {
            let shown = trust::check(&stem_of(&receipt_url), &text, &public_key);
            (text, shown)
        }
        Err(reason) => (
            String::new(),
            Shown::Rejected {
                stem: stem_of(&receipt_url),
                reason,
            },
        ),
    };
    let data = PageData {
        lang: Lang::from_tag(&lang),
        root: String::new(),
        receipt: stem_of(&receipt_url),
        catalog: Vec::new(),
        narratives: Vec::new(),
        engine_source_base: DEFAULT_ENGINE_SOURCE_BASE.to_string(),
        envelope,
        public_key,
    };
    element.set_inner_html("");
    let _ = element.class_list().add_2("kvw-embed", "kvw-ready");
    leptos::mount::mount_to(element.clone(), move || {
        let ctx = ReplayCtx::provide(data, shown);
        ctx.browser_checked.set(true);
        view! { <TrustBanner/><Replay/> }
    })
    .forget();
    let _ = element.set_attribute("data-kvw-ready", "1");
    Ok(())
}
