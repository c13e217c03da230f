//! The decode pool as a page grid.
//!
//! Each page is drawn with its writer class as colour *and* as a letter, and
//! the request's reserved, transferred and read pages as outline, arrow and
//! underline, explained by a text legend. Above [`pool_runs::MAX_CELLS`] pages
//! the grid switches to proportional bars of runs and ranges, so the
//! incident-scale pool (tens of thousands of pages) never becomes tens of
//! thousands of elements. A sentence under the grid says the same in words.

use kvw_evidence::{PageRange, PageView, WriterClass};
use leptos::either::Either;
use leptos::prelude::*;

use crate::fixed::fixed;
use crate::i18n::Lang;
use crate::pool_runs::{self, class_letter, class_slug};

fn class_label(class: WriterClass, lang: Lang) -> &'static str {
    match class {
        WriterClass::ThisRequest => {
            lang.pick("written by this request", "scritta da questa richiesta")
        }
        WriterClass::OtherTenant => {
            lang.pick("left by another tenant", "lasciata da un altro tenant")
        }
        WriterClass::SameTenant => {
            lang.pick("left by the same tenant", "lasciata dallo stesso tenant")
        }
        WriterClass::NeverWritten => lang.pick("never written", "mai scritta"),
    }
}

const CLASSES: [WriterClass; 4] = [
    WriterClass::ThisRequest,
    WriterClass::OtherTenant,
    WriterClass::SameTenant,
    WriterClass::NeverWritten,
];

#[component]
fn Legend(lang: Lang) -> impl IntoView {
    view! {
        <ul class="legend">
            {CLASSES.into_iter().map(|c| view! {
                <li><span class=format!("pg c-{}", class_slug(c)) aria-hidden="true">{class_letter(c)}</span>" "{class_label(c, lang)}</li>
            }).collect_view()}
            <li><span class="pg c-never r" aria-hidden="true"></span>" "{lang.pick("reserved for this request (thick outline; the number is its place in the page table)", "prenotata per questa richiesta (bordo spesso; il numero è il suo posto nella tabella delle pagine)")}</li>
            <li><span class="pg c-never t" aria-hidden="true"></span>" "{lang.pick("written by the transfer (yellow corner)", "scritta dal trasferimento (angolo giallo)")}</li>
            <li><span class="pg c-never x" aria-hidden="true"></span>" "{lang.pick("read by decode attention (underline)", "letta dall'attenzione di decode (sottolineatura)")}</li>
        </ul>
    }
}

/// One cell per page: for walkthrough-sized pools.
#[component]
fn Cells(view: PageView, lang: Lang) -> impl IntoView {
    let cells = (0..view.pages_total)
        .map(|p| {
            let run = pool_runs::run_at(&view.runs, p);
            let class = run.map_or(WriterClass::NeverWritten, |r| r.class);
            let mut css = format!("pg c-{}", class_slug(class));
            for (ranges, flag) in [
                (&view.reserved, " r"),
                (&view.transferred, " t"),
                (&view.read, " x"),
            ] {
                if pool_runs::contains(ranges, p) {
                    css.push_str(flag);
                }
            }
            let writer = run
                .and_then(|r| r.writer.as_ref())
                .map(|w| format!(" — {} / {} / gen {}", w.tenant, w.rid, w.generation))
                .unwrap_or_default();
            let title = format!(
                "{} {p}: {}{writer}",
                lang.pick("page", "pagina"),
                class_label(class, lang)
            );
            // The request's own pages carry their place in its page table,
            // the order the sentence below speaks in.
            let slot = pool_runs::table_slot(&view.reserved, p).map(|i| (i + 1).to_string());
            view! { <span class=css title=title data-slot=slot>{class_letter(class)}</span> }
        })
        .collect_view();
    view! { <div class="grid" aria-hidden="true">{cells}</div> }
}

#[component]
fn Bar(label: &'static str, segments: Vec<(u64, u64, String)>, total: u64) -> impl IntoView {
    view! {
        <div class="bar-row">
            <span class="bar-label">{label}</span>
            <span class="bar">
                {segments.into_iter().map(|(first, count, css)| {
                    let (left, width) = pool_runs::bar_geometry(first, count, total);
                    view! { <span class=css style=format!("left:{}%;width:{}%", fixed(left, 3), fixed(width, 3))></span> }
                }).collect_view()}
            </span>
        </div>
    }
}

fn range_segments(ranges: &[PageRange], css: &str) -> Vec<(u64, u64, String)> {
    pool_runs::merged(ranges)
        .iter()
        .map(|r| (r.first, r.count, css.to_string()))
        .collect()
}

