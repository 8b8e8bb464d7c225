use toolcall::{tool, Rejection};

/// Sets a ratio.
#[tool(side_effect)]
fn set_ratio(
    /// Strictly between the bounds.
    #[arg(exclusive_min = 0.5, exclusive_max = 0.5)]
    ratio: f64,
    /// Letters.
    #[arg(min_length = 8, max_length = 4)]
    code: String,
) -> Result<f64, Rejection> {
    let _ = code;
    Ok(ratio)
}

fn main() {}
