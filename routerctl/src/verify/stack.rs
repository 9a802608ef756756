//! `stack`: the base stack is complete and has the outputs everything else is found by
//! ([`crate::deployment::base`] reads and judges it); nothing else is checked without it.

use super::report::Check;
use crate::{
    cloud::Cloud,
    deployment::{Base, base::load},
};

/// Reads the base stack; its check on the report, and `None` when nothing else can be checked.
pub(super) async fn check(aws: &impl Cloud, name: &str, checks: &mut Vec<Check>) -> Option<Base> {
    match load(aws, name).await {
        Ok((base, check)) => {
            checks.push(check);
            Some(base)
        }
        Err(check) => {
            checks.push(check);
            None
        }
    }
}
