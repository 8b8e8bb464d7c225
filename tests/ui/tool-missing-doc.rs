use toolcall::{tool, Rejection};

#[tool]
fn get_weather(city: String) -> Result<String, Rejection> {
    Ok(city)
}

fn main() {}