/// Proportional bars of runs and ranges: for incident-sized pools.
#[component]
fn Bars(view: PageView, lang: Lang) -> impl IntoView {
    let total = view.pages_total;
    // Neighbouring runs of the same class share one segment: the bar shows
    // whose bytes lie where, not every change of writer.
    let mut runs: Vec<(u64, u64, WriterClass)> = Vec::new();
    for r in &view.runs {
        match runs.last_mut() {
            Some((first, count, class)) if *class == r.class && *first + *count == r.first => {
                *count += r.count
            }
            _ => runs.push((r.first, r.count, r.class)),
        }
    }
    let runs = runs
        .into_iter()
        .map(|(first, count, class)| (first, count, format!("seg c-{}", class_slug(class))))
        .collect();
    view! {
        <div class="bars" aria-hidden="true">
            <Bar label=lang.pick("writers", "autori") segments=runs total=total/>
            <Bar label=lang.pick("reserved", "prenotate") segments=range_segments(&view.reserved, "seg rng-r") total=total/>
            <Bar label=lang.pick("transferred", "trasferite") segments=range_segments(&view.transferred, "seg rng-t") total=total/>
            <Bar label=lang.pick("read", "lette") segments=range_segments(&view.read, "seg rng-x") total=total/>
        </div>
    }
}

/// The run table, for readers who cannot or prefer not to read the grid.
#[component]
fn RunTable(view: PageView, lang: Lang) -> impl IntoView {
    const MAX_ROWS: usize = 60;
    let hidden = view.runs.len().saturating_sub(MAX_ROWS);
    view! {
        <details class="runs">
            <summary>{lang.pick("Pages as a table", "Pagine in tabella")}" ("{view.runs.len()}")"</summary>
            <table>
                <thead><tr>
                    <th scope="col">{lang.pick("Pages", "Pagine")}</th>
                    <th scope="col">{lang.pick("Writer class", "Classe di autore")}</th>
                    <th scope="col">{lang.pick("Writer", "Autore")}</th>
                </tr></thead>
                <tbody>
                    {view.runs.iter().take(MAX_ROWS).map(|r| {
                        let writer = r.writer.as_ref().map(|w| format!("{} / {} / gen {}", w.tenant, w.rid, w.generation)).unwrap_or_else(|| "—".into());
                        view! { <tr>
                            <td>{pool_runs::range_label(&PageRange::up(r.first, r.count))}</td>
                            <td>{class_label(r.class, lang)}</td>
                            <td>{writer}</td>
                        </tr> }
                    }).collect_view()}
                </tbody>
            </table>
            {(hidden > 0).then(|| view! { <p>{format!("… {hidden} ")}{lang.pick("more runs", "altri gruppi")}</p> })}
        </details>
    }
}

/// What the grid shows, in one or two sentences.
fn summary(view: &PageView, lang: Lang) -> String {
    let decode = view.pool == kvw_evidence::PoolSide::Decode;
    let foreign = pool_runs::pages_of_class(view, &view.read, WriterClass::OtherTenant);
    let same = pool_runs::pages_of_class(view, &view.read, WriterClass::SameTenant);
    let (reserved, transferred, read) = (
        pool_runs::total(&view.reserved),
        pool_runs::total(&view.transferred),
        pool_runs::total(&view.read),
    );
    // A run counted down (`7→5`) is explained with the first one shown.
    let arrow = match pool_runs::first_down_run(&view.reserved) {
        Some((label, listed)) => match lang.spoken() {
            Lang::En => format!(", in page-table order; {label} means {listed}"),
            Lang::It => {
                format!(", nell'ordine della tabella delle pagine; {label} vuol dire {listed}")
            }
        },
        None => String::new(),
    };
    match lang.spoken() {
        Lang::En => format!(
            "{} reserved {reserved} page(s) for this request (pages {}{arrow}); the transfer wrote {transferred} (pages {}); attention read {read} (pages {}), of which {foreign} were left by another tenant and {same} by the same tenant.",
            if decode { "Decode" } else { "Prefill" },
            pool_runs::ranges_label(&view.reserved), pool_runs::ranges_label(&view.transferred), pool_runs::ranges_label(&view.read)
        ),
        Lang::It => format!(
            "{} ha prenotato {reserved} pagine per questa richiesta (pagine {}{arrow}); il trasferimento ne ha scritte {transferred} (pagine {}); l'attenzione ne ha lette {read} (pagine {}), di cui {foreign} lasciate da un altro tenant e {same} dallo stesso tenant.",
            if decode { "Il decode" } else { "Il prefill" },
            pool_runs::ranges_label(&view.reserved), pool_runs::ranges_label(&view.transferred), pool_runs::ranges_label(&view.read)
        ),
    }
}

#[component]
pub fn PoolView(view: PageView, lang: Lang) -> impl IntoView {
    let pool = match view.pool {
        kvw_evidence::PoolSide::Prefill => lang.pick("Prefill pool", "Pool di prefill"),
        kvw_evidence::PoolSide::Decode => lang.pick("Decode pool", "Pool di decode"),
    };
    let heading = format!(
        "{pool}: {} {} × {} {}",
        view.pages_total,
        lang.pick("pages", "pagine"),
        view.page_size,
        lang.pick("tokens", "token")
    );
    let text = summary(&view, lang);
    let drawing = if pool_runs::draw_cells(&view) {
        Either::Left(view! { <Cells view=view.clone() lang=lang/> })
    } else {
        Either::Right(view! { <Bars view=view.clone() lang=lang/> })
    };
    view! {
        <figure class="pool">
            <figcaption>{heading}</figcaption>
            {drawing}
            <p class="pool-summary">{text}</p>
            <Legend lang=lang/>
            <RunTable view=view lang=lang/>
        </figure>
    }
}
