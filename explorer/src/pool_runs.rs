//! Arithmetic over page runs and ranges.
//!
//! A receipt describes a pool as runs of pages with the same writer and the
//! request's reserved, transferred and read pages as ranges. At walkthrough
//! scale the page grid draws one cell per page; at incident scale (10⁴ pages
//! and more) it must draw runs and ranges instead, and the text summary must
//! still say how many read pages belonged to someone else. Both need the same
//! interval arithmetic, kept here, away from any markup.

use kvw_evidence::{PageRange, PageRun, PageView, WriterClass};

/// Above this many pages the grid draws aggregated runs, never single cells.
pub const MAX_CELLS: u64 = 1024;

/// Whether a view is small enough to draw page by page.
pub fn draw_cells(view: &PageView) -> bool {
    view.pages_total <= MAX_CELLS
}

/// Pages in `[a_first, a_first+a_count)` ∩ `[b_first, b_first+b_count)`.
pub fn overlap(a_first: u64, a_count: u64, b_first: u64, b_count: u64) -> u64 {
    let start = a_first.max(b_first);
    let end = (a_first + a_count).min(b_first + b_count);
    end.saturating_sub(start)
}

/// Total pages covered by ranges.
pub fn total(ranges: &[PageRange]) -> u64 {
    ranges.iter().map(|r| r.count).sum()
}

/// Whether page `p` lies in any of `ranges`.
pub fn contains(ranges: &[PageRange], p: u64) -> bool {
    ranges.iter().any(|r| r.contains(p))
}

/// Where page `p` sits in the page table `ranges` lists (0 for its first
/// entry), if it is one of them.
pub fn table_slot(ranges: &[PageRange], p: u64) -> Option<u64> {
    let mut before = 0;
    for r in ranges {
        if r.contains(p) {
            let offset = if r.down { r.first - p } else { p - r.first };
            return Some(before + offset);
        }
        before += r.count;
    }
    None
}

/// The run that covers page `p`, if any.
pub fn run_at(runs: &[PageRun], p: u64) -> Option<&PageRun> {
    runs.iter().find(|r| p >= r.first && p < r.first + r.count)
}

/// How many pages of `ranges` fall in runs of class `class`.
pub fn pages_of_class(view: &PageView, ranges: &[PageRange], class: WriterClass) -> u64 {
    view.runs
        .iter()
        .filter(|run| run.class == class)
        .map(|run| {
            ranges
                .iter()
                .map(|r| overlap(run.first, run.count, r.low(), r.count))
                .sum::<u64>()
        })
        .sum()
}

/// `12–19` or `12` for one range, `19→12` for one that counts down.
pub fn range_label(range: &PageRange) -> String {
    match (range.count, range.down) {
        (0 | 1, _) => range.first.to_string(),
        (_, false) => format!("{}–{}", range.first, range.end() - 1),
        (_, true) => format!("{}→{}", range.first, range.low()),
    }
}

/// Ranges sorted by first page with overlapping or touching ones merged:
/// the set of pages, without the page-table order.
pub fn merged(ranges: &[PageRange]) -> Vec<PageRange> {
    let mut sorted: Vec<PageRange> = ranges
        .iter()
        .filter(|r| r.count > 0)
        .map(PageRange::ascending)
        .collect();
    sorted.sort_by_key(|r| r.first);
    let mut out: Vec<PageRange> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.first <= last.end() => {
                last.count = last.end().max(r.end()) - last.first;
            }
            _ => out.push(r),
        }
    }
    out
}

/// The first run of `ranges` that counts down, as its label (`7→5`) and its
/// pages spelled out (`7, 6, 5`; a long run shows its two ends).
pub fn first_down_run(ranges: &[PageRange]) -> Option<(String, String)> {
    let run = ranges.iter().find(|r| r.down && r.count > 1)?;
    let pages: Vec<String> = run.pages().map(|p| p.to_string()).collect();
    let listed = if pages.len() <= 4 {
        pages.join(", ")
    } else {
        format!("{}, {}, …, {}", pages[0], pages[1], pages[pages.len() - 1])
    };
    Some((range_label(run), listed))
}

