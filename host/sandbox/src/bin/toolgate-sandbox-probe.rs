//! Performs one sandbox escape attempt: `toolgate-sandbox-probe NAME [ARGS…]`.
//!
//! Exit 0: the attempt succeeded; 10: denied; 3: inconclusive; 2: usage.
//! A leading `__probe` is skipped, so this binary also stands in for
//! `toolgate __probe NAME [ARGS…]`. See `toolgate_sandbox::probes`.

fn main() {
    let args = std::env::args().skip(1).skip_while(|a| a == "__probe");
    std::process::exit(toolgate_sandbox::probes::probe_main(args));
}
