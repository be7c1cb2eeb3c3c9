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
pub fn figure(bench: &str, metric: &str, value: f64, baseline: Option<f64>, unit: &str, goal: Goal) {
    let ratio = baseline.filter(|b| *b != 0.0).map(|b| value / b);
    let (target, pass) = match goal {
        Goal::None => (None, None),
        Goal::RatioAtMost(x) => (Some(format!("ratio ≤ {x}")), ratio.map(|r| r <= x)),
        Goal::RatioAtLeast(x) => (Some(format!("ratio ≥ {x}")), ratio.map(|r| r >= x)),
        Goal::AtMost(x) => (Some(format!("≤ {x} {unit}")), Some(value <= x)),
    };
    let line = json!({"bench": bench, "metric": metric, "value": value, "baseline": baseline, "ratio": ratio,
        "unit": unit, "target": target, "pass": pass});
    println!("{line}");
}
