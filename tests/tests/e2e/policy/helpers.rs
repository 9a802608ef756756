//! The helpers of `e2e_tests::policy` themselves (they ran as that library's unit tests, a
//! second test binary of this crate).

use e2e_tests::policy::{
    Template, action_matches, alternatives, path_pattern_admits_no_wildcard,
    pattern_admits_only_names,
};
use serde_json::json;

#[test]
fn short_forms_become_long_forms() {
    let t = Template::parse(
        "t",
        r#"
Resources:
  R:
    Type: X
    Properties:
      A: !GetAtt Q.Arn
      B: !Sub "${AWS::StackName}-x"
      C: !If [Cond, !Ref P, !Ref AWS::NoValue]
      D: !ImportValue { "Fn::Sub": "${S}-y" }
      E: { "Fn::ImportValue": !Sub "${S}-z" }
      F: !Equals [!Ref P, ""]
"#,
    )
    .unwrap();
    let p = &t.doc["Resources"]["R"]["Properties"];
    assert_eq!(p["A"], json!({"Fn::GetAtt": ["Q", "Arn"]}));
    assert_eq!(p["B"], json!({"Fn::Sub": "${AWS::StackName}-x"}));
    assert_eq!(
        p["C"],
        json!({"Fn::If": ["Cond", {"Ref": "P"}, {"Ref": "AWS::NoValue"}]})
    );
    assert_eq!(p["D"], json!({"Fn::ImportValue": {"Fn::Sub": "${S}-y"}}));
    assert_eq!(p["E"], json!({"Fn::ImportValue": {"Fn::Sub": "${S}-z"}}));
    assert_eq!(p["F"], json!({"Fn::Equals": [{"Ref": "P"}, ""]}));
    assert_eq!(alternatives(&p["C"]), [&json!({"Ref": "P"})]);
}

#[test]
fn unknown_tags_are_refused() {
    let err = Template::parse("t", "Resources: { R: { Type: !Subb x } }").unwrap_err();
    assert!(format!("{err:#}").contains("unknown tag !Subb"), "{err:#}");
}

#[test]
fn action_globs() {
    assert!(action_matches("*", "sqs:SendMessage"));
    assert!(action_matches("sqs:*", "sqs:SendMessage"));
    assert!(action_matches("SQS:send*", "sqs:SendMessage"));
    assert!(action_matches("sqs:?endMessage", "sqs:SendMessage"));
    assert!(!action_matches("sqs:Send*", "sqs:ReceiveMessage"));
    assert!(!action_matches("sqs:SendMessage", "sqs:SendMessageBatch"));
    assert!(!action_matches("s3:*", "sqs:SendMessage"));
}

#[test]
fn name_patterns() {
    assert!(pattern_admits_only_names("^[A-Za-z0-9+=,.@_-]{1,64}$"));
    assert!(pattern_admits_only_names("^[a-z]+$"));
    assert!(!pattern_admits_only_names("^[A-Za-z0-9*-]{1,64}$"));
    assert!(!pattern_admits_only_names("^[a-z]{0,64}$"));
    assert!(!pattern_admits_only_names("^.+$"));
    assert!(!pattern_admits_only_names("^[a-z]{1,64}$|^\\*$"));
    assert!(!pattern_admits_only_names(""));
}

#[test]
fn path_patterns() {
    assert!(path_pattern_admits_no_wildcard(
        "^$|^/([A-Za-z0-9+=,.@_-]+/)*$"
    ));
    assert!(!path_pattern_admits_no_wildcard(
        "^$|^/([A-Za-z0-9*/-]+/)*$"
    ));
    assert!(!path_pattern_admits_no_wildcard("^/.*/$"));
    assert!(!path_pattern_admits_no_wildcard("^/(\\*)/$"));
    assert!(!path_pattern_admits_no_wildcard("^/[a-z/"));
}
