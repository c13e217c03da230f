//! Scenarios: scripted runs of the whole engine with an assertion over
//! their typed events, grouped by the four acceptance gates of the PD KV
//! lifetime boundary (pool / context, reject / admission, transfer / read,
//! lifetime / ownership).
//!
//! A scenario is a script of arrivals, faults and worker actions
//! ([`script::Script`]) run by the same simulator as the incident probe, and
//! a check of what happened. Each one knows the fix switches (and, for the
//! exclusions inside a switch, the rule) that guard it, so that a run whose
//! guard was off is reported as *not exercised*, never as a pass; and what
//! the record says happens without the guard ([`Record`]), so `kvw gates
//! --fixes none` must fail exactly the scenarios the record says fail.
//!
//! One file per group: [`admission`] and [`cleanup`] mirror the two upstream
//! CPU test files, one scenario per subtest or parameter set; [`related`]
//! holds the related upstream failures; [`pool_context`] the configuration gate.

pub mod admission;
pub mod cleanup;
pub mod pool_context;
pub mod receipts;
pub mod related;
pub mod script;

use kvw_evidence::judged::{Breach, Expected, GuardRule, Observed as Seen, Outcome, Why};
use kvw_evidence::{Event, Fix, RequestInfo, UPSTREAM_COMMIT, UPSTREAM_REPO};

use crate::policy::Doors;

/// The four acceptance gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    /// Configured context against each worker's pool capacity.
    PoolContext,
    /// Rejected requests are retired and never admitted into a handoff.
    RejectAdmission,
    /// What decode reads is what this request's transfer wrote.
    TransferRead,
    /// Pages and slots are owned by one request at a time and freed once.
    LifetimeOwnership,
}

impl Gate {
    pub const ALL: [Gate; 4] = [
        Gate::PoolContext,
        Gate::RejectAdmission,
        Gate::TransferRead,
        Gate::LifetimeOwnership,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Gate::PoolContext => "pool-context",
            Gate::RejectAdmission => "reject-admission",
            Gate::TransferRead => "transfer-read",
            Gate::LifetimeOwnership => "lifetime-ownership",
        }
    }
}

/// The upstream test a scenario mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Upstream {
    /// Path in the SGLang repository.
    pub path: &'static str,
    /// Test function name.
    pub test: &'static str,
    /// The subTest keywords or pytest parameters, as text.
    pub subtest: Option<&'static str>,
}

impl Upstream {
    /// Link to the test file at the pinned commit.
    pub fn url(&self) -> String {
        format!("{UPSTREAM_REPO}/blob/{UPSTREAM_COMMIT}/{}", self.path)
    }
}

/// What guards a scenario.
#[derive(Debug, Clone, Copy)]
pub struct Guard {
    /// Switches that must be on for the scenario to be exercised; dropping
    /// one breaks it unless the record says it then holds vacuously.
    pub fixes: &'static [Fix],
    /// An exclusion or rule inside those switches, and how to remove it:
    /// with the switches on and this rule removed, the assertion fails.
    pub rule: Option<Rule>,
}

/// A rule inside a switch that a scenario depends on.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Which rule it is.
    pub what: GuardRule,
    /// Remove it from a set of door rules.
    pub remove: fn(&mut Doors),
}

/// What the public record says a run without the guard does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The failure reproduces: the assertion fails.
    Fails,
    /// Nothing tests the defense: the assertion holds vacuously.
    HoldsVacuously,
    /// The record shows no run of this case before the fix: the engine's
    /// run without the guard is its own prediction, not a reproduction.
    /// Before #36988 the record observed two effects of the result path
    /// (the re-queue of an aborted final result, and a late result that
    /// still sends a chunk); the other cleanup tests came with or after the
    /// fix (the sampling-mask tests postdate it).
    NotObservedPreFix,
}

/// Why a [`Record::NotObservedPreFix`] case has no pre-fix observation.
pub const NOT_OBSERVED_PRE_FIX: &str = "not observed before the fix: the record shows two effects before PR #36988 (the re-queue of an aborted final result and a late result that still sends a chunk); this upstream test came with or after the fix (the sampling-mask tests postdate it), so the engine's run without the guard is its own prediction";

/// Which switches and rules a run uses.
#[derive(Debug, Clone)]
pub struct Setup {
    pub fixes: Vec<Fix>,
    pub doors: Doors,
}

impl Setup {
    pub fn new(fixes: &[Fix]) -> Self {
        Setup {
            fixes: kvw_evidence::FixSet::canonical(fixes),
            doors: Doors::SHIPPED,
        }
    }
}

/// What a scenario run produced: the events and the assertion's result
/// (`Ok(outcome)` when it holds, `Err(breach)` at the first check that
/// fails), both typed facts read off the run.
#[derive(Debug, Clone)]
pub struct Observed {
    pub events: Vec<Event>,
    pub requests: Vec<RequestInfo>,
    /// Page pictures of the first request, keyed by event index.
    pub pictures: Vec<(usize, kvw_evidence::PageView)>,
    pub verdict: Result<Outcome, Breach>,
}

