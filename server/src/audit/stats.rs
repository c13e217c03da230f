//! The prefix-cache gate's statistics: a one-sided Mann-Whitney U test.
//!
//! The published audits of prompt caching compare time-to-first-token of
//! prompts whose prefix another client just sent ("hit") with fresh ones
//! ("miss") and reject "no caching" when hits are significantly faster. The
//! U statistic counts, over every (hit, miss) pair, how often the hit was
//! faster (ties count half); under the null both samples come from one
//! distribution. The p-value uses the normal approximation with tie
//! correction (fine from about 8 samples each); the effect size is the
//! rank-biserial correlation and the difference of medians.

/// Result of the test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MannWhitney {
    /// Pairs where the hit was faster (ties half).
    pub u: f64,
    /// One-sided p-value for "hits are faster".
    pub p_value: f64,
    /// Rank-biserial correlation in [-1, 1]; 1 means every hit beat every miss.
    pub rank_biserial: f64,
}

/// One-sided test that `hits` are smaller than `misses`.
pub fn mann_whitney_less(hits: &[f64], misses: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (hits.len() as f64, misses.len() as f64);
    if hits.is_empty() || misses.is_empty() {
        return None;
    }
    let mut u = 0.0;
    for &h in hits {
        for &m in misses {
            if h < m {
                u += 1.0;
            } else if h == m {
                u += 0.5;
            }
        }
    }
    // Tie correction from the pooled ranks.
    let mut all: Vec<f64> = hits.iter().chain(misses).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut ties = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1] == all[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let n = n1 + n2;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)).max(1.0));
    let p_value = if var <= 0.0 {
        0.5
    } else {
        // Continuity correction: U is discrete.
        let z = (u - mean - 0.5) / var.sqrt();
        1.0 - normal_cdf(z)
    };
    Some(MannWhitney {
        u,
        p_value,
        rank_biserial: 2.0 * u / (n1 * n2) - 1.0,
    })
}

/// Median of a sample.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Standard normal CDF (Abramowitz-Stegun 7.1.26 erf, error < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_samples_reject_and_identical_ones_do_not() {
        let hits: Vec<f64> = (0..12).map(|i| 1000.0 + i as f64).collect();
        let misses: Vec<f64> = (0..12).map(|i| 3000.0 + i as f64).collect();
        let r = mann_whitney_less(&hits, &misses).unwrap();
        assert_eq!(r.u, 144.0);
        assert!(r.p_value < 1e-4, "{r:?}");
        assert_eq!(r.rank_biserial, 1.0);
        let same = mann_whitney_less(&misses, &misses).unwrap();
        assert!(same.p_value > 0.4, "{same:?}");
        let reversed = mann_whitney_less(&misses, &hits).unwrap();
        assert!(reversed.p_value > 0.99);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }
}
