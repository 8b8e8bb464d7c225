//! Where the commands read and write: files, or the standard streams.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolcall_core::__private::echo::printable;

use crate::Error;

/// One line for a terminal: its control characters (a newline, a tab, an
/// ANSI escape) and the characters that reorder or hide text (a
/// bidirectional override, a zero-width space) written as their escapes
/// (`\u{202e}`), so that a name, a reason or a note someone typed can
/// neither forge a line, recolour one, nor read backwards.
pub(crate) fn line(text: &str) -> String {
    printable(text, usize::MAX).into_owned()
}

/// Text of several lines for a terminal: each line as [`line`] shows it,
/// the line breaks kept.
pub(crate) fn terminal(text: &str) -> String {
    text.split('\n').map(line).collect::<Vec<_>>().join("\n")
}

/// JSON text for a terminal, still the same JSON: each character that
/// reorders or hides text, or is a control character in a string, written
/// as JSON's own escape (`\u202e`); the line breaks and indentation of
/// pretty JSON kept.
pub(crate) fn json_text(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let mut one = [0u8; 4];
    for c in json.chars() {
        let shown = c.encode_utf8(&mut one);
        if matches!(c, '\n' | '\r' | '\t') || printable(shown, 16) == *shown {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0u16; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

/// Opens `path` for reading; `-` is standard input.
pub(crate) fn open_input(path: Option<&Path>) -> Result<Box<dyn BufRead>, Error> {
    match path {
        None => Ok(Box::new(io::stdin().lock())),
        Some(path) if path.as_os_str() == "-" => Ok(Box::new(io::stdin().lock())),
        Some(path) => File::open(path)
            .map(|file| Box::new(BufReader::new(file)) as Box<dyn BufRead>)
            .map_err(Error::io(format!("open {}", path.display()))),
    }
}

/// Writes `text` to `path`, or to standard output.
pub(crate) fn write_output(path: Option<&Path>, text: &str) -> Result<(), Error> {
    match path {
        // Written beside the target and renamed over it, so that a reader
        // never sees half a file.
        Some(path) => {
            let mut partial = path.as_os_str().to_owned();
            partial.push(".partial");
            let partial = PathBuf::from(partial);
            std::fs::write(&partial, text)
                .and_then(|()| std::fs::rename(&partial, path))
                .map_err(|source| {
                    let _ = std::fs::remove_file(&partial);
                    Error::Io {
                        action: format!("write {}", path.display()),
                        source,
                    }
                })
        }
        None => {
            let mut stdout = io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(Error::io("write to standard output"))
        }
    }
}

pub(crate) fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_reorders_or_hides_text_is_shown_as_its_escape() {
        assert_eq!(line("ana\u{202e}nib\tx\n"), "ana\\u{202e}nib\\tx\\n");
        assert_eq!(terminal("a\u{200b}\nb\u{7}"), "a\\u{200b}\nb\\u{7}");
        let json = serde_json::json!({"note": "no\u{202e}pe\u{7f}", "by": "é"});
        let shown = json_text(&pretty(&json));
        assert!(shown.contains("no\\u202epe\\u007f"), "{shown}");
        assert!(shown.contains('é') && shown.contains('\n'), "{shown}");
        assert_eq!(serde_json::from_str::<Value>(&shown).unwrap(), json);
    }
}
