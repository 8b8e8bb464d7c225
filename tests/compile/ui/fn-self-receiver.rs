use toolcall::{tool, Rejection};

struct Shop;

impl Shop {
    /// Reads an order.
    #[tool]
    fn read_order(
        &self,
        /// The order id.
        order_id: String,
    ) -> Result<String, Rejection> {
        Ok(order_id)
    }
}

fn main() {}
