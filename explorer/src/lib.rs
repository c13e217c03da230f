//! The kvwitness explorer: the seven-step replay of a signed probe receipt.
//!
//! The same Leptos components render twice. On the native side (`ssr`
//! feature) they become static HTML in which every step, state and response
//! is readable without JavaScript; [`site::build_site`] turns an evidence
//! bundle into such a site. In the browser (`hydrate` feature) the page
//! verifies its receipt's DSSE signature with the evidence crate compiled to
//! WebAssembly, then hydrates the same components to add step-by-step
//! navigation, keyboard arrows and in-place fix switching.
//!
//! Modules split along one concern each: plain data and pure logic first
//! ([`page_data`], [`pool_runs`], [`catalog`], [`links`], [`highlight`], [`diverge`],
//! [`timeline`], [`i18n`], [`trust`], [`fixed`]), then the components under
//! [`components`], then the two ends: [`site`] (static build) and the
//! browser entry points.

#![recursion_limit = "256"]

pub mod catalog;
pub mod components;
pub mod coverage;
pub mod diverge;
pub mod fixed;
pub mod highlight;
pub mod i18n;
pub mod limits;
pub mod links;
pub mod model_check_page;
pub mod page_data;
pub mod pool_runs;
pub mod switch_info;
pub mod timeline;
pub mod trust;

#[cfg(feature = "ssr")]
pub mod audit_page;
#[cfg(feature = "ssr")]
pub mod compress;
#[cfg(feature = "ssr")]
pub mod csp;
#[cfg(feature = "ssr")]
pub mod fuzz_page;
#[cfg(feature = "ssr")]
pub mod gates_page;
#[cfg(feature = "ssr")]
pub mod markdown;
#[cfg(feature = "ssr")]
pub mod report_page;
#[cfg(feature = "ssr")]
pub mod sample;
#[cfg(feature = "ssr")]
pub mod scenario_page;
#[cfg(feature = "ssr")]
pub mod site;
#[cfg(feature = "ssr")]
pub mod upstream_run_page;

#[cfg(feature = "hydrate")]
pub mod browser;

pub use i18n::Lang;
pub use page_data::{CatalogEntry, PageData, Shown};
