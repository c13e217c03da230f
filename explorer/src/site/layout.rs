//! Where each file of a site goes, and the names a receipt may not take.
//!
//! A receipt `receipts/<stem>.json` becomes pages `en/<stem>.html` and
//! `it/<stem>.html`, in the folders that also hold the site's own pages:
//! the gates table, the compare picker and its pairs, the Italian receipts
//! index. A receipt named after one of them would take its place, so those
//! stems are reserved ([`reserved`]) and refused before anything is
//! written; the writer's create-new rule catches any clash this list misses.

use crate::i18n::Lang;

/// File name of the gates page in each language folder.
pub const GATES_PAGE: &str = "gates.html";
/// File name of the compare picker in each language folder.
pub const COMPARE_PAGE: &str = "compare.html";
/// Prefix of a compare page (`compare-<stem>.html`).
pub const COMPARE_PREFIX: &str = "compare-";

/// Where the receipts index of `lang` lives: `receipts/index.html` in
/// English (beside the receipts, since static servers list no folders),
/// `it/receipts.html` in Italian (beside the Italian pages).
pub fn receipts_index_path(lang: Lang) -> &'static str {
    match lang {
        Lang::En => "receipts/index.html",
        Lang::It => "it/receipts.html",
    }
}

/// The page of receipt `stem` in `lang`.
pub fn receipt_page(lang: Lang, stem: &str) -> String {
    format!("{}/{stem}.html", lang.code())
}

/// The compare page of `stem` (against its baseline) in `lang`.
pub fn compare_page(lang: Lang, stem: &str) -> String {
    format!("{}/{COMPARE_PREFIX}{stem}.html", lang.code())
}

/// The stored receipt `stem`.
pub fn receipt_file(stem: &str) -> String {
    format!("receipts/{stem}.json")
}

/// The page of the site (in each language folder) that a receipt named
/// `stem` would replace, if any.
pub fn reserved(stem: &str) -> Option<String> {
    let page = format!("{stem}.html");
    let it_index = receipts_index_path(Lang::It);
    let own = [
        GATES_PAGE,
        COMPARE_PAGE,
        crate::report_page::REPORT_PAGE,
        it_index.rsplit('/').next().unwrap_or(it_index),
    ];
    (own.contains(&page.as_str()) || stem.starts_with(COMPARE_PREFIX)).then_some(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_pages_are_reserved_and_receipt_names_are_not() {
        for stem in [
            "gates",
            "receipts",
            "compare",
            "report",
            "compare-incident-walkthrough-fixes-none",
        ] {
            assert!(reserved(stem).is_some(), "{stem}");
        }
        for stem in [
            "gates-fixes-none",
            "incident-walkthrough-fixes-none",
            "index",
            "scenario-late_write_corrupts_next_tenant-fixes-all",
        ] {
            assert_eq!(reserved(stem), None, "{stem}");
        }
    }
}
