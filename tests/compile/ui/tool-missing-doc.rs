use toolcall::{tool, Rejection};

#[tool]
fn get_weather(
    /// The city.
    city: String,
) -> Result<String, Rejection> {
    Ok(city)
}

fn main() {}
