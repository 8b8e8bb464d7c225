use toolcall::{tool, ToolError};

/// Reads a note from the notes folder.
#[tool]
fn read_note(
    /// The note's file name, for example `groceries.txt`.
    name: String,
) -> Result<String, ToolError> {
    let text = std::fs::read_to_string(format!("notes/{name}"))?;
    Ok(text)
}

fn main() {}
