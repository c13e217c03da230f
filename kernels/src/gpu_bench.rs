//! Statistics and verdict of the GPU benchmark (`kvw-gpu-check`), kept
//! apart from the CUDA code so that they are tested on machines without a
//! GPU.
//!
//! The goal (DESIGN.md section 6): decode reads KV at >= 85 % of the
//! device-to-device copy bandwidth, and the owner-tag check costs <= 0.5 %.
//! Tags on and off are timed in interleaved rounds (on, off, on, off, ...),
//! each round the mean of a batch of launches, so drift in clocks or
//! temperature hits both alike; the medians of the rounds are compared.

/// Decode bandwidth needed, as a share of the copy bandwidth.
pub const GOAL_DECODE_OVER_COPY: f64 = 0.85;
/// Largest tag-check overhead allowed, in percent of the tags-off time.
pub const GOAL_TAG_OVERHEAD_PCT: f64 = 0.5;

/// Median and spread of a set of round times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max - min) / median, in percent.
    pub spread_pct: f64,
}

/// Summarise round times (milliseconds). `None` for no rounds or a value
/// that is not a positive finite number.
pub fn summarize(rounds: &[f64]) -> Option<Summary> {
    if rounds.is_empty() || rounds.iter().any(|x| !x.is_finite() || *x <= 0.0) {
        return None;
    }
    let mut v = rounds.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Summary {
        median,
        min: v[0],
        max: v[n - 1],
        spread_pct: (v[n - 1] - v[0]) / median * 100.0,
    })
}

/// GB/s for `bytes` moved in `ms` milliseconds.
pub fn gbps(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

/// One measured decode configuration against the goal.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub decode_over_copy: f64,
    pub tag_overhead_pct: f64,
    pub bandwidth_ok: bool,
    pub tags_ok: bool,
}

impl Verdict {
    /// From the medians: decode GB/s with tags off, the copy's GB/s (bytes
    /// read plus written), and the two decode times.
    pub fn new(decode_gbps: f64, copy_gbps: f64, tags_off_ms: f64, tags_on_ms: f64) -> Verdict {
        let decode_over_copy = decode_gbps / copy_gbps;
        let tag_overhead_pct = (tags_on_ms - tags_off_ms) / tags_off_ms * 100.0;
        Verdict {
            decode_over_copy,
            tag_overhead_pct,
            bandwidth_ok: decode_over_copy >= GOAL_DECODE_OVER_COPY,
            tags_ok: tag_overhead_pct <= GOAL_TAG_OVERHEAD_PCT,
        }
    }

    pub fn pass(&self) -> bool {
        self.bandwidth_ok && self.tags_ok
    }
}

/// The one-line verdict over every goal-shaped row: `label` names each row
/// (e.g. `mma g8 p16`). PASS only when every row meets both targets; a FAIL
/// line names the rows that miss and by how much.
pub fn verdict_line(rows: &[(String, Verdict)]) -> String {
    if rows.is_empty() {
        return "goal: FAIL (nothing measured)".to_string();
    }
    let misses: Vec<String> = rows
        .iter()
        .filter(|(_, v)| !v.pass())
        .map(|(label, v)| {
            format!(
                "{label} {:.1} % of copy, tags {:+.2} %",
                v.decode_over_copy * 100.0,
                v.tag_overhead_pct
            )
        })
        .collect();
    let worst_bw = rows
        .iter()
        .map(|(_, v)| v.decode_over_copy)
        .fold(f64::INFINITY, f64::min);
    let worst_tags = rows
        .iter()
        .map(|(_, v)| v.tag_overhead_pct)
        .fold(f64::NEG_INFINITY, f64::max);
    let targets = format!(
        "decode >= {:.0} % of copy, tags <= {} %",
        GOAL_DECODE_OVER_COPY * 100.0,
        GOAL_TAG_OVERHEAD_PCT
    );
    if misses.is_empty() {
        format!(
            "goal: PASS ({targets}; worst {:.1} % of copy, tags {:+.2} %)",
            worst_bw * 100.0,
            worst_tags
        )
    } else {
        format!("goal: FAIL ({targets}; missed by {})", misses.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        let s = summarize(&[2.0, 1.0, 4.0, 3.0, 100.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!((s.min, s.max), (1.0, 100.0));
        assert!((s.spread_pct - 3300.0).abs() < 1e-9);
        assert_eq!(summarize(&[1.0, 3.0]).unwrap().median, 2.0);
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
        assert_eq!(summarize(&[1.0, 0.0]), None);
    }

    #[test]
    fn verdict_against_the_targets() {
        // 4000 GB/s decode against 4500 GB/s copy: 88.9 %; 0.3 % tags.
        let ok = Verdict::new(4000.0, 4500.0, 2.000, 2.006);
        assert!(ok.bandwidth_ok && ok.tags_ok && ok.pass());
        let slow = Verdict::new(3000.0, 4500.0, 2.0, 2.0);
        assert!(!slow.bandwidth_ok && slow.tags_ok);
        let tags = Verdict::new(4000.0, 4500.0, 2.0, 2.02);
        assert!(tags.bandwidth_ok && !tags.tags_ok);
        // Exactly on the targets passes.
        let edge = Verdict::new(85.0, 100.0, 2.0, 2.01);
        assert!(edge.pass(), "{edge:?}");
    }

    #[test]
    fn one_line_names_what_missed() {
        let rows = vec![
            (
                "mma g8 p16".to_string(),
                Verdict::new(4000.0, 4500.0, 2.0, 2.004),
            ),
            (
                "ref g1 p64".to_string(),
                Verdict::new(3000.0, 4500.0, 2.0, 2.1),
            ),
        ];
        let line = verdict_line(&rows);
        assert!(line.starts_with("goal: FAIL"), "{line}");
        assert!(
            line.contains("ref g1 p64 66.7 % of copy, tags +5.00 %"),
            "{line}"
        );
        assert!(!line.contains("mma g8"), "{line}");
        assert!(!line.contains('\n'));
        let pass = verdict_line(&rows[..1]);
        assert!(pass.starts_with("goal: PASS"), "{pass}");
        assert_eq!(verdict_line(&[]), "goal: FAIL (nothing measured)");
    }
}
