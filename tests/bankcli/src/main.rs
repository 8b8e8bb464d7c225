//! `bankcli`: the bank's command line, all of it from `toolcall_cli::App`.

use std::process::ExitCode;

fn main() -> ExitCode {
    bankcli::app(bankcli::Bank::from_env()).run()
}