/// One scenario. Its description and what closes it are words, kept by
/// the words crate under its name (`kvw_words::scenario::scenario_text`).
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    /// The upstream test function (and subtest id) it mirrors, or a name of its own.
    pub name: &'static str,
    pub gate: Gate,
    pub upstream: Option<Upstream>,
    pub guard: Guard,
    pub record: Record,
    /// What the assertion expects when it holds.
    pub expects: fn() -> Outcome,
    pub run: fn(&Setup) -> Observed,
}

/// Result of a scenario under a set of switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    NotExercised,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::NotExercised => "not exercised",
        }
    }
}

/// A scenario's run, judged.
#[derive(Debug, Clone)]
pub struct Judged {
    pub scenario: Scenario,
    pub fixes: Vec<Fix>,
    pub exercised: bool,
    pub holds: bool,
    pub status: Status,
    /// What the record and the guard say should happen with these switches.
    pub expected: Expected,
    pub observed: Seen,
    pub why: Why,
    pub observed_run: Observed,
}

impl Judged {
    /// Whether the status is the one the record predicts.
    pub fn as_recorded(&self) -> bool {
        match (self.exercised, self.scenario.record) {
            (true, _) => self.status == Status::Pass,
            (false, Record::Fails) => self.status == Status::Fail,
            (false, Record::HoldsVacuously) => self.status == Status::NotExercised,
            // The record says nothing either way.
            (false, Record::NotObservedPreFix) => true,
        }
    }
}

impl Scenario {
    /// Whether the guard's switches are all on in `fixes`.
    pub fn exercised(&self, fixes: &[Fix]) -> bool {
        self.guard.fixes.iter().all(|f| fixes.contains(f))
    }

    /// Run under `setup` and judge.
    pub fn judge(&self, setup: &Setup) -> Judged {
        let observed_run = (self.run)(setup);
        let exercised = self.exercised(&setup.fixes);
        let holds = observed_run.verdict.is_ok();
        let status = match (holds, exercised) {
            (false, _) => Status::Fail,
            (true, true) => Status::Pass,
            (true, false) => Status::NotExercised,
        };
        let guard = self.guard.fixes.to_vec();
        let expected = match (exercised, self.record) {
            (true, _) => Expected::Holds {
                outcome: (self.expects)(),
            },
            (false, Record::Fails) => Expected::FailsWithout { guard },
            (false, Record::HoldsVacuously) => Expected::NotExercisedWithout { guard },
            (false, Record::NotObservedPreFix) => Expected::NotObservedWithout {
                guard,
                reason: NOT_OBSERVED_PRE_FIX.into(),
            },
        };
        let guard = self.guard.fixes.to_vec();
        let (observed, why) = match &observed_run.verdict {
            Ok(o) => (
                Seen::Held { outcome: o.clone() },
                if exercised {
                    Why::GuardedBy { guard }
                } else {
                    Why::Untested { guard }
                },
            ),
            Err(e) => (
                Seen::AssertionFails,
                Why::Broke {
                    breach: e.clone(),
                    guard_off: guard
                        .into_iter()
                        .filter(|f| !setup.fixes.contains(f))
                        .collect(),
                },
            ),
        };
        Judged {
            scenario: *self,
            fixes: setup.fixes.clone(),
            exercised,
            holds,
            status,
            expected,
            observed,
            why,
            observed_run,
        }
    }

    /// The guard-removed runs a scenario's test checks: the switches of the
    /// guard dropped from `all` (when the record says that fails) and the
    /// guard's rule removed with the guard's switches on.
    pub fn removals(&self) -> Vec<(Removed, Setup)> {
        let mut out = Vec::new();
        // A case the record did not observe pre-fix still has the engine's
        // own guard-removed run: the guard must matter to the engine.
        if self.record != Record::HoldsVacuously {
            let fixes: Vec<Fix> = Fix::ALL
                .into_iter()
                .filter(|f| !self.guard.fixes.contains(f))
                .collect();
            out.push((
                Removed::Fixes(self.guard.fixes.to_vec()),
                Setup::new(&fixes),
            ));
        }
        if let Some(rule) = self.guard.rule {
            // Only the guard's own switches, so another defense cannot mask
            // the rule's removal.
            let mut setup = Setup::new(self.guard.fixes);
            (rule.remove)(&mut setup.doors);
            out.push((Removed::Rule(rule.what), setup));
        }
        out
    }
}

/// What a guard-removed run of [`Scenario::removals`] took away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// The guard's switches, every other switch on.
    Fixes(Vec<Fix>),
    /// One rule inside the guard's switches.
    Rule(GuardRule),
}

/// `a, b` or `none`.
pub fn fix_names(fixes: &[Fix]) -> String {
    if fixes.is_empty() {
        "none".into()
    } else {
        fixes
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every scenario, grouped by gate.
pub fn all() -> Vec<Scenario> {
    let mut out = Vec::new();
    out.extend(pool_context::scenarios());
    out.extend(admission::scenarios());
    out.extend(cleanup::scenarios());
    out.extend(related::scenarios());
    out.sort_by_key(|s| s.gate);
    out
}

/// The scenario named `name`.
pub fn find(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}
