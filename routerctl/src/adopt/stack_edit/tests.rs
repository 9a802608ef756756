use super::*;

/// The stand-in of Karpenter's getting-started template the lab deploys too.
const GETTING_STARTED_TEMPLATE: &str =
    include_str!("../../../../tests/fixtures/karpenter-getting-started.yaml");
/// Its five rules' logical ids.
const RULES: [&str; 5] = [
    "ScheduledChangeRule",
    "SpotInterruptionRule",
    "RebalanceRule",
    "InstanceStateChangeRule",
    "CapacityReservationInterruptionRule",
];

fn rules() -> Vec<String> {
    RULES.iter().map(|r| r.to_string()).collect()
}

/// Step 6's edit: the rules out.
fn without_rules(template: &str) -> Edit {
    retire(
        template,
        &Retire {
            rules: &rules(),
            queue: None,
        },
    )
    .unwrap()
}

/// Step 7's edit after step 6's: the queue out, the router's queue granted instead.
fn without_queue(template: &str) -> Edit {
    retire(
        &without_rules(template).template,
        &Retire {
            rules: &rules(),
            queue: Some(("KarpenterInterruptionQueue", "karpenter-alpha")),
        },
    )
    .unwrap()
}

#[test]
fn step_6_takes_the_rules_out_and_nothing_else() {
    let edit = without_rules(GETTING_STARTED_TEMPLATE);
    let t = Template::parse("edited", &edit.template).unwrap();
    let left: Vec<&str> = t.resources().map(|(id, _)| id).collect();
    assert_eq!(
        left,
        [
            "EKSIntegrationPolicy",
            "InterruptionPolicy",
            "KarpenterInterruptionQueue",
            "KarpenterInterruptionQueuePolicy"
        ],
        "{}",
        edit.template
    );
    assert!(edit.retargeted.is_empty());
    // Comments and the !Sub blocks stay as they were written.
    assert!(
        edit.template
            .contains("# A JSON string, as in the real template")
    );
    assert!(
        edit.template
            .contains("\"Resource\": \"${KarpenterInterruptionQueue.Arn}\"")
    );
}

#[test]
fn step_7_takes_the_queue_and_its_policy_out_and_grants_the_routers_queue_instead() {
    let edit = without_queue(GETTING_STARTED_TEMPLATE);
    let t = Template::parse("edited", &edit.template).unwrap();
    let left: Vec<&str> = t.resources().map(|(id, _)| id).collect();
    assert_eq!(left, ["EKSIntegrationPolicy", "InterruptionPolicy"]);
    assert_eq!(edit.retargeted, ["InterruptionPolicy"]);
    assert!(
            edit.template.contains(
                "\"Resource\": \"arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:karpenter-alpha\""
            ),
            "{}",
            edit.template
        );
    assert!(!edit.template.contains("KarpenterInterruptionQueue"));
}

#[test]
fn a_reference_the_edit_cannot_make_valid_is_refused() {
    let template = r#"
Resources:
  Q:
    Type: AWS::SQS::Queue
  Alarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Dimensions:
        - Name: QueueName
          Value: !GetAtt Q.QueueName
"#;
    let error = retire(
        template,
        &Retire {
            rules: &[],
            queue: Some(("Q", "karpenter-alpha")),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("Alarm refers to Q (GetAtt QueueName)"),
        "{error}"
    );
}

#[test]
fn json_templates_are_edited_as_json() {
    let template = serde_json::json!({"Resources": {
            "Q": {"Type": "AWS::SQS::Queue"},
            "R": {"Type": "AWS::Events::Rule", "Properties": {"Targets": [{"Id": "q", "Arn": {"Fn::GetAtt": ["Q", "Arn"]}}]}},
            "P": {"Type": "AWS::IAM::ManagedPolicy", "Properties": {"PolicyDocument": {"Statement": [
                {"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": {"Fn::GetAtt": ["Q", "Arn"]}}]}}}},
            "Outputs": {"QueueUrl": {"Value": {"Ref": "Q"}}}});
    let edit = retire(
        &serde_json::to_string_pretty(&template).unwrap(),
        &Retire {
            rules: &["R".to_owned()],
            queue: Some(("Q", "karpenter-alpha")),
        },
    )
    .unwrap();
    let doc: Value = serde_json::from_str(&edit.template).unwrap();
    assert_eq!(doc["Resources"].as_object().unwrap().len(), 1);
    assert_eq!(
        doc["Resources"]["P"]["Properties"]["PolicyDocument"]["Statement"][0]["Resource"],
        serde_json::json!({"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:karpenter-alpha"})
    );
    assert!(doc["Outputs"].as_object().unwrap().is_empty());
    assert!(edit.removed.contains(&"output QueueUrl".to_owned()));
}

/// The real template, when its text is at hand (`KARPENTER_GETTING_STARTED_TEMPLATE`: a copy
/// of karpenter-provider-aws's website/content/en/<version>/getting-started/
/// getting-started-with-karpenter/cloudformation.yaml). Not in the repository (its text is
/// Karpenter's), so without the variable this says so and checks nothing.
#[test]
fn the_real_getting_started_template_is_edited_validly() {
    let Some(path) = std::env::var_os("KARPENTER_GETTING_STARTED_TEMPLATE") else {
        eprintln!("KARPENTER_GETTING_STARTED_TEMPLATE not set: the real template was not checked");
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let before = Template::parse("real", &text).unwrap().resources().count();
    let edit = without_queue(&text);
    let t = Template::parse("edited", &edit.template).unwrap();
    assert_eq!(t.resources().count(), before - 7, "{}", edit.template);
    assert_eq!(edit.retargeted, ["InterruptionPolicy"]);
    let policy =
        t.doc["Resources"]["InterruptionPolicy"]["Properties"]["PolicyDocument"]["Fn::Sub"]
            .as_str()
            .unwrap();
    let document: Value = serde_json::from_str(policy).expect("still JSON");
    assert_eq!(
        document["Statement"][0]["Resource"],
        "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:karpenter-alpha"
    );
    // Everything else is as it was, line for line.
    let removed_lines = text.lines().count() - edit.template.lines().count();
    assert!(removed_lines > 60, "{removed_lines}");
    std::fs::write(
        std::env::temp_dir().join("karpenter-getting-started-edited.yaml"),
        &edit.template,
    )
    .unwrap();
}
