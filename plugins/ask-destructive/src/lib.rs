//! Asks a person before any tool annotated `destructive` runs.
//!
//! A pre-execute listener: for destructive tools it answers `ask` with a
//! question that shows the call; the host's approval service decides (with
//! none, or nobody at the terminal, the answer is no). It consults the
//! listeners after it first, so an inner deny stays a deny.

use toolgate_sdk::{Annotations, Call, PreChain, PreDecision, PreExecuteHook};

struct AskDestructive;

impl PreExecuteHook for AskDestructive {
    fn pre_execute(call: &Call, chain: PreChain) -> PreDecision {
        let inner = chain.next();
        if !matches!(inner, PreDecision::Allow)
            || !call.annotations().contains(Annotations::DESTRUCTIVE)
        {
            return inner;
        }
        let mut args = call.arguments().to_string();
        if args.len() > 300 {
            args.truncate(300);
            args.push('…');
        }
        PreDecision::Ask(format!(
            "`{}` can change or delete data. Run it with {args}?",
            call.tool()
        ))
    }
}

toolgate_sdk::export! { pre_execute: AskDestructive }
