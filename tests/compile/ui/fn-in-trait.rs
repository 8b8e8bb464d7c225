use toolcall::{tool, Rejection};

trait Orders {
    /// Reads an order.
    #[tool]
    fn read_order(
        /// The order id.
        order_id: String,
    ) -> Result<String, Rejection>;
}

fn main() {}
