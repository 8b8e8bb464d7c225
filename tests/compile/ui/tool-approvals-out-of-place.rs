use serde_json::Value;
use toolcall::{tool, Rejection};

/// Closes an account.
#[tool(side_effect, approvals = 2)]
fn close_account(
    /// The account's id.
    account_id: String,
) -> Result<Value, Rejection> {
    Ok(Value::from(account_id))
}

/// Deletes a backup.
#[tool(side_effect, high_risk, approvals = 1)]
fn delete_backup(
    /// The backup's id.
    backup_id: String,
) -> Result<Value, Rejection> {
    Ok(Value::from(backup_id))
}

/// Wipes a disk.
#[tool(side_effect, high_risk, approvals = 11)]
fn wipe_disk(
    /// The disk's id.
    disk_id: String,
) -> Result<Value, Rejection> {
    Ok(Value::from(disk_id))
}

fn main() {}
