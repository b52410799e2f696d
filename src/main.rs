fn main() {
    std::process::exit(ah::cli::main());
}
