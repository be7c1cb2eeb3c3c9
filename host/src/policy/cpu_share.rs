//! [`CpuShare`]: how much call time per second a plugin's reconciles may use, across all its
//! workers (policy `cpuShare`), and the default rule when the policy sets none ([`CpuShare::fair`]).
//! Plain data; `controller::cpu_share` enforces it.

use std::fmt;

use serde::Deserialize;
use wasmop_types::Quantity;

/// Smallest share accepted: `1m` (a thousandth of a core), Kubernetes' smallest CPU unit.
pub const MIN_CPU_SHARE_MILLIS: u32 = 1;
/// Largest share accepted: 256 cores, the most workers a plugin can have (`--concurrency`).
pub const MAX_CPU_SHARE_MILLIS: u32 = 256_000;

/// A share of CPU in cores, as Kubernetes writes CPU (`0.5`, `500m`, `2`): the call time, in
/// seconds per second, a plugin's reconciles may use across all its workers. `1` is one call
/// running all the time; `0.25` is a quarter of that, whatever the number of workers.
///
/// Kept in thousandths of a core (millicores).
///
/// ```
/// use wasmop::policy::{CpuShare, parse_cpu_share};
/// assert_eq!(parse_cpu_share("500m").unwrap(), parse_cpu_share("0.5").unwrap());
/// assert_eq!(parse_cpu_share("0.25").unwrap().to_string(), "0.25");
/// assert_eq!(CpuShare::fair(8, 3).to_string(), "2.666");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuShare {
    millis: u32,
}

impl CpuShare {
    /// One core: one call running all the time, the least [`CpuShare::fair`] gives.
    pub const ONE_CORE: Self = Self { millis: 1000 };

    /// A share of `millis` thousandths of a core, clamped to the accepted range.
    pub fn from_millis(millis: u32) -> Self {
        Self { millis: millis.clamp(MIN_CPU_SHARE_MILLIS, MAX_CPU_SHARE_MILLIS) }
    }

    /// The share in thousandths of a core.
    pub fn millis(self) -> u32 {
        self.millis
    }

    /// The share in cores (call-seconds per second).
    pub fn cores(self) -> f64 {
        f64::from(self.millis) / 1000.0
    }

    /// The default share of a plugin whose policy sets none: `--concurrency` cores split evenly
    /// between the `plugins` this host runs (rounded down to a thousandth), and never less than
    /// one core (one call at a time). With one plugin it is `concurrency`, as many calls as the
    /// plugin has workers: the default never slows down a plugin that runs alone.
    ///
    /// ```
    /// use wasmop::policy::CpuShare;
    /// assert_eq!(CpuShare::fair(8, 1).to_string(), "8");
    /// assert_eq!(CpuShare::fair(8, 2).to_string(), "4");
    /// assert_eq!(CpuShare::fair(8, 20), CpuShare::ONE_CORE);
    /// assert_eq!(CpuShare::fair(8, 0).to_string(), "8");
    /// ```
    pub fn fair(concurrency: usize, plugins: usize) -> Self {
        let total = u64::try_from(concurrency).unwrap_or(u64::MAX).saturating_mul(1000);
        let each = total / u64::try_from(plugins.max(1)).unwrap_or(u64::MAX);
        Self::from_millis(u32::try_from(each).unwrap_or(u32::MAX).max(Self::ONE_CORE.millis))
    }
}

impl fmt::Display for CpuShare {
    /// In cores, as a decimal without trailing zeros: `0.5`, `2`, `0.001`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.millis / 1000, self.millis % 1000);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let frac = format!("{frac:03}");
        write!(f, "{whole}.{}", frac.trim_end_matches('0'))
    }
}

/// Parse a CPU share: a Kubernetes CPU quantity (`0.5`, `500m`, `2`) from `1m` to `256`.
///
/// ```
/// use wasmop::policy::parse_cpu_share;
/// assert_eq!(parse_cpu_share("0.5").unwrap().millis(), 500);
/// assert_eq!(parse_cpu_share("0").unwrap_err(), "0 is less than the smallest share, 1m (0.001 of a core)");
/// assert_eq!(parse_cpu_share("1000").unwrap_err(), "1000 is more than the largest share, 256 (cores)");
/// assert!(parse_cpu_share("half").unwrap_err().contains("is not a quantity"));
/// ```
///
/// # Errors
/// One line saying what is wrong, without naming the field (the caller does).
pub fn parse_cpu_share(text: &str) -> Result<CpuShare, String> {
    let quantity = Quantity::parse(text).map_err(|e| e.to_string())?;
    // Thousandths, rounded up as Kubernetes does (`0.0001` is 1m).
    let millis = quantity.to_millis_ceil().ok_or_else(|| format!("{text} is more than the largest share, 256 (cores)"))?;
    if millis < i64::from(MIN_CPU_SHARE_MILLIS) {
        return Err(format!("{text} is less than the smallest share, 1m (0.001 of a core)"));
    }
    if millis > i64::from(MAX_CPU_SHARE_MILLIS) {
        return Err(format!("{text} is more than the largest share, 256 (cores)"));
    }
    Ok(CpuShare::from_millis(u32::try_from(millis).expect("within the range checked")))
}

/// `cpuShare` as written in the policy file: a YAML number (`0.5`) or a string (`500m`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum CpuShareEntry {
    /// `cpuShare: 0.5`.
    Number(f64),
    /// `cpuShare: 500m`.
    Text(String),
}

impl CpuShareEntry {
    /// The share written.
    pub(super) fn parse(&self) -> Result<CpuShare, String> {
        match self {
            Self::Number(n) => parse_cpu_share(&n.to_string()),
            Self::Text(t) => parse_cpu_share(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_read_in_cores_or_millicores_and_shown_in_cores() {
        for (text, millis, shown) in [("0.5", 500, "0.5"), ("500m", 500, "0.5"), ("2", 2000, "2"), ("1.25", 1250, "1.25")] {
            let share = parse_cpu_share(text).unwrap();
            assert_eq!((share.millis(), share.to_string().as_str()), (millis, shown), "{text}");
        }
        assert_eq!(parse_cpu_share("0.0001").unwrap().millis(), 1, "finer than 1m rounds up");
        assert_eq!(parse_cpu_share("256").unwrap().cores(), 256.0);
        assert!(parse_cpu_share("-1").is_err());
    }

    #[test]
    fn the_default_splits_the_concurrency_between_the_plugins_and_never_goes_below_one_core() {
        let fair: Vec<String> = (1..=9).map(|plugins| CpuShare::fair(8, plugins).to_string()).collect();
        assert_eq!(fair, ["8", "4", "2.666", "2", "1.6", "1.333", "1.142", "1", "1"]);
        assert_eq!(CpuShare::fair(1, 1), CpuShare::ONE_CORE);
        assert_eq!(CpuShare::fair(256, 1).millis(), MAX_CPU_SHARE_MILLIS);
    }
}
