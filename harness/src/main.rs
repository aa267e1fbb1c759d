//! The `leakloop` binary: everything lives in the library; see `leakloop::cli`.

fn main() -> std::process::ExitCode {
    leakloop::cli::main()
}
