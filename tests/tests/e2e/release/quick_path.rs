//! The README's quick path, pasted: its variables block and steps 2 to 4, run by bash with the
//! real AWS CLI against the emulator, for a cluster made as Karpenter's getting-started guide
//! makes it (eksctl's `podIdentityAssociations`: the role `<cluster>-karpenter`, associated with
//! the `karpenter` service account of `kube-system`). Step 3 reads that role back from the
//! cluster; the tenant stack then grants it its queue. A cluster whose associated role is gone
//! stops at step 3, before a stack exists.

use anyhow::Result;
use interruption_router::VERSION;
use local_aws::moto::{MotoServer, REGION};

use super::{Scratch, repo};
use crate::release::deploying::{release_into, stand_in_release};

/// The shell blocks of the README's quick path: the variables, then steps 2, 3 and 4, told by
/// what each runs, the variables given this test's values.
fn pasted() -> [String; 4] {
    let blocks = crate::docs::quick_path_blocks();
    let find = |marker: &str| {
        blocks
            .iter()
            .find(|b| b.contains(marker))
            .unwrap_or_else(|| panic!("no quick-path block runs {marker:?}: {blocks:#?}"))
            .clone()
    };
    let given = [
        ("AWS_REGION", REGION.to_owned()),
        ("VERSION", VERSION.to_owned()),
        ("BUCKET", "artifacts".to_owned()),
        ("ALARM_EMAIL", "oncall@example.com".to_owned()),
    ];
    let variables = find("export CLUSTER_NAME=")
        .lines()
        .map(|line| {
            let name = line
                .strip_prefix("export ")
                .and_then(|l| l.split_once('='))
                .map(|(n, _)| n);
            match given.iter().find(|(n, _)| Some(*n) == name) {
                Some((n, v)) => format!("export {n}={v}"),
                // The cluster comes from the caller.
                None if name == Some("CLUSTER_NAME") => String::new(),
                None => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    [
        variables,
        find("--template-url \"${TEMPLATES}/base.yaml\""),
        find("list-pod-identity-associations"),
        find("--template-url \"${TEMPLATES}/tenant.yaml\""),
    ]
}

/// Runs `blocks` as one bash script (errexit, pipefail) for `cluster`: success, and the output.
fn paste(moto: &MotoServer, cluster: &str, blocks: &[&String]) -> (bool, String) {
    let script = format!(
        "set -euo pipefail\nexport CLUSTER_NAME={cluster}\n{}",
        blocks
            .iter()
            .map(|b| b.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&script)
        .envs(moto.env())
        .env(
            "PATH",
            format!(
                "{}/.venv/bin:{}",
                repo().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .expect("bash runs");
    (
        out.status.success(),
        format!(
            "{script}\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The AWS CLI against the emulator: its stdout, trimmed, and whether it succeeded.
fn aws(moto: &MotoServer, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(repo().join(".venv/bin/aws"))
        .args(args)
        .envs(moto.env())
        .output()
        .expect("the AWS CLI runs");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
    )
}

/// What the getting-started guide's eksctl makes for `cluster`: the cluster, the role
/// `<cluster>-karpenter` trusting EKS Pod Identity, and the association of the `karpenter`
/// service account of `kube-system` with it.
fn guide_cluster(moto: &MotoServer, cluster: &str) {
    let role = format!("{cluster}-karpenter");
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"pods.eks.amazonaws.com"},"Action":["sts:AssumeRole","sts:TagSession"]}]}"#;
    for args in [
        vec![
            "eks",
            "create-cluster",
            "--name",
            cluster,
            "--role-arn",
            "arn:aws:iam::123456789012:role/eksctl-cluster-ServiceRole",
            "--resources-vpc-config",
            "subnetIds=subnet-0a,subnet-0b",
        ],
        vec![
            "iam",
            "create-role",
            "--role-name",
            &role,
            "--assume-role-policy-document",
            trust,
        ],
    ] {
        let (ok, out) = aws(moto, &args);
        assert!(ok, "{args:?}: {out}");
    }
    let arn = format!("arn:aws:iam::123456789012:role/{role}");
    let (ok, out) = aws(
        moto,
        &[
            "eks",
            "create-pod-identity-association",
            "--cluster-name",
            cluster,
            "--namespace",
            "kube-system",
            "--service-account",
            "karpenter",
            "--role-arn",
            &arn,
        ],
    );
    assert!(ok, "{out}");
}

#[tokio::test]
async fn a_getting_started_guide_cluster_deploys_its_tenant_stack_with_the_readmes_commands()
-> Result<()> {
    let scratch = Scratch::new("quick-path");
    stand_in_release(scratch.path());
    let moto = MotoServer::start().await?;
    release_into(&moto, &scratch.path().join("dist")).await?;
    let [variables, base, role, tenant] = pasted();
    guide_cluster(&moto, "alpha");

    let (ok, out) = paste(&moto, "alpha", &[&variables, &base, &role, &tenant]);
    assert!(ok, "{out}");
    assert!(
        out.contains("arn:aws:iam::123456789012:role/alpha-karpenter"),
        "step 3 shows the role it read: {out}"
    );
    let (_, status) = aws(
        &moto,
        &[
            "cloudformation",
            "describe-stacks",
            "--stack-name",
            "interruption-router-tenant-alpha",
            "--query",
            "Stacks[0].[StackStatus, Parameters[?ParameterKey=='KarpenterRoleName'].ParameterValue | [0]]",
            "--output",
            "text",
        ],
    );
    assert_eq!(status, "CREATE_COMPLETE\talpha-karpenter", "{out}");
    // The grant attached to the guide's role lets it read the cluster's queue.
    let (ok, attached) = aws(
        &moto,
        &[
            "iam",
            "list-attached-role-policies",
            "--role-name",
            "alpha-karpenter",
            "--query",
            "AttachedPolicies[0].PolicyArn",
            "--output",
            "text",
        ],
    );
    assert!(ok && attached.starts_with("arn:aws:iam::"), "{attached}");
    let (_, version) = aws(
        &moto,
        &[
            "iam",
            "get-policy",
            "--policy-arn",
            &attached,
            "--query",
            "Policy.DefaultVersionId",
            "--output",
            "text",
        ],
    );
    let (_, document) = aws(
        &moto,
        &[
            "iam",
            "get-policy-version",
            "--policy-arn",
            &attached,
            "--version-id",
            &version,
            "--query",
            "PolicyVersion.Document",
            "--output",
            "json",
        ],
    );
    assert!(
        document.contains("sqs:ReceiveMessage")
            && document.contains("arn:aws:sqs:us-east-1:123456789012:karpenter-alpha"),
        "{document}"
    );

    // beta's association names a role deleted since: step 3 stops the paste, before a stack.
    guide_cluster(&moto, "beta");
    let (ok, out) = aws(
        &moto,
        &["iam", "delete-role", "--role-name", "beta-karpenter"],
    );
    assert!(ok, "{out}");
    let (ok, out) = paste(&moto, "beta", &[&variables, &role, &tenant]);
    assert!(!ok, "{out}");
    assert!(out.contains("NoSuchEntity"), "{out}");
    let (exists, _) = aws(
        &moto,
        &[
            "cloudformation",
            "describe-stacks",
            "--stack-name",
            "interruption-router-tenant-beta",
        ],
    );
    assert!(!exists, "no tenant stack for beta: {out}");
    Ok(())
}
