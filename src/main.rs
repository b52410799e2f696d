//! The `ah` binary: parses arguments, presents a run's events, asks the
//! user, and maps outcomes to exit codes (see `cli`). The run itself is in
//! the layer crates under `crates/`.

#![forbid(unsafe_code)]

mod cli;

fn main() {
    std::process::exit(cli::main());
}
