use toolcall::{tool, Rejection};

/// Books a table. Call list_restaurants first.
#[tool(side_effect)]
fn book_table(
    /// The restaurant's id, for example RST-0042.
    restaurant_id: String,
    guests: u8,
) -> Result<String, Rejection> {
    Ok(format!("{restaurant_id} for {guests}"))
}

fn main() {}
