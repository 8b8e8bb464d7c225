use toolcall::tool;

/// Logs a line.
#[tool(side_effect)]
fn log_line(
    /// The line.
    line: String,
) {
    let _ = line;
}

fn main() {}
