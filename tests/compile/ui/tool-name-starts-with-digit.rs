use toolcall::{tool, Rejection};

/// Renders a model; Gemini refuses a function name that starts with a digit.
#[tool(name = "3d_render")]
fn render(
    /// The scene file.
    scene: String,
) -> Result<String, Rejection> {
    Ok(scene)
}

fn main() {}
