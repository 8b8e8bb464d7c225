//! A child process's output read line by line on a thread of its own, so
//! that a test can wait for a line with a timeout.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;

/// The lines of `output` as they come, until it ends or fails, or the
/// receiver is dropped.
pub fn lines(output: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    received
}
