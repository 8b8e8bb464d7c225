use toolcall::{tool, Rejection};

/// Records a measurement.
#[tool(side_effect)]
fn record(
    /// The reading, in micrometres.
    #[arg(max = 9007199254740993)]
    reading: f64,
    /// The sequence number.
    #[arg(max = 10000000000000000000)]
    sequence: u64,
) -> Result<f64, Rejection> {
    let _ = sequence;
    Ok(reading)
}

fn main() {}
