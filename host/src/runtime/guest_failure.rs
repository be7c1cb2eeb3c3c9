//! What a failed guest said, in one line: the reason a trap is reported with.
//!
//! A trap itself only says `unreachable`; the language runtime said why on stderr just before.
//! Each runtime words it differently, and the useful line is rarely the last one:
//! - Rust: `panicked at src/lib.rs:3:5:` then the panic message on the next line;
//! - Python (componentize-py): a traceback whose last unindented line is the exception
//!   (`ValueError: bad size`), followed by the runtime's own panic (`Python function threw an
//!   unexpected exception`), which says nothing;
//! - JavaScript (componentize-js / StarlingMonkey): an exception thrown out of an export
//!   becomes ``invalid variant tag value `undefined` (received `TypeError: bad size`)``, or an
//!   uncaught error line, then a stack and `Redirecting call to abort() to mozalloc_abort`;
//! - Go (mainline, wasip1): `panic: <message>` (a panic during a panic adds lines, the first
//!   one ending in `[recovered]`), or `fatal error: <message>` from the runtime, then a
//!   goroutine dump (`goroutine 1 [running]:` and frames); the exit that follows ends in
//!   `unreachable` in a reactor component.

use super::log_budget::{MAX_LINE, one_line};

/// The line that says why the guest failed, escaped and cut as a log line; `None` when stderr
/// is empty.
pub(super) fn reason(stderr: &str) -> Option<String> {
    let lines: Vec<&str> = stderr.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    let line = python_exception(&lines)
        .or_else(|| javascript_error(&lines))
        .or_else(|| go_panic(&lines))
        .or_else(|| rust_panic(&lines))
        .or_else(|| lines.iter().rev().map(|l| l.trim()).find(|l| !is_noise(l)).map(str::to_owned))?;
    Some(one_line(&line, MAX_LINE))
}

/// Lines runtimes print on the way down that never say why.
fn is_noise(line: &str) -> bool {
    line.starts_with("note: run with")
        || line.starts_with("Redirecting call to abort()")
        || line == "Stack:"
        || line.contains("Python function threw an unexpected exception")
}

/// The exception line of the last Python traceback.
fn python_exception(lines: &[&str]) -> Option<String> {
    let start = lines.iter().rposition(|l| l.starts_with("Traceback (most recent call last)"))?;
    lines[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("thread '"))
        .filter(|l| !l.starts_with(' ') && !l.starts_with('\t'))
        .last()
        .map(|l| format!("Python exception: {}", l.trim()))
}

/// The JavaScript error a StarlingMonkey component failed with.
fn javascript_error(lines: &[&str]) -> Option<String> {
    if !lines.iter().any(|l| l.starts_with("Redirecting call to abort() to mozalloc_abort") || l.trim() == "Stack:") {
        return None;
    }
    let received = lines.iter().rev().find_map(|l| {
        let (_, rest) = l.split_once("(received `")?;
        rest.rsplit_once("`)").map(|(error, _)| error.to_owned())
    });
    let error = received.or_else(|| {
        let before_stack = lines.iter().position(|l| l.trim() == "Stack:").unwrap_or(lines.len());
        lines[..before_stack].iter().rev().map(|l| l.trim()).find(|l| !is_noise(l)).map(str::to_owned)
    })?;
    Some(format!("JavaScript error: {}", error.trim()))
}

/// A Go panic or fatal runtime error: its first line, before the goroutine dump.
fn go_panic(lines: &[&str]) -> Option<String> {
    let dump = lines.iter().position(|l| l.starts_with("goroutine ") && l.ends_with("]:"))?;
    let line = lines[..dump].iter().find(|l| l.starts_with("panic: ") || l.starts_with("fatal error: "))?;
    Some(match line.strip_prefix("panic: ") {
        Some(message) => format!("Go panic: {}", message.strip_suffix(" [recovered]").unwrap_or(message)),
        None => format!("Go {line}"),
    })
}

/// A Rust panic: the `panicked at` location joined with the message under it.
fn rust_panic(lines: &[&str]) -> Option<String> {
    let i = lines.iter().rposition(|l| l.contains("panicked at"))?;
    let at = lines[i].split_once("panicked at").map_or(lines[i], |(_, at)| at.trim());
    Some(match lines.get(i + 1).map(|l| l.trim()).filter(|l| !is_noise(l)) {
        Some(message) => format!("panicked at {at} {message}"),
        None => format!("panicked at {at}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_traceback_gives_its_exception_line() {
        let stderr = "Traceback (most recent call last):\n  File \"/0/app.py\", line 110, in reconcile\n    \
                      raise ValueError(\"unlucky size 13\")\nValueError: unlucky size 13\n\
                      thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:\n\
                      Python function threw an unexpected exception\n\
                      note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(reason(stderr).unwrap(), "Python exception: ValueError: unlucky size 13");
    }

    #[test]
    fn a_javascript_exception_out_of_an_export_gives_the_error() {
        let stderr = "invalid variant tag value `undefined` (received `TypeError: unlucky size 13`) specified for `ReconcileError`\n\
                      Stack:\n  export_reconciler_0_1_0$reconcile@/tmp/x/sources/initializer.js:817:17\n\
                      Redirecting call to abort() to mozalloc_abort\n";
        assert_eq!(reason(stderr).unwrap(), "JavaScript error: TypeError: unlucky size 13");
    }

    #[test]
    fn otherwise_the_javascript_line_before_the_stack_is_kept() {
        let stderr = "ReferenceError: nope is not defined\nStack:\n  reconcile@m.js:3:5\n\
                      Redirecting call to abort() to mozalloc_abort\n";
        assert_eq!(reason(stderr).unwrap(), "JavaScript error: ReferenceError: nope is not defined");
    }

    #[test]
    fn a_go_panic_gives_its_message_and_a_fatal_error_its_line() {
        let stderr = "panic: unlucky size 13\n\ngoroutine 1 [running]:\nexample.com/m.Reconcile(...)\n\t                      /src/m.go:12 +0x2\n";
        assert_eq!(reason(stderr).unwrap(), "Go panic: unlucky size 13");
        let stderr = "panic: runtime error: index out of range [3] with length 1 [recovered]\n\tpanic: again\n\n\
                      goroutine 1 [running]:\nmain.main()\n";
        assert_eq!(reason(stderr).unwrap(), "Go panic: runtime error: index out of range [3] with length 1");
        let stderr = "fatal error: out of memory\n\ngoroutine 1 gp=0x1 m=0 mp=0x2 [running]:\nruntime.throw()\n";
        assert_eq!(reason(stderr).unwrap(), "Go fatal error: out of memory");
    }

    #[test]
    fn a_rust_panic_joins_location_and_message() {
        let stderr = "thread '<unnamed>' panicked at src/lib.rs:3:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(reason(stderr).unwrap(), "panicked at src/lib.rs:3:5: boom");
    }

    #[test]
    fn otherwise_the_last_line_that_says_something() {
        assert_eq!(reason("first\nsecond\n\n").unwrap(), "second");
        assert_eq!(reason(""), None);
    }
}
