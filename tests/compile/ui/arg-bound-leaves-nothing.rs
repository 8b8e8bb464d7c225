use toolcall::{tool, Rejection};

/// Sets a volume.
#[tool(side_effect)]
fn set_volume(
    /// The volume, from 0 to 255.
    #[arg(exclusive_max = 0)]
    volume: u8,
) -> Result<u8, Rejection> {
    Ok(volume)
}

fn main() {}
