use std::sync::Arc;
use toolcall::{Call, Dispatcher, Policy, Rejection, tool, tools};
/// Refunds part of an order. The amount is in cents: 25.90 is 2590.
#[tool(side_effect)]
fn refund(
    /// The order, for example ORD-1001.
    #[arg(pattern = r"^ORD-\d{4}$")]
    order_id: String,
    /// The amount in cents.
    #[arg(min = 1, limit = "max_refund_cents")]
    amount_cents: i64,
) -> Result<String, Rejection> {
    Ok(format!("refunded {amount_cents} cents of {order_id}"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let policy = Policy::new().allow(["refund"]).limit("max_refund_cents", 5_000);
    let tools = Dispatcher::builder(tools![refund]?, Arc::new(())).policy(policy).build()?;
    // The model proposes; the code decides: INVALID_ARGUMENTS, OK, OK replayed.
    let mut answers = Vec::new();
    for amount in ["25.9", "2590", "2590"] {
        let proposed = format!(r#"{{"order_id": "ORD-1001", "amount_cents": {amount}}}"#);
        let answer = tools.execute(Call::new("refund", proposed.as_str()).session("chat-1")).await;
        println!("{}", answer.to_model_text());
        answers.push((answer.code.to_string(), answer.replayed));
    }
    assert_eq!(answers, [("INVALID_ARGUMENTS".into(), false), ("OK".into(), false), ("OK".into(), true)]);
    Ok(())
}
