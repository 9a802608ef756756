//! Parsing, intrinsic functions, conditions, Rules and replacements, on small templates.

use super::{Stage, Template};
use serde_json::json;

const T: &str = r#"
Parameters:
  Prefix: { Type: String, Default: karpenter- }
  Mode: { Type: String, Default: Queue, AllowedValues: [Queue, Direct] }
  Accounts: { Type: String, Default: "" }
Conditions:
  QueueMode: !Equals [!Ref Mode, Queue]
  HasAccounts: !Not [!Equals [!Ref Accounts, ""]]
  Both: !And [!Condition QueueMode, !Condition HasAccounts]
Rules:
  AccountsNeedQueueMode:
    RuleCondition: !Not [!Equals [!Ref Accounts, ""]]
    Assertions:
      - Assert: !Equals [!Ref Mode, Queue]
        AssertDescription: accounts need Queue mode
  SmallNumbers:
    Assertions:
      - Assert: !Contains [["1", "2"], !Ref Mode]
        AssertDescription: never holds
Resources:
  Q:
    Type: AWS::SQS::Queue
    Condition: QueueMode
    Properties: { QueueName: !Sub "${AWS::StackName}-ingest" }
  R:
    Type: AWS::Events::Rule
    Properties: { EventBusName: hub, Name: fixed }
  Role:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyDocument:
            Statement:
              - Resource: !Sub "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${Prefix}*"
              - !If [HasAccounts, { Resource: !Split [",", !Sub "${Accounts},${AWS::AccountId}"] }, !Ref AWS::NoValue]
              - Resource: [!GetAtt Q.Arn, !GetAtt R.Arn, !Ref Role, !ImportValue base-Role]
Outputs:
  QueueUrl: { Condition: QueueMode, Value: !Ref Q, Export: { Name: !Sub "${AWS::StackName}-Url" } }
"#;

#[test]
fn intrinsics_resolve_as_cloudformation_does() {
    let t = Template::parse("t", T).unwrap();
    let stage = Stage::new("ir", "111111111111", "eu-west-1")
        .parameter("Accounts", "222222222222")
        .export("base-Role", "arn:aws:iam::111111111111:role/base");
    let d = t.deploy(&stage).unwrap();
    assert!(d.conditions["Both"]);
    let statements =
        d.property("Role", &["Policies"]).unwrap()[0]["PolicyDocument"]["Statement"].clone();
    assert_eq!(
        statements,
        json!([
            {"Resource": "arn:aws:sqs:eu-west-1:111111111111:karpenter-*"},
            {"Resource": ["222222222222", "111111111111"]},
            {"Resource": [
                "arn:aws:sqs:eu-west-1:111111111111:ir-ingest",
                "arn:aws:events:eu-west-1:111111111111:rule/hub/fixed",
                "ir-Role-GENERATED",
                "arn:aws:iam::111111111111:role/base"
            ]}
        ])
    );
    assert_eq!(
        d.exports().unwrap()["ir-Url"],
        "https://sqs.eu-west-1.amazonaws.com/111111111111/ir-ingest"
    );
    let direct = Stage::new("ir", "111111111111", "eu-west-1").parameter("Mode", "Direct");
    let d = t.deploy(&direct).unwrap();
    assert_eq!(d.properties("Q").unwrap(), None);
    assert!(d.exports().unwrap().is_empty());
    assert!(
        t.deploy(&Stage::new("ir", "1", "r").parameter("Mode", "Both"))
            .is_err()
    );
}

#[test]
fn rules_refuse_what_their_assertions_refuse() {
    let t = Template::parse("t", T).unwrap();
    let failures = |stage: Stage| -> Vec<String> {
        t.rules_failures(&stage)
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    let base = || Stage::new("ir", "111111111111", "eu-west-1");
    assert_eq!(failures(base()), ["SmallNumbers"]);
    assert_eq!(
        failures(
            base()
                .parameter("Accounts", "2")
                .parameter("Mode", "Direct")
        ),
        ["AccountsNeedQueueMode", "SmallNumbers"]
    );
}

/// A CommaDelimitedList parameter is a list wherever the template uses it (tenant.yaml's
/// EventKinds), given or defaulted; the rule functions read it as one.
#[test]
fn a_list_parameter_refs_a_list() {
    let t = Template::parse(
        "t",
        r#"
Parameters:
  Kinds: { Type: CommaDelimitedList, Default: "a,b" }
Rules:
  Known:
    Assertions:
      - Assert: { "Fn::EachMemberIn": [!Ref Kinds, [a, b, c]] }
        AssertDescription: known kinds only
Resources:
  Q:
    Type: AWS::SQS::Queue
    Properties: { Tags: [{ Key: kinds, Value: !Join [" ", !Ref Kinds] }] }
"#,
    )
    .unwrap();
    let tag = |stage: &Stage| {
        t.deploy(stage).unwrap().property("Q", &["Tags"]).unwrap()[0]["Value"].clone()
    };
    let stage = Stage::new("s", "111111111111", "eu-west-1");
    assert_eq!(tag(&stage), json!("a b"));
    assert!(t.rules_failures(&stage).unwrap().is_empty());
    let given = stage.clone().parameter("Kinds", "c,a");
    assert_eq!(tag(&given), json!("c a"));
    let unknown = Stage::new("s", "111111111111", "eu-west-1").parameter("Kinds", "a,x");
    assert_eq!(t.rules_failures(&unknown).unwrap().len(), 1);
}

#[test]
fn a_value_breaking_its_allowed_pattern_is_refused_whole() {
    let t = Template::parse(
        "t",
        r#"
Parameters:
  Key:
    Type: String
    Default: ""
    AllowedPattern: "^$|arn:aws:kms:[a-z0-9-]+:[0-9]{12}:key/[a-z0-9-]+"
    ConstraintDescription: empty or a key ARN
Resources: {}
"#,
    )
    .unwrap();
    let stage = |v: &str| Stage::new("s", "111111111111", "eu-west-1").parameter("Key", v);
    assert!(t.deploy(&stage("")).is_ok());
    assert!(
        t.deploy(&stage("arn:aws:kms:eu-west-1:111111111111:key/abc-1"))
            .is_ok()
    );
    // Anchored as CloudFormation anchors it: a match inside the value is not enough.
    for refused in [
        "alias/mine",
        "xarn:aws:kms:eu-west-1:111111111111:key/abc-1 ",
    ] {
        let e = t.deploy(&stage(refused)).err().expect(refused).to_string();
        assert!(e.contains("empty or a key ARN"), "{e}");
    }
}
