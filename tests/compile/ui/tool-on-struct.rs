use toolcall::tool;

/// Reads an order.
#[tool]
struct ReadOrder {
    order_id: String,
}

fn main() {}
