use toolcall::{tool, Rejection};

/// Reads a register.
#[tool]
unsafe fn read_register(
    /// The register's address.
    address: u32,
) -> Result<u32, Rejection> {
    Ok(address)
}

fn main() {}
