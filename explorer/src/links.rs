//! Links from a page to the web: the source lines a step models, the
//! upstream test a scenario mirrors.
//!
//! Upstream references point at the SGLang commit the public analysis cites,
//! so a link never drifts as upstream moves; engine references point at the
//! commit recorded in the receipt, under a configurable repository base.
//! Every address that comes from a receipt or a flag goes through
//! [`web_href`] before it becomes an `href`: a plain `http(s)://` URL or no
//! link at all, so a signed `javascript:` or `data:` address is shown as
//! text, never followed.

use kvw_evidence::{SourceOrigin, SourceRef, UPSTREAM_COMMIT, UPSTREAM_REPO};

/// Default base of the engine's own repository.
pub const DEFAULT_ENGINE_SOURCE_BASE: &str = "https://github.com/kvwitness/kvwitness";

/// Longest address turned into a link.
pub const MAX_HREF: usize = 400;

/// `url` if it is a plain `http://` or `https://` address (a host after the
/// scheme, no whitespace, control characters, quotes, angle brackets or
/// backslashes, at most [`MAX_HREF`] bytes); `None` for anything else.
pub fn web_href(url: &str) -> Option<&str> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let plain = !rest.is_empty()
        && !rest.starts_with('/')
        && url.len() <= MAX_HREF
        && !url
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "\"'<>`\\".contains(c));
    plain.then_some(url)
}

/// `#L<a>-L<b>`, `#L<a>` or nothing.
fn line_fragment(source: &SourceRef) -> String {
    match (source.line_start, source.line_end) {
        (Some(a), Some(b)) if b > a => format!("#L{a}-L{b}"),
        (Some(a), _) => format!("#L{a}"),
        _ => String::new(),
    }
}

/// The browsable URL of a source reference.
pub fn source_url(source: &SourceRef, engine_base: &str, engine_commit: &str) -> String {
    let (base, commit) = match source.origin {
        SourceOrigin::Upstream => (UPSTREAM_REPO, UPSTREAM_COMMIT),
        SourceOrigin::Engine => (engine_base.trim_end_matches('/'), engine_commit),
    };
    format!(
        "{base}/blob/{commit}/{}{}",
        source.path.trim_start_matches('/'),
        line_fragment(source)
    )
}

/// `path:a–b` for display.
pub fn source_label(source: &SourceRef) -> String {
    match (source.line_start, source.line_end) {
        (Some(a), Some(b)) if b > a => format!("{}:{a}–{b}", source.path),
        (Some(a), _) => format!("{}:{a}", source.path),
        _ => source.path.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_web_addresses_become_links() {
        for good in [
            "https://github.com/sgl-project/sglang",
            "http://x.example/a?b#c",
        ] {
            assert_eq!(web_href(good), Some(good));
        }
        for bad in [
            "javascript:alert(1)",
            "JAVASCRIPT:alert(1)",
            " https://x.example",
            "https://",
            "https:///x",
            "//x.example",
            "data:text/html,<script>",
            "vbscript:msgbox",
            "https://x.example/\" onmouseover=\"alert(1)",
            "https://x.example/\u{1b}[2J",
        ] {
            assert_eq!(web_href(bad), None, "{bad:?}");
        }
        assert_eq!(
            web_href(&format!("https://x.example/{}", "a".repeat(MAX_HREF))),
            None
        );
    }

    #[test]
    fn upstream_links_are_pinned() {
        let source = SourceRef {
            origin: SourceOrigin::Upstream,
            path: "python/sglang/srt/managers/schedule_batch.py".into(),
            line_start: Some(2053),
            line_end: Some(2072),
            label: "set_finish_with_abort".into(),
        };
        assert_eq!(
            source_url(&source, DEFAULT_ENGINE_SOURCE_BASE, "abc"),
            "https://github.com/sgl-project/sglang/blob/8f3d6944b76c428d884582cb6c82a39db1465360/python/sglang/srt/managers/schedule_batch.py#L2053-L2072"
        );
        let engine = SourceRef {
            origin: SourceOrigin::Engine,
            path: "engine/src/req.rs".into(),
            line_start: Some(10),
            line_end: None,
            label: String::new(),
        };
        assert_eq!(
            source_url(&engine, "https://example.org/x/", "abc"),
            "https://example.org/x/blob/abc/engine/src/req.rs#L10"
        );
    }
}
