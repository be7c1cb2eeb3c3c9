//! Kubernetes resource quantities (`1Gi`, `500m`, `1.5`, `2e3`): [`Quantity`].

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a text is not a Kubernetes quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not `<number><suffix>`: a signed decimal number (`1`, `-1.5`, `.5`) followed by nothing,
    /// a binary suffix (`Ki` `Mi` `Gi` `Ti` `Pi` `Ei`), a decimal suffix (`n` `u` `m` `k` `M`
    /// `G` `T` `P` `E`) or an exponent (`e3`, `E-2`). Carries the text.
    #[error("{0:?} is not a quantity: write a number with an optional suffix, like 1Gi, 500m, 1.5 or 2e3")]
    Malformed(String),
    /// A well-formed quantity too large to hold (more than about 10^29). Carries the text.
    #[error("quantity {0:?} is out of range")]
    OutOfRange(String),
}

/// A Kubernetes resource quantity (`resource.Quantity`): a storage size, a CPU amount, a count.
///
/// Kept exactly, in billionths (nano-units); finer fractions round up, as Kubernetes does.
/// Quantities compare by value whatever their suffix, and display as they were written.
/// In JSON a quantity is a string, or a number (as `x-kubernetes-int-or-string` allows).
///
/// ```
/// use wasmop_types::Quantity;
///
/// let gi: Quantity = "1Gi".parse()?;
/// assert_eq!(gi.to_units_ceil(), Some(1 << 30));
/// assert!(gi > "1G".parse()?);
/// assert_eq!("500m".parse::<Quantity>()?, "0.5".parse()?);
/// assert_eq!("500m".parse::<Quantity>()?.to_millis_ceil(), Some(500));
/// assert_eq!("1.5".parse::<Quantity>()?.to_units_ceil(), Some(2));
/// assert_eq!("2e3".parse::<Quantity>()?.to_units_ceil(), Some(2000));
/// assert!("1 Gi".parse::<Quantity>().is_err());
/// # Ok::<(), wasmop_types::QuantityError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Quantity {
    text: String,
    nanos: i128,
}

impl Quantity {
    /// Parse a quantity in Kubernetes syntax.
    ///
    /// # Errors
    /// [`QuantityError::Malformed`] when the text is not a quantity, [`QuantityError::OutOfRange`]
    /// when it is too large to hold.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let malformed = || QuantityError::Malformed(text.to_owned());
        let out_of_range = || QuantityError::OutOfRange(text.to_owned());
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = unsigned.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(unsigned.len());
        let (number, suffix) = unsigned.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(malformed());
        }
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(out_of_range());
        }
        let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| malformed())? };
        let (binary_power, decimal_exponent) = suffix_scale(suffix).ok_or_else(malformed)?;
        // value = mantissa * 2^binary_power * 10^(decimal_exponent - fraction digits); in nanos,
        // the decimal exponent gains 9.
        let exponent = decimal_exponent + 9 - i32::try_from(fraction.len()).map_err(|_| out_of_range())?;
        let scaled = mantissa.checked_mul(1i128.checked_shl(binary_power).ok_or_else(out_of_range)?).ok_or_else(out_of_range)?;
        let nanos = if exponent >= 0 {
            let factor = 10i128.checked_pow(exponent.unsigned_abs()).ok_or_else(out_of_range)?;
            scaled.checked_mul(factor).ok_or_else(out_of_range)?
        } else {
            // Finer than a nano-unit: round up (a zero stays zero).
            match 10i128.checked_pow(exponent.unsigned_abs()) {
                Some(divisor) => (scaled + divisor - 1) / divisor,
                None => i128::from(scaled > 0),
            }
        };
        Ok(Self { text: text.to_owned(), nanos: if negative { -nanos } else { nanos } })
    }

    /// The value in billionths of a unit (`1m` is 1 000 000, `1` is 1 000 000 000).
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in whole units, rounded up (`1.5` is 2, `100m` is 1), like Kubernetes'
    /// `Quantity.Value()`; `None` beyond `i64`. Bytes for a storage size, cores for CPU.
    pub fn to_units_ceil(&self) -> Option<i64> {
        i64::try_from(ceil_div(self.nanos, 1_000_000_000)).ok()
    }

    /// The value in thousandths, rounded up (`0.5` is 500), like Kubernetes'
    /// `Quantity.MilliValue()`; `None` beyond `i64`. Millicores for CPU.
    pub fn to_millis_ceil(&self) -> Option<i64> {
        i64::try_from(ceil_div(self.nanos, 1_000_000)).ok()
    }

    /// The value in units as a floating-point number (approximate).
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / 1e9
    }

    /// The text the quantity was parsed from.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// The binary power of two and the decimal exponent of a suffix; `None` if it is not one.
