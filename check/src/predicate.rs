//! From a [`CheckReport`] to the model-check receipt predicate.
//!
//! Receipts sign facts: each counterexample step names its action, actor
//! and request, the engine decision it took where there was one, the acting
//! request's state after it and the decode pool's pages after it — enough
//! for a replay to draw the path step by step without re-running the model.

use kvw_engine::policy;
use kvw_engine::req::FinishReason;
use kvw_evidence::model_check::{
    CheckerInfo, Counterexample, Exploration, Handoff, ModelBounds, ModelCheckPredicate,
    ModelDecision, PageSnapshot, PathStep, PropertyResult, ReqSnapshot, ViolationFact,
};
use kvw_evidence::EngineInfo;

use crate::handoff_model::{
    Action, DStage, PStage, PdModel, Rid, State, Violation, Writer, PAGE_SIZE,
};
use crate::{CheckReport, Strategy, STATERIGHT_VERSION};

fn reason(r: &FinishReason) -> kvw_evidence::FinishReason {
    r.signed()
}

fn handoff(handoff: Handoff) -> ModelDecision {
    ModelDecision::HandoffDoor { handoff }
}

fn writer_name(m: &PdModel, w: Option<Writer>) -> Option<String> {
    w.map(|w| match w {
        Writer::Earlier(t) => format!("earlier:t{t}"),
        Writer::Req(r, g) => format!("{}:{g}", m.rid(r)),
    })
}

fn pstage(s: PStage) -> &'static str {
    match s {
        PStage::None => "none",
        PStage::Bootstrap => "bootstrap_queue",
        PStage::Waiting => "waiting_queue",
        PStage::Inflight => "inflight_queue",
        PStage::Done => "done",
    }
}

fn dstage(s: DStage) -> &'static str {
    match s {
        DStage::None => "none",
        DStage::Prealloc => "prealloc_queue",
        DStage::Transfer => "transfer_queue",
        DStage::Running => "running_batch",
        DStage::Done => "done",
    }
}

fn snapshot(m: &PdModel, s: &State, r: Rid) -> ReqSnapshot {
    let rs = &s.reqs[r as usize];
    let p = rs.preq.as_deref();
    let d = rs.dreq.as_deref();
    ReqSnapshot {
        original_len: m.prompt_len[r as usize] as u32,
        prefill_stage: pstage(rs.pstage).into(),
        decode_stage: dstage(rs.dstage).into(),
        prefill_input_len: p.map_or(0, |q| q.input_len() as u32),
        prefill_to_finish: p.and_then(|q| q.to_finish.as_ref()).map(reason),
        prefill_finished_reason: p.and_then(|q| q.finished_reason.as_ref()).map(reason),
        decode_to_finish: d.and_then(|q| q.to_finish.as_ref()).map(reason),
        decode_finished_reason: d.and_then(|q| q.finished_reason.as_ref()).map(reason),
        decode_table: rs.table.iter().map(|&p| u32::from(p)).collect(),
        writes_posted: u32::from(rs.room.posted),
        writes_landed: u32::from(rs.room.landed),
        final_sent: rs.room.final_sent,
        answers: rs.answers.clone(),
    }
}

fn pages(m: &PdModel, s: &State) -> Vec<PageSnapshot> {
    s.decode
        .iter()
        .enumerate()
        .map(|(i, p)| PageSnapshot {
            page: i as u32,
            owner: p.owner.map(|r| m.rid(r)),
            writer: writer_name(m, p.writer),
        })
        .collect()
}

