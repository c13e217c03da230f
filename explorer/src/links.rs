//! Links from a step to the source lines it models.
//!
//! Upstream references point at the SGLang commit the public analysis cites,
//! so a link never drifts as upstream moves; engine references point at the
//! commit recorded in the receipt, under a configurable repository base.

use kvw_evidence::{SourceOrigin, SourceRef, UPSTREAM_COMMIT, UPSTREAM_REPO};

/// Default base of the engine's own repository.
pub const DEFAULT_ENGINE_SOURCE_BASE: &str = "https://github.com/kvwitness/kvwitness";

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
