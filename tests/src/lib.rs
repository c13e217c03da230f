//! What kvwitness's tests share, so that each helper exists once:
//!
//! * [`http`] — raw HTTP/1.1 exchanges over 127.0.0.1, so a test sees
//!   exactly the bytes a client would;
//! * [`served`] — servers a test starts (a `kvw serve` process, an axum app
//!   on a thread of its own), stopped when dropped;
//! * [`work`] — a genuine bundle of real walkthrough probes, copied into a
//!   private folder per test, and the forging helpers an attacker holding
//!   the bundle's key would use;
//! * [`hostile`] — the hostile bundles, listed once, that both `kvw verify`
//!   and `kvw site build` must refuse.
//!
//! The end-to-end tests across crates live beside it, in `tests/tests/`.
//! Tests that need the `kvw` binary stay in `cli/tests/` (cargo names the
//! binary only there) and take these helpers as a dev-dependency.

pub mod hostile;
pub mod http;
pub mod served;
pub mod work;
