//! What interactive controls do.
//!
//! Components attach the same handlers in both builds and call these; what
//! a handler does is given by whoever created the replay's context
//! ([`Actions`] in [`ReplayCtx`]): the browser entry points hand in their
//! fetch-and-verify switch and address-bar update, the static renderer
//! hands in nothing (static HTML has no listeners). So the components
//! never name the browser module, and need no `cfg` attributes.

use super::ReplayCtx;

/// The browser's side of the interactive controls; empty when rendering
/// static pages.
#[derive(Clone, Copy, Default)]
pub struct Actions {
    /// Show another receipt in place (fetch, verify, swap, update the URL).
    pub switch_to: Option<fn(ReplayCtx, String)>,
    /// Record the current step in the address bar (`#step-N`).
    pub set_hash: Option<fn(u8)>,
}

/// Show the receipt `stem` in place.
pub fn switch_to(ctx: ReplayCtx, stem: String) {
    if let Some(switch) = ctx.actions.switch_to {
        switch(ctx, stem);
    }
}

/// Record the current step in the address bar, unless the replay is
/// embedded in a page that did not ask for it.
pub fn remember_step(ctx: ReplayCtx, n: u8) {
    if let (Some(set_hash), false) = (ctx.actions.set_hash, ctx.embedded) {
        set_hash(n);
    }
}