/// The engine decision an action took in `before`.
fn decision(m: &PdModel, before: &State, after: &State, a: Action) -> Option<ModelDecision> {
    let r = a.req();
    match a {
        Action::PrefillRecv(_) if before.reqs[r as usize].pstage == PStage::None => {
            let req = after.reqs[r as usize].preq.as_deref()?;
            Some(match after.reqs[r as usize].pstage {
                PStage::Done => ModelDecision::EntryDoor {
                    door: policy::Door::Retire,
                    finished: None,
                },
                _ => ModelDecision::EntryDoor {
                    door: policy::Door::Admit,
                    finished: Some(req.finished()),
                },
            })
        }
        Action::PrefillForward(_) => {
            let req = before.reqs[r as usize].preq.as_deref()?;
            let door = (m.prefill_door)(req);
            let action = policy::prefill_result_action(req, true, m.config.fixes);
            Some(ModelDecision::PrefillForward {
                door,
                finished: req.finished(),
                result: (door == policy::Door::Admit).then_some(action),
            })
        }
        Action::DecodePoll(_) => m.handoff(before, r, false).map(handoff),
        Action::DecodeTimeout(_) => m.handoff(before, r, true).map(handoff),
        Action::DecodePrealloc(_) => {
            let req = before.reqs[r as usize].dreq.as_deref()?;
            Some(ModelDecision::EntryDoor {
                door: policy::entry_door(req, m.config.fixes),
                finished: None,
            })
        }
        Action::Land(w) if before.reqs[w.req as usize].room.closed => {
            Some(ModelDecision::LateWrite)
        }
        _ => None,
    }
}

fn violation_fact(m: &PdModel, v: &Violation) -> ViolationFact {
    use crate::handoff_model::prop;
    let (property, r, page, writer, status) = match *v {
        Violation::ForeignRead {
            reader,
            page,
            writer,
        } => (
            prop::ISOLATION,
            reader,
            Some(page),
            writer_name(m, writer),
            None,
        ),
        Violation::DoubleFree { req, page, .. } => {
            (prop::NO_DOUBLE_FREE, req, Some(page), None, None)
        }
        Violation::WriteAfterReassign { req, page, owner } => (
            prop::NO_WRITE_AFTER_REASSIGN,
            req,
            Some(page),
            owner.map(|o| m.rid(o)),
            None,
        ),
        Violation::AnsweredTwice { req } => (prop::ANSWERED_AT_MOST_ONCE, req, None, None, None),
        Violation::RejectedGot200 { req } => (prop::REJECTED_NEVER_200, req, None, None, Some(200)),
    };
    ViolationFact {
        property: property.into(),
        rid: m.rid(r),
        page: page.map(u32::from),
        writer,
        status,
    }
}

/// The receipt predicate of a check. `engine` names the build that ran it.
pub fn predicate(report: &CheckReport, engine: EngineInfo) -> ModelCheckPredicate {
    let m = &report.model;
    let o = &report.options;
    let counterexample = report.counterexample.as_ref().map(|(property, path)| {
        let vec = path.clone().into_vec();
        let mut steps = Vec::new();
        for (i, w) in vec.windows(2).enumerate() {
            let (before, Some(a)) = (&w[0].0, w[0].1) else {
                continue;
            };
            let after = &w[1].0;
            let r = a.req();
            steps.push(PathStep {
                index: i as u32 + 1,
                action: a.id().into(),
                actor: a.actor().into(),
                rid: m.rid(r),
                tenant: m.tenant(r),
                decision: decision(m, before, after, a),
                request: snapshot(m, after, r),
                decode_pages: pages(m, after),
            });
        }
        let last = path.last_state();
        Counterexample {
            property: property.to_string(),
            violations: last
                .violations
                .iter()
                .map(|v| violation_fact(m, v))
                .collect(),
            steps,
        }
    });
    ModelCheckPredicate {
        checker: CheckerInfo {
            name: "stateright".into(),
            version: STATERIGHT_VERSION.into(),
            strategy: match o.strategy {
                Strategy::Bfs => "bfs".into(),
                Strategy::DfsSymmetry => "dfs".into(),
            },
        },
        engine,
        model: ModelBounds {
            requests: o.requests,
            tenants: o.tenants,
            decode_pages: o.decode_pages,
            prefill_pages: o.prefill_pages,
            page_size: PAGE_SIZE as u32,
            fixes: m.config.fixes.list(),
            faults: o.faults,
            symmetry: o.strategy == Strategy::DfsSymmetry,
        },
        exploration: Exploration {
            states: report.states as u64,
            unique_states: report.unique_states as u64,
            max_depth: report.max_depth as u64,
            complete: report.complete,
        },
        properties: report
            .properties
            .iter()
            .map(|p| PropertyResult {
                name: p.name.into(),
                expectation: p.expectation,
                status: p.status,
            })
            .collect(),
        counterexample,
        all_hold: report.all_hold(),
    }
}
