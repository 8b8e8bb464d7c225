use toolcall::{tool, Ctx, Rejection};

struct Shop;

impl Shop {
    /// Reads an order.
    #[tool]
    fn read_order(
        ctx: &Ctx<Self>,
        /// The order id.
        order_id: String,
    ) -> Result<String, Rejection> {
        let _ = ctx;
        Ok(order_id)
    }
}

fn main() {}
