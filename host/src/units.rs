//! Parsing of durations (`100ms`, `1s`, `2m`) and byte sizes (`64Mi`, `1G`, `4096`).

use std::time::Duration;

/// Parse `<number><unit>` with unit `ms`, `s`, `m` or `h`.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid duration {s:?}: expected e.g. 250ms, 1s, 2m"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("invalid duration {s:?}: the unit must be ms, s, m or h")),
    }
}

/// Parse a byte size: a number with an optional suffix `Ki`, `Mi`, `Gi` (binary) or `K`, `M`,
/// `G` (decimal), as in Kubernetes quantities.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?}: expected e.g. 64Mi"))?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        _ => return Err(format!("invalid size {s:?}: the suffix must be Ki, Mi, Gi, K, M or G")),
    };
    n.checked_mul(factor).ok_or_else(|| format!("size {s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("5").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64Mi"), Ok(64 << 20));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
        assert!(parse_bytes("1Ti").is_err());
    }
}
