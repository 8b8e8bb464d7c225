use toolcall::{tool, Rejection};

/// Restarts a service. Each pattern is Rust's `regex` but not what a
/// schema's reader (ECMA-262) reads: one message each, with the fix.
#[tool(side_effect)]
fn restart_service(
    /// The service, any case.
    #[arg(pattern = r"^(?i)svc-[a-z]+$")]
    service: String,
    /// Who asks.
    #[arg(pattern = r"^\p{L}+$")]
    requester: String,
    /// The ticket.
    #[arg(pattern = r"\ATCK-[[:digit:]]+\z")]
    ticket: String,
) -> Result<String, Rejection> {
    Ok(format!("{service} {requester} {ticket}"))
}

fn main() {}
