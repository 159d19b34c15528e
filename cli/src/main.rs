//! The `toolgate` command. All the work is in the library; this is the
//! binary edge (anyhow errors, exit codes).

fn main() -> std::process::ExitCode {
    toolgate_cli::main()
}
