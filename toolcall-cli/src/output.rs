//! Where the commands read and write: files, or the standard streams.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;

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
