//! Host side of the `log` interface, and forwarding of guest stdout/stderr, into `tracing`.
//!
//! Everything a plugin writes reaches the host's log bounded and on one line per message:
//! - at most [`MAX_LOG_LINES`] lines and [`MAX_LOG_BYTES`] bytes per call, counted across the
//!   `log` import, stdout and stderr together; what is over is dropped, and one warning line
//!   at the end of the call says how many lines and bytes were dropped;
//! - each message is cut to [`MAX_LINE`] bytes;
//! - control characters (`\n`, `\r`, `\t`, ESC and every other C0 and C1 character, DEL) and
//!   the Unicode line and paragraph separators are escaped (`\n`, `\u{1b}`), so a plugin can
//!   neither forge a host log line in the text format nor drive the terminal.

/// Longest log line kept from a plugin, in bytes after escaping.
pub const MAX_LINE: usize = 4096;
/// Lines a plugin may log per call (`log` import, stdout and stderr together).
pub const MAX_LOG_LINES: usize = 100;
/// Bytes a plugin may log per call (`log` import, stdout and stderr together).
pub const MAX_LOG_BYTES: usize = 64 << 10;

/// Plugin text as one line: control characters and line separators escaped, at most `max`
/// bytes (then ending in `… (N bytes)`, N the original length).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max));
    for c in text.chars() {
        if out.len() >= max {
            let mut end = max;
            while !out.is_char_boundary(end) {
                end -= 1;
            }
            out.truncate(end);
            out.push_str(&format!("… ({} bytes)", text.len()));
            return out;
        }
        if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// What one call may still log, and what it was refused.
#[derive(Debug, Default)]
pub(super) struct LogBudget {
    lines: usize,
    bytes: usize,
    /// Lines refused so far.
    pub(super) dropped_lines: usize,
    /// Bytes refused so far.
    pub(super) dropped_bytes: usize,
}

impl LogBudget {
    /// `text` as the line to log ([`one_line`]) if it fits in what is left, counted as logged;
    /// else `None`, and `text` counted as dropped. Once one line is dropped, every later one is
    /// too (the log keeps a prefix of the output), without the cost of escaping it.
    pub(super) fn take(&mut self, text: &str) -> Option<String> {
        if self.dropped_lines == 0 && self.lines < MAX_LOG_LINES {
            let line = one_line(text, MAX_LINE);
            if self.bytes + line.len() <= MAX_LOG_BYTES {
                self.lines += 1;
                self.bytes += line.len();
                return Some(line);
            }
        }
        self.dropped(1, text.len());
        None
    }

    /// Count `lines` and `bytes` as dropped.
    pub(super) fn dropped(&mut self, lines: usize, bytes: usize) {
        self.dropped_lines = self.dropped_lines.saturating_add(lines);
        self.dropped_bytes = self.dropped_bytes.saturating_add(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_so_a_message_stays_one_line() {
        assert_eq!(one_line("a\nb\r\tc\u{1b}[31m\u{7f}\u{85}\u{2028}", 100), "a\\nb\\r\\tc\\u{1b}[31m\\u{7f}\\u{85}\\u{2028}");
        assert_eq!(one_line("plain é", 100), "plain é");
    }

    #[test]
    fn long_messages_are_cut_with_their_length() {
        let line = one_line(&"\n".repeat(1 << 20), MAX_LINE);
        assert!(line.len() < MAX_LINE + 32 && line.ends_with("… (1048576 bytes)"), "{}", line.len());
        assert!(!line.contains('\n'));
        assert!(one_line(&"é".repeat(3000), 101).starts_with(&"é".repeat(50)));
    }

    #[test]
    fn the_budget_keeps_a_prefix_of_lines_and_bytes() {
        let mut budget = LogBudget::default();
        assert!((0..MAX_LOG_LINES).all(|_| budget.take("0123456789").is_some()));
        assert_eq!(budget.take(&"\n".repeat(5000)), None);
        assert_eq!((budget.dropped_lines, budget.dropped_bytes), (1, 5000), "dropped bytes count what was sent");
        let mut budget = LogBudget::default();
        let almost = "x".repeat(MAX_LINE);
        while budget.bytes + MAX_LINE <= MAX_LOG_BYTES {
            assert_eq!(budget.take(&almost).map(|l| l.len()), Some(MAX_LINE));
        }
        assert_eq!(budget.take("\n"), None, "the byte budget is spent");
        assert_eq!(budget.take("x"), None, "after a dropped line, later lines are dropped too");
        assert_eq!((budget.dropped_lines, budget.dropped_bytes), (2, 2));
    }
}
