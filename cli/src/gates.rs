//! `kvw gates`: every scenario under a set of fixes, grouped by the four
//! acceptance gates, as a table; each worker's pool against the configured
//! context; signed receipts with `--out DIR`. Exits 0 only if every row
//! passes — a defense that was off is "not exercised", never a pass.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use kvw_engine::scenarios::{receipts, Status};
use kvw_words::scenario as words;
use kvw_words::Lang;

use kvw_evidence::FixSet;

use crate::out::clean;

#[derive(Debug, Args)]
pub struct GatesArgs {
    /// Fix switches: a comma list, `none` or `all`.
    #[arg(long, default_value = "all")]
    pub fixes: FixSet,
    /// Write the gates receipt and one receipt per scenario into this
    /// folder (a receipt that exists there is refused unless --force).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub sign: crate::sign::SignArgs,
    /// Language of the table's expected, observed and why: `en` or `it`.
    #[arg(long, default_value = "en")]
    pub lang: Lang,
}

pub fn run(args: GatesArgs) -> anyhow::Result<()> {
    let set = args.fixes;
    let fixes = &set.list();
    let judged = receipts::judge_all(fixes);
    let gates = receipts::gates_predicate(fixes, &judged);
    outln!("kvw gates — fixes {set}")?;
    let lang = args.lang;
    outln!(
        "{:<18} {:<84} {:<14} {:<44} {:<46} {}",
        "gate",
        "scenario",
        lang.pick("result", "esito"),
        lang.pick("expected", "atteso"),
        lang.pick("observed", "osservato"),
        lang.pick("why", "perché")
    )?;
    for (j, row) in judged.iter().zip(&gates.rows) {
        outln!(
            "{:<18} {:<84} {:<14} {:<44} {:<46} {}",
            j.scenario.gate.name(),
            j.scenario.name,
            words::status(row.status, lang),
            clean(&words::expected(&j.expected, lang).to_string()),
            clean(&words::observed(&j.observed, lang).to_string()),
            clean(&words::why(&j.why, lang).to_string())
        )?;
    }
    outln!(
        "{}",
        lang.pick(
            "pool / context (as each worker states them at start):",
            "pool / contesto (come ogni worker li dichiara all'avvio):"
        )
    )?;
    for c in &gates.capacity {
        outln!(
            "  {:<12} {:<8} {} {:>9}  pool {:>9}  {} {:>9}  {}",
            c.config,
            c.worker,
            lang.pick("context", "contesto"),
            c.context_len,
            c.pool_tokens,
            lang.pick("max input", "input massimo"),
            c.max_req_input_len,
            if c.reject_path_reachable {
                lang.pick(
                    "context > pool: the reject path is reachable (see the pool-context rows)",
                    "contesto > pool: il percorso di rifiuto è raggiungibile (vedi le righe pool-context)",
                )
            } else {
                lang.pick("pool covers the context", "il pool copre il contesto")
            }
        )?;
    }
    let count = |s: Status| judged.iter().filter(|j| j.status == s).count();
    let (pass, fail, idle, all) = (
        count(Status::Pass),
        count(Status::Fail),
        count(Status::NotExercised),
        judged.len(),
    );
    outln!(
        "{}",
        match lang {
            Lang::En => format!("{pass} pass, {fail} fail, {idle} not exercised of {all}"),
            Lang::It => format!("{pass} superati, {fail} falliti, {idle} non esercitati su {all}"),
        }
    )?;
    if let Some(dir) = &args.out {
        write_all(
            dir,
            args.sign.key(),
            fixes,
            &judged,
            &gates,
            args.sign.force(),
        )?;
        eprintln!("signed receipts written to {}", dir.display());
    }
    if !gates.all_pass {
        bail!(
            "not every gate passes with fixes {} ({} fail, {} not exercised)",
            set,
            fail,
            idle
        );
    }
    Ok(())
}

fn write_all(
    dir: &Path,
    key: Option<&Path>,
    fixes: &[kvw_evidence::Fix],
    judged: &[kvw_engine::scenarios::Judged],
    gates: &kvw_evidence::scenario::GatesPredicate,
    force: bool,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let (signer, _) = crate::sign::signer(key)?;
    let files = receipts::signed(fixes, judged, gates, &signer)?;
    // Every name first: a refusal writes none of them.
    for (name, _) in &files {
        crate::write::check_new(&dir.join(name), force)?;
    }
    for (name, envelope) in &files {
        crate::probe::write_envelope(&dir.join(name), envelope, force)?;
    }
    Ok(())
}
