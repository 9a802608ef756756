//! Every integration test of the project, as modules of ONE test binary: each file under
//! `tests/tests/` used to be its own binary that linked the whole AWS SDK again (~80 MB and a
//! link each); modules link once. The shared fixtures are the `e2e_tests` library (`tests/src/`).
//!
//! Run one part with a module filter, e.g. `cargo test --workspace --test e2e adopt::`
//! (`-p e2e-tests` instead of `--workspace` builds the AWS SDK again, with other features).
//!
//! * the router binary under a Lambda Runtime API: [`router`], [`edges`], [`accounts`],
//!   [`direct`] (member rules straight into the hub), [`faults`], [`log_levels`];
//! * the templates: [`stacks`] (deployed through moto), [`policy`], [`permissions`] and
//!   [`locked_down`] (what IAM and KMS would decide), [`deploy_targets`] (the Makefile's deploy
//!   targets);
//! * the docs against the code and templates: [`docs`]; the router and the templates against the
//!   parsers of the Karpenter version the project pins: [`karpenter`]; the Terraform modules and
//!   example against the templates and the providers' schemas, without Terraform: [`terraform`];
//! * the emulator's own speed-ups, which must change no answer: [`emulator`] (moto's message
//!   counts, servers forked from one zygote);
//! * the operator CLI: [`cli`] (`routerctl` simulate, verify, fis, the binary itself), [`adopt`].

mod accounts;
mod adopt;
mod cli;
mod deploy_targets;
mod direct;
mod docs;
mod edges;
mod emulator;
mod faults;
mod karpenter;
mod locked_down;
mod log_levels;
mod permissions;
mod policy;
mod release;
mod router;
mod stacks;
mod terraform;
