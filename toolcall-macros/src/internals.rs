//! Helpers the macro's passes share (the model, the checks and the
//! expansion), kept apart so that no pass imports another's helpers back.

/// `refund_order` as `RefundOrder`: the name of a tool's generated types.
pub(crate) fn pascal_case(snake: &str) -> String {
    snake
        .trim_start_matches("r#")
        .split('_')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect()
}
