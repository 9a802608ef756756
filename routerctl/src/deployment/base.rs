//! The base stack, read and judged once: complete, and with the outputs everything else is found
//! by. What it reads ([`Base`]: account, outputs, parameters, resources) is where verify's other
//! checks and adopt's discovery start; the judgement is verify's `stack` check, and what adopt
//! refuses with when the stack cannot be used.

use std::collections::BTreeMap;

use crate::{
    check::{self, Check, Expect},
    cloud::{Cloud, Stack},
};

/// The base stack as CloudFormation describes it.
#[derive(Clone)]
pub(crate) struct Base {
    pub name: String,
    pub account: String,
    pub partition: String,
    pub outputs: BTreeMap<String, String>,
    pub parameters: BTreeMap<String, String>,
    /// Logical id → physical id.
    pub resources: BTreeMap<String, String>,
}

impl Base {
    pub fn output(&self, key: &str) -> Option<&str> {
        self.outputs.get(key).map(String::as_str)
    }

    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters.get(key).map(String::as_str)
    }

    /// The SNS topic the stack's alarms notify: its AlarmTopicArn output (the topic given, or the
    /// one it created), or, for a stack from before that output, the parameter if set.
    pub fn alarm_topic(&self) -> Option<&str> {
        self.output("AlarmTopicArn")
            .or_else(|| self.parameter("AlarmTopicArn"))
            .filter(|t| !t.is_empty())
    }

    /// Whether the router assumes spoke roles (base.yaml's AssumesSpokeRoles): it serves other
    /// accounts, or has a central bus that this account's other regions forward to.
    pub fn assumes_spoke_roles(&self) -> bool {
        self.parameter("ServedAccounts")
            .is_some_and(|s| !s.is_empty())
            || self.parameter("CentralBus") == Some("Enabled")
    }

    /// The central event bus's ARN, when the stack has one (CentralBus=Enabled).
    pub fn hub_bus_arn(&self) -> Option<&str> {
        self.output("HubEventBusArn")
    }
}

/// Any of these is a stack whose resources exist and can be checked.
const USABLE: [&str; 3] = ["CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"];

pub(crate) async fn load(aws: &impl Cloud, name: &str) -> Result<(Base, Check), Check> {
    // Where: the stack, then its resources.
    let described = aws.stack(name).await.map_err(|e| format!("{name}: {e}"));
    let resources = match &described {
        Ok(_) => resources(aws, name).await,
        Err(_) => Err("not read".to_owned()),
    };
    judge(name, aws.region(), described, resources)
}

/// The base stack's check from what DescribeStacks and DescribeStackResources answered (no AWS
/// here: each finding has its unit test), and the [`Base`] the other checks start from.
pub(crate) fn judge(
    name: &str,
    region: &str,
    described: Result<Stack, String>,
    resources: Result<BTreeMap<String, String>, String>,
) -> Result<(Base, Check), Check> {
    let not_found_fix = format!(
        "deploy it (make deploy-base BUCKET=… REGION={region} STACK_NAME={name}), or pass the \
         base stack's name with --stack (aws cloudformation list-stacks --region {region})"
    );
    let stack = match &described {
        Ok(stack) => stack,
        Err(_) => {
            return Err(check::evaluate(
                "stack",
                [Expect::lookup(&described, not_found_fix)],
            ));
        }
    };
    let status = stack.status.as_str();
    let outputs = stack.outputs.clone();
    let parameters = stack.parameters.clone();
    // Stacks from before Direct mode was removed may still run in it.
    let direct = parameters.get("IngestMode").is_some_and(|m| m == "Direct");

    // Expect → what was found → the fix. Without its resources nothing else is judged.
    let mut rows = vec![
        Expect::lookup(
            &resources,
            "check your cloudformation:DescribeStackResources permission",
        ),
        settled(name, status, region),
        Expect::quietly(!direct).otherwise(
            "IngestMode=Direct: its rules invoke the function, which now reads only the ingest queue",
            "update the stack with this project's cloudformation/base.yaml (Direct mode is gone: \
             every rule then targets the ingest queue)",
        ),
    ];
    rows.extend(REQUIRED_OUTPUTS.map(|key| {
        Expect::quietly(outputs.contains_key(key)).otherwise(
            format!("output {key} is missing"),
            "update the stack with this project's cloudformation/base.yaml",
        )
    }));
    let check = check::evaluate("stack", rows);
    let Ok(resources) = resources else {
        return Err(check);
    };
    let stack_id = stack.id.as_str();
    let base = Base {
        name: name.to_owned(),
        account: aws_model::arn::arn_account(stack_id)
            .unwrap_or_default()
            .to_owned(),
        partition: stack_id.split(':').nth(1).unwrap_or("aws").to_owned(),
        outputs,
        parameters,
        resources,
    };
    Ok((base, check))
}

/// The outputs the other checks find the stack's resources by.
const REQUIRED_OUTPUTS: [&str; 4] = [
    "RouterRoleArn",
    "FunctionName",
    "DeadLetterQueueArn",
    "QueuePrefix",
];

/// The stack's status: usable, rolled back to the previous version, busy, or broken.
fn settled(name: &str, status: &str, region: &str) -> Expect {
    match status {
        s if USABLE.contains(&s) => Expect::found(format!("{name}: {status}")),
        "UPDATE_ROLLBACK_COMPLETE" => Expect::found(format!(
            "{name}: UPDATE_ROLLBACK_COMPLETE (the last update failed; the previous version runs)"
        )),
        s if s.ends_with("_IN_PROGRESS") => Expect::problem(
            format!("{name} is {s}"),
            "wait for the operation to finish and run verify again",
        ),
        s => Expect::problem(
            format!("{name} is {s}"),
            format!(
                "see why: aws cloudformation describe-stack-events --stack-name {name} --region {region}"
            ),
        ),
    }
}

