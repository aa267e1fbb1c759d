//! The Mann-Whitney U (Wilcoxon rank-sum) test: do two samples come from the same distribution,
//! or is one shifted? It uses only ranks, so one wild build cannot decide it, and it assumes no
//! distribution: figures of successive builds (a growth per turn, a plateau size) are anything
//! but Gaussian.

use crate::analyze::stats::mann_kendall::standard_normal;
use statrs::distribution::ContinuousCDF;

/// Samples up to this many values in all get the exact distribution of U (when there are no
/// ties); beyond, or with ties, the normal approximation with a tie correction.
const EXACT_MAX: usize = 40;

/// The outcome of a two-sample rank test of `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RankTest {
    /// U of `b`: how many pairs (x from a, y from b) have y > x (ties count one half).
    pub u: f64,
    /// U / (|a| |b|): the probability that a value of `b` exceeds one of `a` (0.5: no shift).
    pub superiority: f64,
    /// The two-sided p-value.
    pub p_value: f64,
}

/// Tests whether `b` is shifted against `a` (two-sided). Empty samples give p = 1.
pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> RankTest {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return RankTest {
            u: 0.0,
            superiority: 0.5,
            p_value: 1.0,
        };
    }
    let mut u = 0.0;
    let mut ties = false;
    for y in b {
        for x in a {
            if y > x {
                u += 1.0;
            } else if y == x {
                u += 0.5;
                ties = true;
            }
        }
    }
    let pairs = (n1 * n2) as f64;
    let p_value = if !ties && n1 + n2 <= EXACT_MAX {
        exact_two_sided(n1, n2, u)
    } else {
        normal_two_sided(a, b, u)
    };
    RankTest {
        u,
        superiority: u / pairs,
        p_value: p_value.clamp(0.0, 1.0),
    }
}

/// The exact two-sided p-value: twice the smaller tail of U's distribution under the null,
/// counted by the recurrence on the largest value's sample.
fn exact_two_sided(n1: usize, n2: usize, u: f64) -> f64 {
    let max_u = n1 * n2;
    // counts[i][j][k]: arrangements of i values of a and j values of b with U = k.
    let mut table: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); n2 + 1]; n1 + 1];
    for i in 0..=n1 {
        for j in 0..=n2 {
            let mut counts = vec![0.0; i * j + 1];
            if i == 0 || j == 0 {
                counts[0] = 1.0;
            } else {
                // The largest value is from b (it beats all i values of a) or from a.
                for (k, c) in table[i][j - 1].iter().enumerate() {
                    counts[k + i] += c;
                }
                for (k, c) in table[i - 1][j].iter().enumerate() {
                    counts[k] += c;
                }
            }
            table[i][j] = counts;
        }
    }
    let counts = &table[n1][n2];
    let total: f64 = counts.iter().sum();
    let u = u.round() as usize;
    let lower: f64 = counts[..=u.min(max_u)].iter().sum();
    let upper: f64 = counts[u.min(max_u)..].iter().sum();
    (2.0 * lower.min(upper) / total).min(1.0)
}

/// The normal approximation with the tie-corrected variance and a continuity correction.
fn normal_two_sided(a: &[f64], b: &[f64], u: f64) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let n = n1 + n2;
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1] == all[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 {
        return 1.0;
    }
    let distance = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0);
    2.0 * (1.0 - standard_normal().cdf(distance / variance.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_separation_of_five_against_five_is_two_in_252() {
        let low = [1.0, 2.0, 3.0, 4.0, 5.0];
        let high = [6.0, 7.0, 8.0, 9.0, 10.0];
        let t = mann_whitney(&low, &high);
        assert_eq!(t.u, 25.0);
        assert_eq!(t.superiority, 1.0);
        assert!((t.p_value - 2.0 / 252.0).abs() < 1e-12, "{}", t.p_value);
        // Symmetric.
        assert!((mann_whitney(&high, &low).p_value - t.p_value).abs() < 1e-12);
    }

    #[test]
    fn interleaved_samples_are_no_shift() {
        let t = mann_whitney(&[1.0, 3.0, 5.0, 7.0], &[2.0, 4.0, 6.0, 8.0]);
        assert!(t.p_value > 0.5, "{}", t.p_value);
    }

    /// Published value: U = 3 for n1 = n2 = 6 has a two-sided exact p of 0.0152 (tables of the
    /// Wilcoxon rank-sum distribution: P(U <= 3) = 0.0076).
    #[test]
    fn exact_tail_matches_the_tables() {
        let a = [1.0, 2.0, 3.0, 4.5, 5.0, 6.0];
        let b = [4.0, 7.0, 8.0, 9.0, 10.0, 11.0];
        let t = mann_whitney(&a, &b);
        assert_eq!(36.0 - t.u, 3.0);
        assert!((t.p_value - 0.0152).abs() < 0.0005, "{}", t.p_value);
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        let a = [0.0; 8];
        let b = [0.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0];
        let t = mann_whitney(&a, &b);
        assert!(t.p_value < 0.05 && t.p_value > 0.001, "{}", t.p_value);
        let same = mann_whitney(&a, &[0.0; 8]);
        assert_eq!(same.p_value, 1.0);
    }
}
