//! Leptos components of the explorer, one concern each.
//!
//! [`shell::SitePage`] is the whole `<body>` of a replay page;
//! [`replay::Replay`] is the part an embedding page mounts. Everything below
//! them draws one thing: a provenance badge, a request state, a page grid, a
//! response. Components read the shared [`ReplayCtx`] for what changes at run
//! time (current step, receipt on screen) and take plain values otherwise.

pub mod actions;
pub mod compare;
pub mod glossary;
pub mod island;
pub mod pool;
pub mod provenance;
pub mod replay;
pub mod response;
pub mod shell;
pub mod sources;
pub mod state;
pub mod step;
pub mod switches;
pub mod timeline;
pub mod trust_banner;
pub mod upstream_doors;
pub mod verdict;

use leptos::prelude::*;

use crate::page_data::{CatalogEntry, PageData, Shown};

/// Reactive state shared by the components of one replay.
#[derive(Clone, Copy)]
pub struct ReplayCtx {
    /// Step on screen when stepping through (1..=7).
    pub current: RwSignal<u8>,
    /// The receipt on screen.
    pub shown: RwSignal<Shown>,
    /// Set once the browser itself verified the receipt on screen.
    pub browser_checked: RwSignal<bool>,
    /// The page's static data.
    pub data: StoredValue<PageData>,
    /// Every receipt of the site (`catalog.json`), for switches and pickers.
    pub catalog: StoredValue<Vec<CatalogEntry>>,
    /// Mounted inside another site's page: leave its address and keys alone.
    pub embedded: bool,
    /// What the interactive controls do (nothing when rendered statically).
    pub actions: actions::Actions,
}

impl ReplayCtx {
    /// Create the context of a static page and provide it to descendants.
    pub fn provide(data: PageData, catalog: Vec<CatalogEntry>, shown: Shown) -> ReplayCtx {
        ReplayCtx::provide_with(data, catalog, shown, false, actions::Actions::default())
    }

    /// [`ReplayCtx::provide`], saying whether the replay is embedded and
    /// what its controls do.
    pub fn provide_with(
        data: PageData,
        catalog: Vec<CatalogEntry>,
        shown: Shown,
        embedded: bool,
        actions: actions::Actions,
    ) -> ReplayCtx {
        let ctx = ReplayCtx {
            current: RwSignal::new(1),
            shown: RwSignal::new(shown),
            browser_checked: RwSignal::new(false),
            data: StoredValue::new(data),
            catalog: StoredValue::new(catalog),
            embedded,
            actions,
        };
        provide_context(ctx);
        ctx
    }

    /// The context provided by an ancestor.
    pub fn get() -> ReplayCtx {
        expect_context::<ReplayCtx>()
    }

    /// The catalog entry of `stem`, if listed.
    pub fn entry(&self, stem: &str) -> Option<CatalogEntry> {
        self.catalog
            .with_value(|c| crate::page_data::entry(c, stem).cloned())
    }

    /// Move to step `n`, clamped to 1..=7.
    pub fn go(&self, n: i32) {
        self.current.set(n.clamp(1, 7) as u8);
    }
}
