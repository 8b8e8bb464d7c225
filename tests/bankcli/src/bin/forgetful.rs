//! `bankcli-forgetful`: the bank as it would be if its code forgot the
//! transfer limit for the `branch` caller. The dispatcher warns of it
//! when it is built; every transfer of that caller is POLICY_LIMIT.

use std::process::ExitCode;
use std::sync::Arc;

use toolcall::{Caller, Policy};

fn main() -> ExitCode {
    let bank = bankcli::Bank::from_env();
    toolcall_cli::App::new("bankcli", bankcli::registry(), Arc::new(bank))
        .policy(bankcli::head_office())
        .callers([Caller::new(
            "branch",
            Policy::new().allow(["get_balance", "transfer_money"]),
        )])
        .run()
}
