//! [`parsed_size`]: what a JSON text will cost in memory once parsed into a `serde_json::Value`,
//! estimated from its bytes before anything parses it.
//!
//! The text's size says little about its parsed size: `[0,0,0,…]` is 2 bytes a value as text and
//! 32 bytes a value parsed, so 16 MiB of it take 256 MiB as a tree (and an object of short keys
//! more). The host refuses a response whose estimate is over
//! [`PARSED_SIZE_FACTOR`] × `maxResponseBytes` before parsing it, so that the parsed response is
//! bounded by a small multiple of the limit whatever shape its JSON has.

/// The parsed form of a response may take this many times `maxResponseBytes`.
pub const PARSED_SIZE_FACTOR: usize = 4;

/// What one JSON value costs parsed, beyond its string bytes: a `Value` (32 bytes) and its share
/// of its container (a vector slot or a map entry with its key's `String`).
pub const BYTES_PER_VALUE: usize = 48;

/// The estimated bytes of `text` parsed: the text itself (strings keep their bytes) plus
/// [`BYTES_PER_VALUE`] for every value and every object member. Counts the separators and
/// openers outside strings; linear, no allocation.
pub fn parsed_size(text: &str) -> usize {
    let (mut values, mut in_string, mut escaped) = (1usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            // Every `,` starts another value or member; `[` and `{` open one that may hold
            // another; `:` gives a member its value.
            b',' | b'[' | b'{' | b':' => values += 1,
            _ => {}
        }
    }
    text.len().saturating_add(values.saturating_mul(BYTES_PER_VALUE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes a parsed `Value` tree holds, counted the way the estimate means it.
    fn measured(value: &serde_json::Value) -> usize {
        use serde_json::Value;
        32 + match value {
            Value::String(s) => s.len(),
            Value::Array(items) => items.iter().map(measured).sum(),
            Value::Object(map) => map.iter().map(|(k, v)| 24 + k.len() + measured(v)).sum(),
            _ => 0,
        }
    }

    #[test]
    fn the_estimate_is_at_least_what_the_parsed_tree_holds() {
        for text in [
            "[0,0,0,0,0,0,0,0]",
            r#"{"a":0,"b":1,"c":[1,2,{"d":"x"}]}"#,
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"a long value, with commas: [and] {braces}"}}"#,
            r#""just a string with \" an escaped quote, and a comma""#,
        ] {
            let parsed: serde_json::Value = serde_json::from_str(text).unwrap();
            assert!(parsed_size(text) >= measured(&parsed), "{text}: {} < {}", parsed_size(text), measured(&parsed));
        }
    }

    #[test]
    fn dense_json_costs_many_times_its_text_and_strings_cost_about_their_bytes() {
        let zeros = format!("[{}0]", "0,".repeat(1 << 20));
        assert!(parsed_size(&zeros) > 20 * zeros.len(), "{}", parsed_size(&zeros));
        let string = format!(r#"{{"data":{{"x":"{}"}}}}"#, "a,b:[{".repeat(1 << 18));
        assert!(parsed_size(&string) < string.len() + 1000, "separators inside strings do not count");
    }
}
