//! The published fix matrix: which probe runs a bundle holds and what each
//! receipt is called. For each scale, the incident probe under every
//! combination of the six boolean switches (64 runs) or, for a smaller
//! bundle, no switch and each switch alone; `poison-on-free` in `log` and
//! `refuse` mode with no switch; and the configuration answer (prefill pool
//! raised to the context length). The gate runs go beside them for the
//! sets of [`GATE_FIX_SETS`].

use std::fmt;
use std::str::FromStr;

use kvw_evidence::{receipt_name, FixSet, PoisonMode, Scale};

use crate::config::{ConfigError, ProbeSpec, ValidConfig};

/// The switch sets whose gate and scenario receipts a bundle carries.
pub const GATE_FIX_SETS: [FixSet; 2] = [FixSet::NONE, FixSet::ALL];

/// How many switch combinations a scale gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatrixSize {
    /// Every combination (64 runs).
    Full,
    /// No switch and each switch alone (7 runs).
    Outcomes,
}

impl MatrixSize {
    fn fix_sets(self) -> Vec<FixSet> {
        match self {
            MatrixSize::Full => FixSet::every().collect(),
            MatrixSize::Outcomes => FixSet::each_alone().collect(),
        }
    }
}

impl FromStr for MatrixSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(MatrixSize::Full),
            "outcomes" => Ok(MatrixSize::Outcomes),
            other => Err(format!(
                "unknown matrix size '{other}' (known: full, outcomes)"
            )),
        }
    }
}

impl fmt::Display for MatrixSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatrixSize::Full => "full",
            MatrixSize::Outcomes => "outcomes",
        })
    }
}

/// One probe run of the matrix: its receipt name and configuration.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub config: ValidConfig,
}

/// Every run for `scales` (each once, in the order given), walkthrough
/// always in full, incident at `incident`'s size.
pub fn rows(scales: &[Scale], seed: u64, incident: MatrixSize) -> Result<Vec<Row>, ConfigError> {
    let mut rows = Vec::new();
    let mut seen = Vec::new();
    for &scale in scales {
        if seen.contains(&scale) {
            continue;
        }
        seen.push(scale);
        let spec = |fixes| ProbeSpec {
            seed,
            ..ProbeSpec::new(scale, fixes)
        };
        let size = match scale {
            Scale::Incident => incident,
            Scale::Walkthrough => MatrixSize::Full,
        };
        for fixes in size.fix_sets() {
            rows.push(Row {
                name: receipt_name::probe_fixes(scale, fixes),
                config: spec(fixes).validate()?,
            });
        }
        for mode in [PoisonMode::Log, PoisonMode::Refuse] {
            rows.push(Row {
                name: receipt_name::probe_poison(scale, mode),
                config: ProbeSpec {
                    poison_on_free: mode,
                    ..spec(FixSet::NONE)
                }
                .validate()?,
            });
        }
        rows.push(Row {
            name: receipt_name::probe_pool_ge_context(scale),
            config: ProbeSpec {
                prefill_pool_tokens: Some(scale.preset().context_len),
                ..spec(FixSet::NONE)
            }
            .validate()?,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvw_evidence::Fix;

    #[test]
    fn the_matrix_has_its_published_rows() {
        let full = rows(
            &[Scale::Walkthrough, Scale::Incident, Scale::Walkthrough],
            1,
            MatrixSize::Full,
        )
        .unwrap();
        assert_eq!(full.len(), 2 * (64 + 3));
        let small = rows(&[Scale::Incident], 1, MatrixSize::Outcomes).unwrap();
        assert_eq!(small.len(), 7 + 3);
        assert_eq!(small[0].name, "incident-incident-fixes-none.json");
        assert_eq!(small[1].config.fixes, [Fix::RetireAbortedPrefillResult]);
        let last = small.last().unwrap();
        assert_eq!(last.name, "incident-incident-pool-ge-context.json");
        assert_eq!(last.config.prefill_pool_tokens, last.config.context_len);
        let mut names: Vec<_> = full.iter().map(|r| &r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), full.len(), "every receipt name is distinct");
    }

    #[test]
    fn matrix_sizes_parse_as_they_print() {
        for m in [MatrixSize::Full, MatrixSize::Outcomes] {
            assert_eq!(m.to_string().parse::<MatrixSize>(), Ok(m));
        }
        assert!("half"
            .parse::<MatrixSize>()
            .unwrap_err()
            .contains("full, outcomes"));
    }
}
