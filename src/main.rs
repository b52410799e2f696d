//! The `ah` binary: everything is in the library (`ah::cli::main`).

fn main() {
    std::process::exit(ah::cli::main());
}
