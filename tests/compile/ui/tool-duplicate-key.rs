use toolcall::{tool, Rejection};

/// Cancels a booking.
#[tool(side_effect, name = "cancel", side_effect)]
fn cancel_booking(
    /// The booking id.
    booking_id: String,
) -> Result<String, Rejection> {
    Ok(booking_id)
}

fn main() {}
