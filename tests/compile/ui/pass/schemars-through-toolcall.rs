// An argument type whose schema derive comes through toolcall, as an
// application without its own schemars dependency writes it.
use toolcall::{Rejection, tool};

#[derive(serde::Serialize, serde::Deserialize, toolcall::JsonSchema)]
#[schemars(crate = "toolcall::schemars")]
#[serde(rename_all = "UPPERCASE")]
enum Currency {
    Brl,
    Eur,
}

/// Converts an amount.
#[tool]
fn convert(
    /// The currency to convert to.
    to: Currency,
) -> Result<Currency, Rejection> {
    Ok(to)
}

fn main() {
    let registry = toolcall::tools![convert].unwrap();
    let schema = registry.get("convert").unwrap().parameters_schema().to_string();
    assert!(schema.contains("BRL") && schema.contains("EUR"), "{schema}");
}