/// Comma-separated labels of ranges in page-table order, `—` when there are
/// none; long lists fall back to the merged set of pages.
pub fn ranges_label(ranges: &[PageRange]) -> String {
    const MAX_LABELS: usize = 8;
    if ranges.is_empty() {
        return "—".to_string();
    }
    let ordered: Vec<String> = ranges.iter().map(range_label).collect();
    if ordered.len() <= MAX_LABELS {
        return ordered.join(", ");
    }
    let set = merged(ranges);
    let shown: Vec<String> = set.iter().take(MAX_LABELS).map(range_label).collect();
    let more = set.len().saturating_sub(MAX_LABELS);
    if more > 0 {
        format!("{} … (+{more})", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// Short CSS-friendly name of a writer class.
pub fn class_slug(class: WriterClass) -> &'static str {
    match class {
        WriterClass::ThisRequest => "this",
        WriterClass::OtherTenant => "other",
        WriterClass::SameTenant => "same",
        WriterClass::NeverWritten => "never",
    }
}

/// Glyph drawn in each cell, so colour is never the only signal. Shapes, not
/// letters: an `O` for "other" read as a zero next to page numbers.
pub fn class_letter(class: WriterClass) -> &'static str {
    match class {
        WriterClass::ThisRequest => "✓",
        WriterClass::OtherTenant => "✕",
        WriterClass::SameTenant => "≈",
        WriterClass::NeverWritten => "·",
    }
}

/// Horizontal position and width, in percent of the pool, for a bar segment.
/// Tiny ranges keep a visible minimum width.
pub fn bar_geometry(first: u64, count: u64, total: u64) -> (f64, f64) {
    let total = total.max(1) as f64;
    let left = first as f64 / total * 100.0;
    let width = (count as f64 / total * 100.0).max(0.4);
    (left.min(99.6), width.min(100.0 - left.min(99.6)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvw_evidence::PoolSide;

    #[test]
    fn a_page_s_slot_follows_the_page_table_order() {
        // Pages 7, 6, 5, then 0..=4: the order of the walkthrough's table.
        let table = [
            PageRange {
                first: 7,
                count: 3,
                down: true,
            },
            PageRange::up(0, 5),
        ];
        let slots: Vec<Option<u64>> = (0..9).map(|p| table_slot(&table, p)).collect();
        assert_eq!(
            slots,
            [3, 4, 5, 6, 7, 2, 1, 0]
                .map(Some)
                .into_iter()
                .chain([None])
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn counts_foreign_pages_read() {
        let view = PageView {
            pool: PoolSide::Decode,
            pages_total: 16,
            page_size: 4,
            runs: vec![
                PageRun {
                    first: 0,
                    count: 1,
                    class: WriterClass::ThisRequest,
                    writer: None,
                },
                PageRun {
                    first: 1,
                    count: 7,
                    class: WriterClass::OtherTenant,
                    writer: None,
                },
                PageRun {
                    first: 8,
                    count: 8,
                    class: WriterClass::NeverWritten,
                    writer: None,
                },
            ],
            reserved: vec![PageRange::up(0, 8)],
            transferred: vec![PageRange::up(0, 1)],
            read: vec![PageRange::up(0, 8)],
        };
        assert_eq!(
            pages_of_class(&view, &view.read, WriterClass::OtherTenant),
            7
        );
        assert_eq!(
            pages_of_class(&view, &view.read, WriterClass::ThisRequest),
            1
        );
        assert_eq!(ranges_label(&view.reserved), "0–7");
        assert!(draw_cells(&view));
        let lifo = vec![PageRange::down(8, 4), PageRange::up(0, 5)];
        assert_eq!(ranges_label(&lifo), "8→5, 0–4");
        assert_eq!(
            first_down_run(&lifo),
            Some(("8→5".to_string(), "8, 7, 6, 5".to_string()))
        );
        assert_eq!(
            first_down_run(&[PageRange::down(100, 40)]).map(|r| r.1),
            Some("100, 99, …, 61".to_string())
        );
        assert_eq!(first_down_run(&view.reserved), None);
        assert_eq!(merged(&lifo), vec![PageRange::up(0, 9)]);
        assert!(contains(&lifo, 5) && contains(&lifo, 8) && !contains(&lifo, 9));
    }
}
