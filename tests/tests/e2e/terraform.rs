//! The Terraform modules (`terraform/modules/`) and the example beside terraform-aws-eks's
//! karpenter module (`terraform/examples/eks-karpenter/`), checked without a Terraform binary,
//! which cannot be installed here: `tools/check_terraform.py` parses every `.tf` with python-hcl2,
//! holds each module's variables, parameters and outputs to the template it deploys, and every
//! resource's, data source's, provider's and module block's arguments to the schemas kept in
//! `tests/fixtures/terraform/` (taken from the providers' and terraform-aws-eks's sources at the
//! pinned versions). The checkout passes; each broken copy fails, naming what broke.
//!
//! And what the AWS provider's `aws_cloudformation_stack` sends CloudFormation (its create,
//! update and delete requests, as its source at the pinned version builds them) against
//! deployer.yaml's DeployerPolicy, evaluated as IAM does: docs/terraform.md says what follows.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::release::deployer::{ACCOUNT, REGION, allowed, deployer, release_url};

/// The checkout the tests run in.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the checkout")
        .to_owned()
}

/// The project's Python (python-hcl2 is pinned in tools/requirements.txt), else python3 on PATH.
fn python() -> PathBuf {
    let venv = repo().join(".venv/bin/python");
    if venv.is_file() {
        venv
    } else {
        "python3".into()
    }
}

