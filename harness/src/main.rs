fn main() -> std::process::ExitCode {
    leakloop::cli::main()
}
