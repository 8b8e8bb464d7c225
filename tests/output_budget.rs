//! The output budget (beyond the reference): a result cut to fit stays valid
//! JSON, an error is never cut, and without a budget nothing is.

use std::sync::Arc;

use serde_json::{Value, json};
use toolcall::{Call, Code, Dispatcher, MemoryAudit, Rejection, tool, tools};

/// Lists a product's reviews, all of them.
#[tool]
fn list_reviews(
    /// The product id, for example P-1.
    product: String,
) -> Result<Value, Rejection> {
    let reviews: Vec<Value> = (0..500)
        .map(
            |i| json!({"id": i, "stars": 5, "text": "Great product, would buy again. ".repeat(20)}),
        )
        .collect();
    Ok(json!({"product": product, "reviews": reviews}))
}

/// Lists a product's reviews, within a budget of its own.
#[tool(max_output_bytes = 1024)]
fn list_reviews_briefly(
    /// The product id, for example P-1.
    product: String,
) -> Result<Value, Rejection> {
    list_reviews(product)
}

#[tokio::test]
async fn an_oversized_result_is_cut_to_fit_and_stays_valid_json() {
    let audit = MemoryAudit::new();
    let d = Dispatcher::builder(
        tools![list_reviews, list_reviews_briefly].unwrap(),
        Arc::new(()),
    )
    .max_output_bytes(Some(4096))
    .audit(audit.clone())
    .build()
    .unwrap();
    let whole = serde_json::to_string(&list_reviews("P-1".into()).unwrap()).unwrap();
    let result = d
        .execute(Call::new("list_reviews", r#"{"product": "P-1"}"#).session("default"))
        .await;
    let text = result.to_model_text();
    assert!(result.ok);
    assert!(text.len() <= 4096, "{}", text.len());
    let parsed: Value = serde_json::from_str(&text).expect("still valid JSON");
    assert_eq!(parsed["data"]["truncated"], true);
    assert_eq!(
        parsed["data"]["product"], "P-1",
        "what is small stays whole"
    );
    assert!(parsed["data"]["reviews"].as_array().unwrap().len() < 500);
    assert!(
        result.message.contains("Narrow the request"),
        "{}",
        result.message
    );

    let record = audit.records().pop().unwrap();
    let cut = record.cut.iter().find(|c| c.field == "result").unwrap();
    assert!(
        cut.bytes as usize > whole.len(),
        "the whole result's size is kept"
    );
    assert_eq!(cut.sha256.len(), 64);

    // A tool's own budget comes first.
    let brief = d
        .execute(Call::new("list_reviews_briefly", r#"{"product": "P-1"}"#).session("default"))
        .await;
    assert!(brief.to_model_text().len() <= 1024);
    assert_eq!(brief.data["truncated"], true);
}

#[tokio::test]
async fn an_error_keeps_its_code_and_message_whole() {
    let d = Dispatcher::builder(tools![list_reviews].unwrap(), Arc::new(()))
        .max_output_bytes(Some(256))
        .build()
        .unwrap();
    let flood: serde_json::Map<String, Value> = (0..15)
        .map(|i| (format!("unknown_field_{i}"), json!(i)))
        .collect();
    let result = d
        .execute(Call::new("list_reviews", &Value::Object(flood)).session("default"))
        .await;
    assert_eq!(result.code, Code::InvalidArguments);
    assert!(
        result.message.len() > 256,
        "the message is not cut: {}",
        result.message.len()
    );
    assert!(result.message.contains("unknown_field_14"));
}

#[tokio::test]
async fn without_a_budget_nothing_is_cut() {
    let d = Dispatcher::builder(tools![list_reviews].unwrap(), Arc::new(()))
        .build()
        .unwrap();
    let result = d
        .execute(Call::new("list_reviews", r#"{"product": "P-1"}"#).session("default"))
        .await;
    assert_eq!(result.data["reviews"].as_array().unwrap().len(), 500);
    assert!(!result.data.contains_key("truncated"));
}
