use toolcall::{tool, Rejection};

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Invoice {
    id: String,
    customer_note: String,
}

/// Reads an invoice.
#[tool(untrusted_output = ["customer_note", "/customer_note", "/customer_note"])]
fn get_invoice(
    /// The invoice.
    id: String,
) -> Result<Invoice, Rejection> {
    Ok(Invoice { id, customer_note: String::new() })
}

/// Reads an invoice's lines.
#[tool(untrusted_output = [])]
fn get_lines(
    /// The invoice.
    id: String,
) -> Result<String, Rejection> {
    Ok(id)
}

fn main() {}