/// A stack's resources: logical id → physical id.
pub(crate) async fn resources(
    aws: &impl Cloud,
    stack: &str,
) -> Result<BTreeMap<String, String>, String> {
    aws.stack_resources(stack)
        .await
        .map_err(|e| format!("DescribeStackResources {stack}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self, base};

    const ID: &str = "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/ir/0a1b2c3d";

    fn stack(status: &str, outputs: &[&str], parameters: &[(&str, &str)]) -> Stack {
        let outputs: Vec<(&str, &str)> = outputs.iter().map(|o| (*o, "v")).collect();
        fixtures::described(ID, status, parameters, &outputs)
    }

    fn resources() -> Result<BTreeMap<String, String>, String> {
        Ok(BTreeMap::from([("IngestQueue".into(), "url".into())]))
    }

    fn failed(result: Result<(Base, Check), Check>) -> Check {
        match result {
            Ok((_, check)) => panic!("passed: {}", check.detail),
            Err(check) => check,
        }
    }

    #[test]
    fn a_complete_base_stack_passes_and_says_where_it_runs() {
        for status in [
            "CREATE_COMPLETE",
            "UPDATE_COMPLETE",
            "UPDATE_ROLLBACK_COMPLETE",
        ] {
            let (base, check) = judge(
                "ir",
                "cn-north-1",
                Ok(stack(status, &REQUIRED_OUTPUTS, &[])),
                resources(),
            )
            .unwrap();
            assert!(check.passed, "{status:?}: {}", check.detail);
            assert_eq!(
                (base.account.as_str(), base.partition.as_str()),
                ("123456789012", "aws-cn")
            );
            assert_eq!(base.resources["IngestQueue"], "url");
        }
    }

    /// Each defect alone fails `stack` with its finding and fix.
    #[test]
    fn each_defect_of_the_base_stack_fails_with_its_fix() {
        let judged = |status: &str, outputs: &[&str], parameters: &[(&str, &str)]| {
            judge(
                "ir",
                "us-east-1",
                Ok(stack(status, outputs, parameters)),
                resources(),
            )
        };
        let missing = failed(judge(
            "ir",
            "us-east-1",
            Err("ir does not exist".into()),
            Err("not read".into()),
        ));
        assert!(missing.detail.contains("ir does not exist"));
        assert!(
            missing
                .fix
                .unwrap_or_default()
                .contains("make deploy-base BUCKET=… REGION=us-east-1 STACK_NAME=ir")
        );
        let (_, busy) = judged("UPDATE_IN_PROGRESS", &REQUIRED_OUTPUTS, &[]).unwrap();
        assert!(!busy.passed && busy.detail.contains("is UPDATE_IN_PROGRESS"));
        assert!(
            busy.fix
                .unwrap_or_default()
                .contains("wait for the operation")
        );
        let (_, broken) = judged("ROLLBACK_COMPLETE", &REQUIRED_OUTPUTS, &[]).unwrap();
        assert!(!broken.passed);
        assert!(
            broken
                .fix
                .unwrap_or_default()
                .contains("describe-stack-events --stack-name ir --region us-east-1")
        );
        let (_, direct) = judged(
            "CREATE_COMPLETE",
            &REQUIRED_OUTPUTS,
            &[("IngestMode", "Direct")],
        )
        .unwrap();
        assert!(!direct.passed && direct.detail.contains("IngestMode=Direct"));
        for gone in REQUIRED_OUTPUTS {
            let outputs: Vec<&str> = REQUIRED_OUTPUTS
                .into_iter()
                .filter(|o| *o != gone)
                .collect();
            let (_, check) = judged("CREATE_COMPLETE", &outputs, &[]).unwrap();
            assert!(
                !check.passed && check.detail.contains(&format!("output {gone} is missing")),
                "{gone}: {}",
                check.detail
            );
        }
        let unread = failed(judge(
            "ir",
            "us-east-1",
            Ok(stack("CREATE_COMPLETE", &REQUIRED_OUTPUTS, &[])),
            Err("AccessDenied".into()),
        ));
        assert!(
            unread
                .fix
                .unwrap_or_default()
                .contains("cloudformation:DescribeStackResources")
        );
    }

    /// Its alarm topic: the output, else (a stack from before it) the parameter, never empty;
    /// whether the router assumes spoke roles: served accounts, or a central bus.
    #[test]
    fn what_the_other_checks_read_off_the_base_stack() {
        let topic = "arn:aws:sns:us-east-1:123456789012:alarms";
        assert_eq!(
            base(&[("AlarmTopicArn", topic)], &[]).alarm_topic(),
            Some(topic)
        );
        assert_eq!(
            base(&[], &[("AlarmTopicArn", topic)]).alarm_topic(),
            Some(topic)
        );
        assert_eq!(base(&[], &[("AlarmTopicArn", "")]).alarm_topic(), None);
        assert!(!base(&[], &[]).assumes_spoke_roles());
        assert!(
            !base(&[], &[("ServedAccounts", ""), ("CentralBus", "Disabled")]).assumes_spoke_roles()
        );
        assert!(base(&[], &[("ServedAccounts", "111111111111")]).assumes_spoke_roles());
        assert!(base(&[], &[("CentralBus", "Enabled")]).assumes_spoke_roles());
    }
}