/// The checker run on the checkout rooted at `root`: whether it passed, and what it printed.
fn check(root: &Path) -> (bool, String) {
    let out = Command::new(python())
        .arg(repo().join("tools/check_terraform.py"))
        .arg("--root")
        .arg(root)
        .output()
        .expect("python runs tools/check_terraform.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A copy of what the checker reads (terraform/, the three templates, the schema fixtures) in a
/// scratch directory of its own, removed when dropped.
struct Copy(PathBuf);

impl Copy {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("terraform-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for dir in ["terraform", "tests/fixtures/terraform"] {
            copy_dir(&repo().join(dir), &root.join(dir));
        }
        std::fs::create_dir_all(root.join("cloudformation")).unwrap();
        for template in ["base.yaml", "tenant.yaml", "spoke.yaml"] {
            std::fs::copy(
                repo().join("cloudformation").join(template),
                root.join("cloudformation").join(template),
            )
            .unwrap();
        }
        Self(root)
    }

    /// Replaces `from` with `to` in `file` (relative to the copy), once; `from` must be there.
    fn edit(&self, file: &str, from: &str, to: &str) -> &Self {
        let path = self.0.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        self
    }

    /// Removes the top-level block that starts with the line `header` (`variable "x" {`) from
    /// `file`, up to its closing `}` line.
    fn remove_block(&self, file: &str, header: &str) -> &Self {
        let path = self.0.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let start = text
            .find(&format!("{header}\n"))
            .unwrap_or_else(|| panic!("{file} has no {header:?}"));
        let end = start + text[start..].find("\n}\n").expect("the block's end") + 3;
        std::fs::write(&path, format!("{}{}", &text[..start], &text[end..])).unwrap();
        self
    }

    /// The checker's verdict on the copy, which must be a failure: what it printed.
    fn fails(&self) -> String {
        let (passed, out) = check(&self.0);
        assert!(!passed, "the broken copy passed:\n{out}");
        out
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            // Terraform's own working files, were someone to run it here.
            if entry.file_name() != ".terraform" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Asserts `out` says each of `said`.
fn says(out: &str, said: &[&str]) {
    for text in said {
        assert!(out.contains(text), "should say {text:?}:\n{out}");
    }
}

#[test]
fn the_modules_and_the_example_parse_map_every_parameter_and_output_and_pass_the_schemas() {
    let (passed, out) = check(&repo());
    assert!(passed, "{out}");
    // It says what it checked, so a checker that checks nothing cannot pass quietly.
    says(
        &out,
        &[
            "terraform/modules/base: 29 parameters, 16 outputs of cloudformation/base.yaml",
            "terraform/modules/tenant: 11 parameters, 7 outputs of cloudformation/tenant.yaml",
            "terraform/modules/spoke: 13 parameters, 10 outputs of cloudformation/spoke.yaml",
            "terraform/examples/eks-karpenter",
            "aws_cloudformation_stack",
            "helm_release",
            "terraform-aws-modules/eks/aws//modules/karpenter 21.19.0",
        ],
    );
}

#[test]
fn a_misspelled_resource_argument_fails() {
    let copy = Copy::new("misspelled");
    copy.edit(
        "terraform/modules/tenant/main.tf",
        "template_url =",
        "templat_url  =",
    );
    says(
        &copy.fails(),
        &["terraform/modules/tenant/main.tf", "templat_url"],
    );
}

#[test]
fn a_template_parameter_without_its_variable_fails() {
    let copy = Copy::new("no-variable");
    copy.remove_block(
        "terraform/modules/base/variables.tf",
        "variable \"memory_size\" {",
    );
    says(&copy.fails(), &["MemorySize", "memory_size"]);
}

#[test]
fn a_parameter_the_template_gains_fails_until_the_module_has_it() {
    let copy = Copy::new("new-parameter");
    copy.edit(
        "cloudformation/base.yaml",
        "\nParameters:\n",
        "\nParameters:\n  InsightsRetentionInDays:\n    Type: Number\n    Default: 14\n    Description: A parameter the template gained.\n",
    );
    says(
        &copy.fails(),
        &[
            "InsightsRetentionInDays",
            "variable \"insights_retention_in_days\"",
        ],
    );
}

#[test]
fn a_default_other_than_the_templates_fails() {
    let copy = Copy::new("default");
    copy.edit(
        "terraform/modules/base/variables.tf",
        "default     = 128\n",
        "default     = 256\n",
    );
    says(&copy.fails(), &["memory_size", "default", "128", "256"]);
}

#[test]
fn a_template_output_without_its_output_fails() {
    let copy = Copy::new("no-output");
    copy.remove_block(
        "terraform/modules/tenant/outputs.tf",
        "output \"queue_name\" {",
    );
    says(&copy.fails(), &["QueueName", "queue_name"]);
}

#[test]
fn a_parameter_the_module_does_not_pass_fails() {
    let copy = Copy::new("not-passed");
    copy.edit(
        "terraform/modules/tenant/main.tf",
        "    KarpenterRoleName = var.karpenter_role_name\n",
        "",
    );
    says(&copy.fails(), &["KarpenterRoleName", "parameters"]);
}

#[test]
fn a_capability_other_than_the_template_needs_fails() {
    let copy = Copy::new("capability");
    copy.edit(
        "terraform/modules/spoke/main.tf",
        "[\"CAPABILITY_NAMED_IAM\"]",
        "[\"CAPABILITY_IAM\"]",
    );
    says(&copy.fails(), &["CAPABILITY_NAMED_IAM", "spoke"]);
}

#[test]
fn a_template_url_off_the_release_layout_fails() {
    let copy = Copy::new("template-url");
    copy.edit(
        "terraform/modules/tenant/main.tf",
        "/${var.release_version}/tenant.yaml\"",
        "/${var.release_version}/base.yaml\"",
    );
    says(&copy.fails(), &["template_url", "tenant.yaml"]);
}

#[test]
fn an_input_or_output_the_karpenter_module_does_not_have_fails() {
    let copy = Copy::new("module-input");
    copy.edit(
        "terraform/examples/eks-karpenter/main.tf",
        "  enable_spot_termination = false\n",
        "  enable_spot_terminaton  = false\n",
    );
    says(&copy.fails(), &["enable_spot_terminaton", "karpenter"]);

    let copy = Copy::new("module-output");
    copy.edit(
        "terraform/examples/eks-karpenter/main.tf",
        "module.karpenter.iam_role_name",
        "module.karpenter.iam_role_nam",
    );
    says(&copy.fails(), &["iam_role_nam", "karpenter"]);
}

/// helm provider 3's `kubernetes` is an attribute (`kubernetes = { … }`); the block form of
/// helm 2 is refused by Terraform.
#[test]
fn a_helm_2_block_where_helm_3_takes_an_attribute_fails() {
    let copy = Copy::new("helm-block");
    copy.edit(
        "terraform/examples/eks-karpenter/main.tf",
        "kubernetes = {",
        "kubernetes {",
    );
    says(&copy.fails(), &["kubernetes", "attribute"]);
}

#[test]
fn a_file_that_does_not_parse_fails() {
    let copy = Copy::new("parse");
    copy.edit(
        "terraform/modules/spoke/outputs.tf",
        "output \"version\" {",
        "output \"version\" {{",
    );
    says(&copy.fails(), &["terraform/modules/spoke/outputs.tf"]);
}

/// The AWS provider's `aws_cloudformation_stack` (internal/service/cloudformation/stack.go at
/// the pinned version) names the stack's role in CreateStack when `iam_role_arn` is set, in
/// UpdateStack only when `iam_role_arn` changed, and never in DeleteStack; DeployerPolicy admits
/// a change only when the request names CloudFormationRole. So with DeployerPolicy alone a
/// module's first apply creates the stack and every later change and the destroy are refused:
/// what docs/terraform.md tells Terraform users.
#[test]
fn deployer_policy_admits_terraforms_create_and_refuses_its_later_updates_and_its_destroy()
-> Result<()> {
    // deployer.yaml as the deployer tests render it (bucket `artifacts`).
    let deployer = deployer()?;
    let (policies, role) = (deployer.policy, deployer.role_arn);
    let stack = |name: &str| format!("arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{name}/x");
    let allowed = |action: &str, resource: &str, context: &[(&str, &str)]| {
        allowed(&policies, action, resource, context)
    };
    for (stack_name, file) in [
        ("interruption-router", "base.yaml"),
        ("interruption-router-tenant-alpha", "tenant.yaml"),
        ("interruption-router-spoke", "spoke.yaml"),
    ] {
        let url = release_url("0.2.0", file);
        let arn = stack(stack_name);
        // Create: CreateStack with RoleARN (iam_role_arn) and TemplateURL.
        let create = [
            ("cloudformation:RoleArn", role.as_str()),
            ("cloudformation:TemplateUrl", url.as_str()),
        ];
        assert!(
            allowed("cloudformation:CreateStack", &arn, &create),
            "{stack_name}: create"
        );
        // Read: DescribeStacks, GetTemplate (the resource's read).
        for read in [
            "cloudformation:DescribeStacks",
            "cloudformation:GetTemplate",
        ] {
            assert!(allowed(read, &arn, &[]), "{stack_name}: {read}");
        }
        // An update with iam_role_arn unchanged: TemplateURL, no RoleARN.
        let update = [("cloudformation:TemplateUrl", url.as_str())];
        assert!(
            !allowed("cloudformation:UpdateStack", &arn, &update),
            "{stack_name}: an update without the role"
        );
        // One that changes iam_role_arn names it.
        assert!(
            allowed("cloudformation:UpdateStack", &arn, &create),
            "{stack_name}: an update naming the role"
        );
        // Destroy: DeleteStack names no role.
        assert!(
            !allowed("cloudformation:DeleteStack", &arn, &[]),
            "{stack_name}: a destroy"
        );
        // Another role at create is refused, as for the make targets.
        let someone = format!("arn:aws:iam::{ACCOUNT}:role/someone-else");
        let other = [
            ("cloudformation:RoleArn", someone.as_str()),
            ("cloudformation:TemplateUrl", url.as_str()),
        ];
        assert!(!allowed("cloudformation:CreateStack", &arn, &other));
    }
    Ok(())
}
