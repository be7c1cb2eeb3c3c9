//! One machine-readable line per figure on stdout, for `scripts/bench.sh`.
//!
//! Shared by the benches of both crates (`use wasmop_e2e::figure;`). A line is
//! a JSON object `{"bench", "metric", "value", "baseline", "ratio", "unit", "target", "pass"}`
//! that `scripts/bench_summary.py` picks out of the bench's human output and puts in the summary
//! table at the top of BENCHMARKS.md.

use serde_json::json;

/// What a figure is held against.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// No target: the figure is information.
    None,
    /// value / baseline at most this.
    RatioAtMost(f64),
    /// value / baseline at least this.
    RatioAtLeast(f64),
    /// The value itself at most this (in the figure's unit).
    AtMost(f64),
}

/// Print the figure line of `metric` of `bench`: `value` (in `unit`) next to `baseline`
/// measured in the same run, if any, their ratio, the goal as text and whether it is met.
///
/// A ratio needs a baseline above zero: a baseline of zero or less (an added latency lost in the
/// run's noise, say) gives the line no ratio, so a ratio goal is shown but neither met nor missed.
pub fn figure(bench: &str, metric: &str, value: f64, baseline: Option<f64>, unit: &str, goal: Goal) {
    println!("{}", line(bench, metric, value, baseline, unit, goal));
}

/// The JSON object [`figure`] prints.
fn line(bench: &str, metric: &str, value: f64, baseline: Option<f64>, unit: &str, goal: Goal) -> serde_json::Value {
    let ratio = baseline.filter(|b| *b > 0.0).map(|b| value / b);
    let (target, pass) = match goal {
        Goal::None => (None, None),
        Goal::RatioAtMost(x) => (Some(format!("ratio ≤ {x}")), ratio.map(|r| r <= x)),
        Goal::RatioAtLeast(x) => (Some(format!("ratio ≥ {x}")), ratio.map(|r| r >= x)),
        Goal::AtMost(x) => (Some(format!("≤ {} {unit}", bound(x)).trim_end().to_owned()), Some(value <= x)),
    };
    json!({"bench": bench, "metric": metric, "value": value, "baseline": baseline, "ratio": ratio,
        "unit": unit, "target": target, "pass": pass})
}

/// A bound as the summary shows it: at most three decimals, no trailing zeros (`0.285`, `50`).
fn bound(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_goal_is_judged_against_a_positive_baseline() {
        let met = line("b", "m", 1.2, Some(1.0), "ms", Goal::RatioAtMost(1.5));
        assert_eq!((met["ratio"].as_f64(), met["pass"].as_bool()), (Some(1.2), Some(true)));
        let missed = line("b", "m", 2.0, Some(1.0), "ms", Goal::RatioAtMost(1.5));
        assert_eq!(missed["pass"], json!(false));
    }

    #[test]
    fn a_bound_computed_in_the_run_is_shown_to_three_decimals() {
        assert_eq!(line("b", "m", 0.25, None, "cores", Goal::AtMost(0.284_926_170_878_276))["target"], "≤ 0.285 cores");
        assert_eq!(line("b", "m", 9.0, None, "ms", Goal::AtMost(50.0))["target"], "≤ 50 ms");
        assert_eq!(line("b", "m", 0.0, None, "", Goal::AtMost(0.0))["target"], "≤ 0", "no unit, no trailing space");
    }

    #[test]
    fn a_baseline_of_zero_or_less_gives_no_ratio_and_no_verdict() {
        for baseline in [0.0, -2.7] {
            let noise = line("b", "m", 1.16, Some(baseline), "ms", Goal::RatioAtMost(1.5));
            assert_eq!((&noise["ratio"], &noise["pass"]), (&json!(null), &json!(null)), "baseline {baseline}");
            assert_eq!(noise["target"], "ratio ≤ 1.5");
        }
    }
}
