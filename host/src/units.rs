//! Parsing of durations (`100ms`, `1s`, `2m`), byte sizes (`64Mi`, `1G`, `4096`) and counts,
//! and the range checks every flag and policy value goes through. Errors are one line, meant
//! to follow the flag or policy field they concern.

use std::time::Duration;

/// Parse `<number><unit>` with unit `ms`, `s`, `m` or `h`.
///
/// # Errors
/// A message naming the accepted forms, or saying the value is too large to represent.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("invalid duration {s:?}: expected e.g. 250ms, 1s, 2m"))?;
    let seconds =
        |factor: u64| n.checked_mul(factor).map(Duration::from_secs).ok_or_else(|| format!("duration {s:?} is too large"));
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => seconds(60),
        "h" => seconds(3600),
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

/// Parse a duration and check it is within `min..=max`.
///
/// ```
/// use std::time::Duration;
/// use wasmop::units::duration_in;
/// let (min, max) = (Duration::from_millis(1), Duration::from_secs(300));
/// assert_eq!(duration_in("2s", min, max), Ok(Duration::from_secs(2)));
/// assert_eq!(duration_in("0s", min, max).unwrap_err(), "0s is less than the minimum of 1ms");
/// assert_eq!(duration_in("6m", min, max).unwrap_err(), "6m is more than the maximum of 5m");
/// ```
///
/// # Errors
/// As [`parse_duration`], or saying which bound the value is past.
pub fn duration_in(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < min {
        Err(format!("{s} is less than the minimum of {}", format_duration(min)))
    } else if d > max {
        Err(format!("{s} is more than the maximum of {}", format_duration(max)))
    } else {
        Ok(d)
    }
}

/// Parse a byte size and check it is within `min..=max`.
///
/// # Errors
/// As [`parse_bytes`], or saying which bound the value is past.
pub fn bytes_in(s: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_bytes(s)?;
    if n < min {
        Err(format!("{s} is less than the minimum of {}", format_bytes(min)))
    } else if n > max {
        Err(format!("{s} is more than the maximum of {}", format_bytes(max)))
    } else {
        Ok(n)
    }
}

/// Parse a whole number within `min..=max`.
///
/// # Errors
/// When `s` is not a whole number or is out of range.
pub fn count_in(s: &str, min: usize, max: usize) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| format!("invalid number {s:?}: expected a whole number"))?;
    if (min..=max).contains(&n) { Ok(n) } else { Err(format!("{s} is not between {min} and {max}")) }
}

/// A duration in the largest unit of [`parse_duration`] that writes it exactly.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        "0s".to_owned()
    } else if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

/// A byte size in the largest binary unit of [`parse_bytes`] that writes it exactly.
pub fn format_bytes(n: u64) -> String {
    let unit = [(30, "Gi"), (20, "Mi"), (10, "Ki")].into_iter().find(|&(shift, _)| n > 0 && n.is_multiple_of(1 << shift));
    match unit {
        Some((shift, suffix)) => format!("{}{suffix}", n >> shift),
        None => n.to_string(),
    }
}

/// A byte size for a person reading a progress line: `96 B`, `812 KB`, `3.7 MB` (decimal
/// units, one decimal under 10).
pub fn approximate_bytes(n: u64) -> String {
    let (value, unit) = match n {
        0..1_000 => return format!("{n} B"),
        1_000..1_000_000 => (n as f64 / 1e3, "KB"),
        1_000_000..1_000_000_000 => (n as f64 / 1e6, "MB"),
        _ => (n as f64 / 1e9, "GB"),
    };
    if value < 10.0 { format!("{value:.1} {unit}") } else { format!("{value:.0} {unit}") }
}

/// A duration for a person reading a progress line: `830ms`, `14.2s`, `1m42s`.
pub fn approximate_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", d.as_secs_f64()),
        _ => format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_show_rounded_sizes_and_durations() {
        assert_eq!(approximate_bytes(96), "96 B");
        assert_eq!(approximate_bytes(812_400), "812 KB");
        assert_eq!(approximate_bytes(3_640_000), "3.6 MB");
        assert_eq!(approximate_bytes(18_500_000), "18 MB");
        assert_eq!(approximate_duration(Duration::from_millis(830)), "830ms");
        assert_eq!(approximate_duration(Duration::from_millis(14_230)), "14.2s");
        assert_eq!(approximate_duration(Duration::from_secs(102)), "1m42s");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("5").is_err());
    }

    #[test]
    fn huge_durations_are_errors_not_overflows() {
        assert_eq!(parse_duration("18446744073709551615h"), Err("duration \"18446744073709551615h\" is too large".into()));
        assert!(parse_duration("307445734561825861m").is_err());
        assert!(parse_duration("99999999999999999999s").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("64Mi"), Ok(64 << 20));
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("2G"), Ok(2_000_000_000));
        assert!(parse_bytes("1Ti").is_err());
        assert!(parse_bytes("99999999999Gi").is_err());
    }

    #[test]
    fn ranges_name_the_bound() {
        assert_eq!(bytes_in("1Mi", 4 << 20, 4 << 30), Err("1Mi is less than the minimum of 4Mi".into()));
        assert_eq!(bytes_in("5Gi", 4 << 20, 4 << 30), Err("5Gi is more than the maximum of 4Gi".into()));
        assert_eq!(count_in("0", 1, 256), Err("0 is not between 1 and 256".into()));
        assert_eq!(count_in("-1", 1, 256), Err("invalid number \"-1\": expected a whole number".into()));
        assert_eq!(count_in("8", 1, 256), Ok(8));
    }

    #[test]
    fn formatting_round_trips() {
        for s in ["250ms", "1s", "90s", "5m", "2h", "0s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
        for s in ["4Mi", "1Gi", "3Ki", "1000"] {
            assert_eq!(format_bytes(parse_bytes(s).unwrap()), s);
        }
    }
}
