//! Decimal text with a fixed number of digits after the point.
//!
//! Written with integer arithmetic so the browser build does not carry the
//! standard library's float formatter (about 10 KB of wasm) for the two
//! places that print a fraction: bar positions and timings.

/// `x` with `decimals` digits after the point, rounded half away from zero:
/// `fixed(6.25, 3)` is `"6.250"`, `fixed(-0.04, 1)` is `"0.0"`.
pub fn fixed(x: f64, decimals: u32) -> String {
    let scale = 10u64.pow(decimals);
    // `as` saturates: NaN becomes 0, infinities the largest value.
    let scaled = (x.abs() * scale as f64).round() as u64;
    let sign = if x < 0.0 && scaled != 0 { "-" } else { "" };
    let (whole, frac) = (scaled / scale, scaled % scale);
    if decimals == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{frac:0width$}", width = decimals as usize)
    }
}

/// A span of virtual microseconds in the unit a reader takes in at once:
/// `850 µs`, `12.5 ms`, `300.1 s`.
pub fn duration_us(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{} ms", fixed(us as f64 / 1e3, 1)),
        _ => format!("{} s", fixed(us as f64 / 1e6, 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::{duration_us, fixed};

    #[test]
    fn durations_take_the_unit_that_reads_at_once() {
        assert_eq!(duration_us(850), "850 µs");
        assert_eq!(duration_us(12_500), "12.5 ms");
        assert_eq!(duration_us(300_101_000), "300.1 s");
    }

    #[test]
    fn matches_the_standard_formatter_away_from_ties() {
        for x in [
            0.0, 6.26, 12.3456, 99.6, 0.4, 100.0, 1234.56789, -3.25159, 0.0004,
        ] {
            for d in [0, 1, 3] {
                assert_eq!(fixed(x, d), format!("{x:.*}", d as usize), "{x} {d}");
            }
        }
        assert_eq!(fixed(-0.04, 1), "0.0");
    }
}
