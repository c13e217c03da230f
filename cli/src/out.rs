//! Writing to the terminal safely.
//!
//! * [`outln!`] writes one line to standard output and returns an error
//!   instead of panicking when stdout is closed, a full disk or a broken
//!   pipe, so `kvw … > /dev/full` or `kvw … | head -1` end with one error
//!   line and a non-zero exit.
//! * [`clean`] escapes control characters (C0, DEL, C1) and Unicode
//!   direction overrides in text that echoes input (file names, reasons,
//!   outcomes from a receipt), so a hostile name cannot move the cursor,
//!   recolour the terminal or print a fake "OK" line.

/// `text` with every control character written as a visible escape
/// (`\e`, `\n`, `\u{..}`); ordinary text is unchanged.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_bidi_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// Unicode bidirectional formatting characters, which can reorder what a
/// terminal shows (the "Trojan Source" characters).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Write one line to stdout; a write error becomes an `anyhow` error.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, $($arg)*)
            .and_then(|()| stdout.flush())
            .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
    }};
}

/// Write one line to stderr, ignoring failure (there is nowhere else to say it).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_only() {
        assert_eq!(
            clean("a\u{1b}[2Kb\r\nc\u{9b}d\u{202e}é"),
            "a\\e[2Kb\\r\\nc\\u{9b}d\\u{202e}é"
        );
    }
}
