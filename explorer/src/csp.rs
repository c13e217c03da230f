//! The pages' Content-Security-Policy and the inline code it admits.
//!
//! A page of the site runs its own scripts only: the inline checks written
//! here (admitted by their SHA-256, nothing else inline runs), the browser
//! build from `pkg/` (`'self'`), its WebAssembly (`'wasm-unsafe-eval'`), and
//! fetches from its own origin. Styles come from `style.css`, the embed
//! example's one inline style block (by hash) and `style` attributes (page
//! bars are positioned by percent). Nothing else: no other origin, no
//! frames, no forms, no `<base>`. Every generated page carries the policy
//! as a `<meta>` element ([`meta`]) and `kvw serve` sends the same policy
//! as a header ([`policy`]), so a file served elsewhere keeps it.
//!
//! The inline code lives here so that the policy is computed from exactly
//! what the pages inline; a test builds a site and checks every inline
//! script and style of every page against it.

use std::sync::LazyLock;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::i18n::Lang;

/// File names the hydrate build produces (see `scripts/build-wasm.sh`), in
/// its folder and, for the Italian build, in its `it/` subfolder
/// ([`crate::i18n::pkg_folder`]).
pub const WASM_JS: &str = "kvw_explorer.js";
pub const WASM_BIN: &str = "kvw_explorer_bg.wasm";

/// Set before the first paint when scripts run, so the style sheet lays the
/// page out as the hydrated replay will (one step at a time) and hydration
/// moves nothing; without scripts the class never appears and every step
/// reads top to bottom.
///
/// The same script makes Previous, Next and the arrow keys work before the
/// browser build arrives (`early_steps.js`).
pub const JS_FLAG: &str = concat!(
    "<script>document.documentElement.classList.add(\"kvw-js\");",
    include_str!("early_steps.js"),
    "</script>"
);

/// The inline check that fetches the page's receipt at once and verifies it
/// with WebCrypto while the wasm downloads (see the file's opening comment).
/// It sits before the style sheet link: a classic script after a pending
/// style sheet would wait for it, a whole round trip on a slow link.
pub const EARLY_CHECK: &str = include_str!("early_check.js");
/// The WebCrypto receipt check both inline checks call.
pub const RECEIPT_VERIFY: &str = include_str!("receipt_verify.js");
/// The browser check of a static result page's receipts.
pub const RESULTS_CHECK: &str = include_str!("results_check.js");

/// The embed example page; its one inline `<style>` is admitted by hash.
pub const EMBED_EXAMPLE: &str = include_str!("../../site/embed-example.html");

/// Page roots the pages use: the site's top (`index.html`) and a language
/// folder.
const ROOTS: [&str; 2] = ["./", "../"];
/// Entry points of the browser build a page starts.
const ENTRIES: [&str; 2] = ["hydrate", "compare"];

/// `<script>` with the early check of a replay page.
pub fn early_check_script() -> String {
    format!("<script>{RECEIPT_VERIFY}{EARLY_CHECK}</script>")
}

/// `<script>` with the check of a static result page's receipts.
pub fn results_check_script() -> String {
    format!("<script>{RECEIPT_VERIFY}{RESULTS_CHECK}</script>")
}

/// The module script that starts the browser side: `entry` is `hydrate`
/// (replay pages) or `compare` (compare pages); the build loaded is the
/// one of the page's language.
///
/// On a replay page the wasm download waits until the inline check's
/// receipt has arrived (`window.kvwReceipt`), so on a slow link the two do
/// not share the bandwidth and the badge is not held up by the wasm.
pub fn boot_script(root: &str, lang: Lang, entry: &str) -> String {
    let pkg = format!("{root}pkg/{}", crate::i18n::pkg_folder(lang));
    format!(
        r#"<script type="module">import init, {{ {entry} }} from "{pkg}{WASM_JS}";
Promise.resolve(window.kvwReceipt).catch(() => {{}}).then(() => init({{ module_or_path: "{pkg}{WASM_BIN}" }})).then(() => {entry}()).catch((e) => {{ document.documentElement.dataset.kvwError = String(e); console.error(e); }});</script>"#
    )
}

/// What sits between an element's opening and closing tag.
fn inner<'a>(element: &'a str, tag: &str) -> &'a str {
    let open_end = element.find('>').map_or(0, |i| i + 1);
    let close = format!("</{tag}>");
    let end = element.rfind(&close).unwrap_or(element.len());
    element.get(open_end..end).unwrap_or_default()
}

/// `'sha256-…'` of an inline element's text.
pub fn source_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Every inline script a page of the site may carry.
fn inline_scripts() -> Vec<String> {
    let mut scripts = vec![
        JS_FLAG.to_string(),
        early_check_script(),
        results_check_script(),
    ];
    for root in ROOTS {
        for lang in Lang::ALL {
            for entry in ENTRIES {
                scripts.push(boot_script(root, lang, entry));
            }
        }
    }
    scripts
}

/// The embed example's inline style blocks.
fn inline_styles() -> Vec<&'static str> {
    EMBED_EXAMPLE
        .match_indices("<style>")
        .filter_map(|(start, _)| {
            let rest = &EMBED_EXAMPLE[start..];
            let end = rest.find("</style>")? + "</style>".len();
            Some(&rest[..end])
        })
        .collect()
}

static POLICY: LazyLock<String> = LazyLock::new(|| {
    let scripts: Vec<String> = inline_scripts()
        .iter()
        .map(|s| source_hash(inner(s, "script")))
        .collect();
    let styles: Vec<String> = inline_styles()
        .iter()
        .map(|s| source_hash(inner(s, "style")))
        .collect();
    format!(
        "default-src 'none'; script-src 'self' 'wasm-unsafe-eval' {}; style-src 'self' {}; \
         style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
         base-uri 'none'; form-action 'self'",
        scripts.join(" "),
        styles.join(" ")
    )
});

/// The policy, as `kvw serve` sends it in `Content-Security-Policy`.
pub fn policy() -> &'static str {
    &POLICY
}

/// The policy as the `<meta>` element every page carries first in `<head>`.
pub fn meta() -> String {
    // The policy holds quotes and no `"`, `<`, `>` or `&`: safe as written.
    format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        policy()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_admits_each_inline_script_by_hash_and_nothing_inline_else() {
        let p = policy();
        assert!(!p.contains('"') && !p.contains('<') && !p.contains('&'));
        assert!(JS_FLAG.contains("classList.add(\"kvw-js\")"));
        assert!(p.contains(&source_hash(inner(JS_FLAG, "script"))));
        assert_eq!(p.matches("'sha256-").count(), 3 + 2 * 2 * 2 + 1);
        let script_src = p
            .split(';')
            .find(|d| d.trim().starts_with("script-src "))
            .unwrap();
        assert!(!script_src.contains("'unsafe-inline'"));
        assert!(!script_src.contains("'unsafe-eval'"));
        assert!(p.starts_with("default-src 'none'"));
    }
}
