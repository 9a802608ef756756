//! routerctl: the operator CLI a platform team runs against its accounts.
//!
//! * [`cli`]: the command line (what `main.rs` runs, and what the docs test parses);
//! * [`check`]: the engine verify and adopt share: a check is rows of expect → where → fix;
//! * [`verify`]: a deployed hub, its spokes and tenants, checked against what the templates
//!   define (each check says what it expects, where it looked, and the exact fix);
//! * [`adopt`]: moving a cluster from its own interruption rules onto the router without a gap;
//! * [`simulate`]: synthetic interruptions through a deployed router, each delivery accounted for;
//! * [`fis`]: a real Spot interruption through AWS FIS, followed to the tenant queue;
//! * [`insights`]: which node pools are reclaimed, where and how often, and how late each
//!   cluster heard, from the router's interruption records (Logs Insights).
//!
//! The local demo and the scenery the tests share (the stacks deployed on the emulator, the
//! set-ups clusters run before the router) are the `lab` crate: routerctl links no emulator.
//!
//! What it knows about AWS and the project's stacks (templates, IAM evaluation, EventBridge
//! matching, event formats) is in the `aws-model` crate, which the stand-ins share.

pub mod adopt;
pub mod check;
pub mod cli;
pub mod cloud;
mod deployment;
pub mod fis;
#[cfg(test)]
mod fixtures;
pub mod insights;
pub mod simulate;
pub mod verify;

/// The exit status routerctl and the lab end with: 0 when all is well, 1 when a check or verdict
/// failed, 2 when the command could not run (its error printed).
pub fn exit_code(result: anyhow::Result<bool>) -> std::process::ExitCode {
    match result {
        Ok(true) => std::process::ExitCode::SUCCESS,
        Ok(false) => std::process::ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
