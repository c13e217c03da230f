//! What interactive controls do, per build.
//!
//! Components attach the same handlers in both builds; on the native side
//! they never fire (static HTML has no listeners), and in the browser they
//! delegate to [`crate::browser`]. Keeping the switch here lets components
//! stay free of `cfg` attributes.

use super::ReplayCtx;

/// Show the receipt `stem` in place (fetch, verify, swap, update the URL).
pub fn switch_to(ctx: ReplayCtx, stem: String) {
    #[cfg(feature = "hydrate")]
    crate::browser::switch_to(ctx, stem, true);
    #[cfg(not(feature = "hydrate"))]
    let _ = (ctx, stem);
}

/// Record the current step in the address bar (`#step-N`), unless the
/// replay is embedded in a page that did not ask for it.
pub fn remember_step(ctx: ReplayCtx, n: u8) {
    #[cfg(feature = "hydrate")]
    if !ctx.embedded {
        crate::browser::set_hash(n);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = (ctx, n);
}
