use toolcall::{tool, Rejection};

pub struct Point {
    pub x: i64,
    pub y: i64,
}

/// Moves the cursor.
#[tool]
fn move_to(
    /// Where to, in pixels from the top left corner.
    target: Point,
) -> Result<i64, Rejection> {
    Ok(target.x + target.y)
}

fn main() {}
