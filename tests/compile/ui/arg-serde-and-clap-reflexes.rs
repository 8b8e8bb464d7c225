use toolcall::{tool, Rejection};

struct Shop;

/// Lists a customer's orders.
#[tool]
fn list_orders(
    /// The customer, for example CUS-1.
    #[serde(rename = "customerId")]
    customer_id: String,
    /// How many, at most.
    #[arg(default_value_t = 20)]
    limit: u32,
    /// Whether to include cancelled orders.
    #[serde(default)]
    cancelled: bool,
) -> Result<u32, Rejection> {
    let _ = (customer_id, cancelled);
    Ok(limit)
}

/// Reads an order.
#[tool]
fn read_order(
    State(shop): State<Shop>,
    /// The id, for example ORD-1001.
    order_id: String,
) -> Result<String, Rejection> {
    let _ = shop;
    Ok(order_id)
}

struct State<S>(S);

fn main() {}
