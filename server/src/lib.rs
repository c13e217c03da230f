//! kvwitness's server side: a live, multi-tenant, OpenAI-compatible endpoint
//! backed by the engine ([`openai`], [`service`]), and `kvw audit`, the
//! black-box gates that test any such endpoint ([`audit`]).
//!
//! The engine stays free of web crates: [`service`] adapts its plain
//! [`kvw_engine::live::LiveEngine`] to async handlers.

pub mod api_error;
pub mod audit;
pub mod guard;
pub mod listen;
pub mod openai;
pub mod pd_worker;
pub mod probe_api;
pub mod service;
pub mod site;
pub mod tenant_keys;