fn suffix_scale(suffix: &str) -> Option<(u32, i32)> {
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = binary.iter().position(|s| *s == suffix) {
        return Some((10 * (i as u32 + 1), 0));
    }
    let decimal = match suffix {
        "" => 0,
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => {
            let exponent = suffix.strip_prefix(['e', 'E'])?;
            let digits = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
                return None;
            }
            exponent.parse().ok()?
        }
    };
    Some((0, decimal))
}

fn ceil_div(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d > 0 { q + 1 } else { q }
}

impl PartialEq for Quantity {
    /// Equal values, whatever the suffix: `1Ki == 1024`.
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    /// By value.
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Quantity {
    /// As written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// [`Quantity::parse`].
    fn from_str(text: &str) -> Result<Self, QuantityError> {
        Self::parse(text)
    }
}

impl Serialize for Quantity {
    /// The text, as Kubernetes writes quantities.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// A string, or a JSON number (as `x-kubernetes-int-or-string` fields hold).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(serde_json::Number),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Text(t) => t,
            Raw::Number(n) => n.to_string(),
        };
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn suffixes_scale_as_in_kubernetes() {
        let cases: [(&str, i128); 14] = [
            ("1", 1_000_000_000),
            ("1Ki", 1024 * 1_000_000_000),
            ("1Mi", (1 << 20) * 1_000_000_000),
            ("1Ei", (1 << 60) * 1_000_000_000),
            ("1k", 1_000 * 1_000_000_000),
            ("1E", 1_000_000_000_000_000_000 * 1_000_000_000),
            ("500m", 500_000_000),
            ("2u", 2_000),
            ("3n", 3),
            ("1.5", 1_500_000_000),
            (".5Gi", (1 << 29) * 1_000_000_000),
            ("2e3", 2_000 * 1_000_000_000),
            ("25E-1", 2_500_000_000),
            ("-1.5k", -1_500 * 1_000_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(q(text).nanos(), nanos, "{text}");
        }
    }

    #[test]
    fn comparison_is_by_value_whatever_the_suffix() {
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("999Mi") < q("1Gi"));
        assert!(q("-1") < q("0"));
        assert_eq!(q("1Gi").to_string(), "1Gi");
    }

    #[test]
    fn units_and_millis_round_up() {
        assert_eq!(q("1.5").to_units_ceil(), Some(2));
        assert_eq!(q("100m").to_units_ceil(), Some(1));
        assert_eq!(q("-1.5").to_units_ceil(), Some(-1));
        assert_eq!(q("1.5").to_millis_ceil(), Some(1500));
        assert_eq!(q("1n").to_millis_ceil(), Some(1));
        assert_eq!(q("0.1n").nanos(), 1, "finer than a nano-unit rounds up");
        assert_eq!(q("0").nanos(), 0);
        assert_eq!(q("100E").to_units_ceil(), None, "beyond i64");
        assert!((q("2.5Ki").as_f64() - 2560.0).abs() < 1e-9);
    }

    #[test]
    fn malformed_quantities_are_refused_naming_the_text() {
        for bad in ["", "Gi", "1 Gi", "1gi", "1GiB", "1.2.3", ".", "-", "1e", "1e+", "0x10", "1Ki1", "+-1", "1e99999"] {
            let err = Quantity::parse(bad).unwrap_err();
            assert_eq!(err, QuantityError::Malformed(bad.into()), "{bad}");
            assert!(err.to_string().contains("is not a quantity"), "{err}");
        }
    }

    #[test]
    fn huge_quantities_are_out_of_range() {
        assert_eq!(Quantity::parse("1e40"), Err(QuantityError::OutOfRange("1e40".into())));
        assert!(matches!(Quantity::parse("1234567890123456789012345678901234"), Err(QuantityError::OutOfRange(_))));
        assert!(matches!(Quantity::parse("1000000000000000000000Ei"), Err(QuantityError::OutOfRange(_))));
    }

    #[test]
    fn json_holds_strings_or_numbers() {
        let from_string: Quantity = serde_json::from_value(serde_json::json!("10Gi")).unwrap();
        assert_eq!(from_string, q("10Gi"));
        let from_number: Quantity = serde_json::from_value(serde_json::json!(3)).unwrap();
        assert_eq!(from_number, q("3"));
        assert_eq!(serde_json::to_value(q("10Gi")).unwrap(), serde_json::json!("10Gi"));
        let err = serde_json::from_value::<Quantity>(serde_json::json!("ten")).unwrap_err();
        assert!(err.to_string().contains("\"ten\" is not a quantity"), "{err}");
    }
}
