//! What the unit tests build AWS's answers from, once: the base stack as verify reads it
//! ([`base`]), and a stack as DescribeStacks describes it ([`described`]).

use std::collections::BTreeMap;

use crate::{cloud::Stack, deployment::Base};

/// The hub's account.
pub const HUB: &str = "123456789012";

fn owned(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The base stack `ir` of the hub account, with these outputs and parameters.
pub fn base(outputs: &[(&str, &str)], parameters: &[(&str, &str)]) -> Base {
    Base {
        name: "ir".into(),
        account: HUB.into(),
        partition: "aws".into(),
        outputs: owned(outputs),
        parameters: owned(parameters),
        resources: BTreeMap::new(),
    }
}

/// The stack whose id is `id` (`arn:<partition>:cloudformation:<region>:<account>:stack/<name>/…`),
/// in `status`, with these parameters and outputs, as DescribeStacks describes it.
pub fn described(
    id: &str,
    status: &str,
    parameters: &[(&str, &str)],
    outputs: &[(&str, &str)],
) -> Stack {
    Stack {
        id: id.to_owned(),
        name: id.split('/').nth(1).unwrap_or_default().to_owned(),
        status: status.to_owned(),
        outputs: owned(outputs),
        parameters: owned(parameters),
    }
}
