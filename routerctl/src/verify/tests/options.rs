//! What verify's command line accepts before it asks AWS anything.

use crate::verify::parse_cluster_role;

fn refused(value: &str) -> String {
    parse_cluster_role(value).expect_err(value)
}

#[test]
fn a_karpenter_role_is_a_cluster_and_an_iam_role_name() {
    assert_eq!(
        parse_cluster_role("alpha=KarpenterController-alpha"),
        Ok(("alpha".into(), "KarpenterController-alpha".into()))
    );
    // IAM's role-name characters, the first `=` the separator.
    assert_eq!(
        parse_cluster_role("alpha=a+b=c,d.e@f_g-h"),
        Ok(("alpha".into(), "a+b=c,d.e@f_g-h".into()))
    );
    let longest = "r".repeat(64);
    assert_eq!(
        parse_cluster_role(&format!("alpha={longest}")),
        Ok(("alpha".into(), longest))
    );
}

#[test]
fn a_karpenter_role_without_a_cluster_or_a_valid_role_name_is_refused_with_an_example() {
    assert!(refused("alpha").contains("is not <cluster>=<role name>"));
    let example = "give a cluster name and an IAM role name (not an ARN)";
    for value in [
        "=KarpenterController-alpha".to_owned(),
        "alpha=".to_owned(),
        "alpha=arn:aws:iam::111111111111:role/KarpenterController-alpha".to_owned(),
        "alpha=Karpenter Controller".to_owned(),
        format!("alpha={}", "r".repeat(65)),
    ] {
        assert!(refused(&value).contains(example), "{value}");
    }
}
