//! What the unit tests build AWS's answers from, once: the base stack as verify reads it
//! ([`base`]), and a stack as DescribeStacks describes it ([`described`]).

use std::collections::BTreeMap;

use aws_sdk_cloudformation::{
    primitives::DateTime,
    types::{Output, Parameter, Stack, StackStatus},
};

use crate::verify::stack::Base;

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
    status: StackStatus,
    parameters: &[(&str, &str)],
    outputs: &[(&str, &str)],
) -> Stack {
    let mut stack = Stack::builder()
        .stack_name(id.split('/').nth(1).unwrap_or_default())
        .stack_id(id)
        .creation_time(DateTime::from_secs(0))
        .stack_status(status);
    for (key, value) in parameters {
        stack = stack.parameters(
            Parameter::builder()
                .parameter_key(*key)
                .parameter_value(*value)
                .build(),
        );
    }
    for (key, value) in outputs {
        stack = stack.outputs(
            Output::builder()
                .output_key(*key)
                .output_value(*value)
                .build(),
        );
    }
    stack.build()
}
