//! Deferred release against a late RDMA write (SGLang #24527 / #35049).
//!
//! acme's last page write is held up on the wire; decode gives up on acme at
//! its 300 s timeout and frees acme's pages. umbrella arrives, is handed the
//! same pages (LIFO), and the stale write lands in the middle of umbrella's
//! decode. Without deferred release umbrella then attends to a page acme
//! wrote; with it, acme's pages stay allocated until the write drains, so
//! umbrella gets other pages and answers correctly — unless the write is
//! later still: decode's deferral ends at the release timeout (30 s, SGLang
//! PR #35049) whether or not the drain ack came, and a write that lands
//! after that release lands in the next tenant's page again (the
//! use-after-free window of SGLang #38961).

use kvw_engine::arrivals::Arrival;
use kvw_engine::attention;
use kvw_engine::backend::Backend;
use kvw_engine::probe::{incident_config, with_prefill_pool};
use kvw_engine::sim::Sim;
use kvw_engine::transfer::Fault;
use kvw_evidence::{Fix, PoisonMode, Scale};
use rand::SeedableRng;

struct Outcome {
    status: u16,
    text: String,
    want: String,
    foreign_pages_read: u64,
    /// Writes that landed in pages their writer no longer held.
    stale_writes: usize,
    /// Releases that gave pages back without the drain ack.
    released_unacked: usize,
}

fn late_write(fixes: &[Fix]) -> Outcome {
    late_write_at(fixes, 300_100_000, 300_300_000)
}

/// acme's last page write lands `late_us` late; umbrella arrives at
/// `umbrella_at_us`.
fn late_write_at(fixes: &[Fix], umbrella_at_us: u64, late_us: u64) -> Outcome {
    let base = incident_config(Scale::Walkthrough, fixes, PoisonMode::Off, 9).unwrap();
    let config = with_prefill_pool(base, 256).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut arrival = |tenant: &str, at_us: u64, probed: bool| {
        let canary = attention::canary(tenant, &mut rng);
        let prompt = attention::document(tenant, &canary, 100, &mut rng);
        Arrival {
            at_us,
            tenant: tenant.into(),
            prompt,
            canary,
            max_new_tokens: 24,
            probed,
        }
    };
    let arrivals = vec![
        arrival("acme", 0, false),
        arrival("umbrella", umbrella_at_us, true),
    ];
    let want = attention::decode(&arrivals[1].prompt[1..25]);
    let backend = Backend::Cpu;
    let mut sim = Sim::new(config.into_inner(), arrivals, &backend);
    // acme's seventh page write (its last page) lands late.
    let room = sim.entries[0].room;
    sim.channel.inject(
        room,
        Fault::LateWrite {
            nth: 6,
            us: late_us,
        },
    );
    sim.run();
    let acme = sim.entries[0].response.clone().expect("acme answered");
    assert_eq!(acme.status, 500, "acme times out: {}", acme.text);
    let r = sim.entries[1].response.clone().expect("umbrella answered");
    assert_eq!(sim.counters.double_frees, 0);
    Outcome {
        status: r.status,
        text: r.text,
        want,
        foreign_pages_read: sim.marks.foreign_seen.len() as u64,
        stale_writes: sim.stale_writes.len(),
        released_unacked: sim.released_unacked.len(),
    }
}

#[test]
fn late_write_corrupts_the_next_tenant_without_deferred_release() {
    let pre = late_write(&[]);
    assert_eq!(pre.status, 200);
    assert!(
        pre.foreign_pages_read >= 1,
        "the late write landed in umbrella's page"
    );
    assert_ne!(pre.text, pre.want, "umbrella's answer is corrupted");
}

#[test]
fn deferred_release_keeps_pages_until_the_write_drains() {
    let fixed = late_write(&[Fix::DeferredRelease]);
    assert_eq!(fixed.status, 200);
    assert_eq!(fixed.foreign_pages_read, 0);
    assert_eq!(fixed.text, fixed.want);
    // And the same scenario without the fix does go wrong.
    assert!(late_write(&[]).foreign_pages_read >= 1);
}

#[test]
fn a_write_later_than_the_release_timeout_lands_in_the_next_tenant() {
    use kvw_engine::policy::DEFERRED_RELEASE_TIMEOUT_US as T;
    // Decode gives up on acme at 300 s and defers its pages; no drain ack
    // comes while the write is on the wire, so they go back at 300 s + T.
    // umbrella arrives after that and the write lands during its decode.
    let late = late_write_at(&[Fix::DeferredRelease], 300_100_000 + T, 300_300_000 + T);
    assert_eq!(late.released_unacked, 1, "released at the timeout, unacked");
    assert!(late.stale_writes >= 1, "the write landed after the release");
    assert!(late.foreign_pages_read >= 1);
    assert_ne!(late.text, late.want, "umbrella's answer is corrupted");
    // The same timings with the write landing before the timeout: the
    // ack comes, nothing is released unacked, umbrella is answered right.
    let drained = late_write_at(&[Fix::DeferredRelease], 300_100_000 + T, 300_300_000);
    assert_eq!(drained.released_unacked, 0);
    assert_eq!(drained.stale_writes, 0);
    assert_eq!(drained.text, drained.want);
}
