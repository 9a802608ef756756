//! Who made a resource, as far as the account can tell: the CloudFormation stack that lists it
//! (ListStackResources over every active stack, read once per run), else the marks other tools
//! leave on what they make. adopt deletes only what carries no tool's mark, and only when the
//! operator says they made it by hand (`--delete-hand-made`): deleting what a tool manages fights
//! its next apply, which re-creates it.
//!
//! Terraform tags nothing by itself, so a tag naming it is not how to know. What the tools do
//! leave:
//!
//! * Terraform's `name_prefix` appends a 26-digit unique id, and teams' `default_tags` often
//!   name Terraform. Two modules make Karpenter's rules that way and tag them `ClusterName`:
//!   terraform-aws-eks's karpenter module names them `<rule_name_prefix><Kind>-<id>`
//!   (`KarpenterSpotInterrupt-…` by default), EKS Blueprints addons `Karpenter-<Kind>-<id>`.
//!   Which one made them decides the one variable that retires them;
//! * Crossplane's AWS providers tag `crossplane-kind`, `crossplane-name`,
//!   `crossplane-providerconfig`; AWS Controllers for Kubernetes tag `services.k8s.aws/*`;
//! * Pulumi's auto-naming appends `-` and seven hex digits; its stacks may tag `pulumi*`;
//! * CloudFormation (and the CDK, eksctl, Copilot on top of it) tags `aws:cloudformation:*`.
//!
//! A resource without any of these may still be a tool's: that is why deleting one also needs
//! the operator's word.

use std::collections::BTreeMap;

use crate::cloud::moves::Moves;

/// Who made a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A CloudFormation stack (its name, and the resource's logical id there).
    Stack { stack: String, logical: String },
    /// Another tool, told by its marks: the tool, and the marks.
    Tool { tool: Tool, marks: String },
    /// No tool's mark: made by hand, or by a tool that leaves none.
    Unmarked,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Stack { stack, logical } => write!(f, "stack {stack} ({logical})"),
            Owner::Tool { tool, marks } => write!(f, "{tool} ({marks})"),
            Owner::Unmarked => f.write_str("hand or a tool that leaves no mark"),
        }
    }
}

/// A tool other than CloudFormation, as far as its marks tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// terraform-aws-modules/terraform-aws-eks `modules/karpenter`.
    TerraformEksKarpenter,
    /// aws-ia/terraform-aws-eks-blueprints-addons' Karpenter addon.
    EksBlueprints,
    /// Terraform, module unknown.
    Terraform,
    Crossplane,
    /// AWS Controllers for Kubernetes.
    Ack,
    Pulumi,
}

impl Tool {
    /// Terraform, whichever module.
    pub fn is_terraform(self) -> bool {
        matches!(
            self,
            Tool::TerraformEksKarpenter | Tool::EksBlueprints | Tool::Terraform
        )
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tool::TerraformEksKarpenter => "Terraform, terraform-aws-eks's karpenter module",
            Tool::EksBlueprints => "Terraform, EKS Blueprints addons",
            Tool::Terraform => "Terraform",
            Tool::Crossplane => "Crossplane",
            Tool::Ack => "AWS Controllers for Kubernetes",
            Tool::Pulumi => "Pulumi",
        })
    }
}

/// The names terraform-aws-eks's karpenter module (v19 to v21) and EKS Blueprints addons give
/// their rules' kinds, before name_prefix's id.
const MODULE_RULE_KINDS: [&str; 5] = [
    "HealthEvent",
    "SpotInterrupt",
    "InstanceRebalance",
    "InstanceStateChange",
    "CRInterruption",
];

/// Which Karpenter module's rule `name` is, if its name is one (`<prefix><Kind>-<26 digits>`).
fn karpenter_module(name: &str) -> Option<Tool> {
    if !terraform_unique_suffix(name) {
        return None;
    }
    let head = name[..name.len() - 26].strip_suffix('-')?;
    let kind = MODULE_RULE_KINDS.iter().find(|k| head.ends_with(*k))?;
    let prefix = &head[..head.len() - kind.len()];
    if prefix == "Karpenter-" {
        Some(Tool::EksBlueprints)
    } else if !prefix.ends_with('-') {
        // The module's rule_name_prefix, "Karpenter" unless the caller set another.
        Some(Tool::TerraformEksKarpenter)
    } else {
        None
    }
}

/// Which stack made what: every active stack's resources, read once (ListStacks and
/// ListStackResources; one DescribeStackResources per resource would cost a call each, and
/// moto ignores its PhysicalResourceId).
pub(super) struct StackOwners {
    /// Physical id → (stack, logical id).
    pub by_physical: BTreeMap<String, (String, String)>,
}

impl StackOwners {
    pub async fn read(site: &impl Moves) -> Self {
        let mut by_physical = BTreeMap::new();
        for stack in site.active_stacks().await.unwrap_or_default() {
            for (logical, physical) in site.listed_resources(&stack).await.unwrap_or_default() {
                by_physical.insert(physical, (stack.clone(), logical));
            }
        }
        Self { by_physical }
    }

    /// The owner of a resource known by any of `ids` (name, URL, ARN), whose name is `name`, with
    /// these tags.
    pub fn owner(&self, ids: &[&str], name: &str, tags: &BTreeMap<String, String>) -> Owner {
        for id in ids {
            if let Some((stack, logical)) = self.by_physical.get(*id) {
                return Owner::Stack {
                    stack: stack.clone(),
                    logical: logical.clone(),
                };
            }
        }
        marks(name, tags)
    }
}

/// The owner other tools' marks name, from a resource's name and tags.
pub fn marks(name: &str, tags: &BTreeMap<String, String>) -> Owner {
    if let Some(stack) = tags.get("aws:cloudformation:stack-name") {
        return Owner::Stack {
            stack: stack.clone(),
            logical: tags
                .get("aws:cloudformation:logical-id")
                .cloned()
                .unwrap_or_default(),
        };
    }
    let mut found: Vec<(Tool, String)> = Vec::new();
    for (k, v) in tags {
        let (lk, lv) = (k.to_ascii_lowercase(), v.to_ascii_lowercase());
        if lk.starts_with("crossplane-") {
            found.push((Tool::Crossplane, format!("tag {k}")));
        } else if lk.starts_with("services.k8s.aws/") {
            found.push((Tool::Ack, format!("tag {k}")));
        } else if lk.starts_with("pulumi") {
            found.push((Tool::Pulumi, format!("tag {k}")));
        } else if lk.contains("terraform") || lv.contains("terraform") {
            found.push((Tool::Terraform, format!("tag {k}={v}")));
        } else if k == "ClusterName" {
            found.push((
                Tool::Terraform,
                "tag ClusterName, as EKS Blueprints addons and terraform-aws-eks's karpenter \
                 module tag their rules"
                    .to_owned(),
            ));
        }
    }
    if let Some(module) = karpenter_module(name) {
        // The module's name is the surest mark: it names the tool the other marks only say is
        // Terraform.
        found.retain(|(tool, _)| *tool != Tool::Terraform);
        found.insert(
            0,
            (
                module,
                "rule named <prefix><Kind>-<name_prefix's id>".to_owned(),
            ),
        );
        if tags.contains_key("ClusterName") {
            found.push((module, "tag ClusterName".to_owned()));
        }
    } else if terraform_unique_suffix(name) {
        found.push((
            Tool::Terraform,
            "name ending in name_prefix's 26-digit id".to_owned(),
        ));
    } else if pulumi_suffix(name) {
        found.push((
            Tool::Pulumi,
            "name ending in auto-naming's -<7 hex>".to_owned(),
        ));
    }
    match found.first() {
        None => Owner::Unmarked,
        Some((tool, _)) => Owner::Tool {
            tool: *tool,
            marks: found
                .iter()
                .filter(|(t, _)| t == tool)
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        },
    }
}

/// `…-20231012123456789000000001`: Terraform's `name_prefix` (a timestamp and a counter).
fn terraform_unique_suffix(name: &str) -> bool {
    let digits = name.bytes().rev().take_while(u8::is_ascii_digit).count();
    digits == 26 && name.len() > 26
}

/// `…-1a2b3c4`: Pulumi's auto-naming.
fn pulumi_suffix(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(head, tail)| {
        !head.is_empty()
            && tail.len() == 7
            && tail
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && tail.bytes().any(|b| b.is_ascii_digit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn owners_come_from_the_stacks_then_from_marks() {
        let owners = StackOwners {
            by_physical: BTreeMap::from([(
                "Karpenter-alpha-SpotInterruptionRule-X".to_owned(),
                (
                    "Karpenter-alpha".to_owned(),
                    "SpotInterruptionRule".to_owned(),
                ),
            )]),
        };
        let id = "Karpenter-alpha-SpotInterruptionRule-X";
        assert_eq!(
            owners.owner(&[id], id, &tags(&[])),
            Owner::Stack {
                stack: "Karpenter-alpha".into(),
                logical: "SpotInterruptionRule".into()
            }
        );
        assert_eq!(
            owners.owner(
                &["q"],
                "q",
                &tags(&[
                    ("aws:cloudformation:stack-name", "other"),
                    ("aws:cloudformation:logical-id", "Queue")
                ])
            ),
            Owner::Stack {
                stack: "other".into(),
                logical: "Queue".into()
            }
        );
    }

    #[test]
    fn each_tools_marks_name_it() {
        let tool = |name: &str, pairs: &[(&str, &str)]| match marks(name, &tags(pairs)) {
            Owner::Tool { tool, .. } => Some(tool),
            _ => None,
        };
        // EKS Blueprints' rules: name_prefix "Karpenter-SpotInterrupt-", tag ClusterName.
        assert_eq!(
            tool(
                "Karpenter-SpotInterrupt-20231012123456789000000001",
                &[("ClusterName", "beta")]
            ),
            Some(Tool::EksBlueprints)
        );
        // terraform-aws-eks's karpenter module: "<rule_name_prefix><Kind>-", the prefix
        // "Karpenter" by default or the caller's.
        for name in [
            "KarpenterSpotInterrupt-20231012123456789000000001",
            "KarpenterCRInterruption-20231012123456789000000001",
            "prodHealthEvent-20231012123456789000000001",
        ] {
            assert_eq!(
                tool(name, &[("ClusterName", "beta"), ("ManagedBy", "terraform")]),
                Some(Tool::TerraformEksKarpenter),
                "{name}"
            );
        }
        // name_prefix's id on a name no module gives: Terraform, module unknown.
        assert_eq!(
            tool("Karpenter-Spot-20231012123456789000000001", &[]),
            Some(Tool::Terraform)
        );
        assert_eq!(
            tool("prod-SpotInterrupt-20231012123456789000000001", &[]),
            Some(Tool::Terraform)
        );
        assert_eq!(
            tool("q", &[("ManagedBy", "terraform")]),
            Some(Tool::Terraform)
        );
        assert_eq!(
            tool("q", &[("crossplane-kind", "queue")]),
            Some(Tool::Crossplane)
        );
        assert_eq!(
            tool("q", &[("services.k8s.aws/namespace", "karpenter")]),
            Some(Tool::Ack)
        );
        assert_eq!(tool("interruptions-4f3a2b1", &[]), Some(Tool::Pulumi));
        // Nothing a tool leaves: a name and a team tag.
        assert_eq!(
            marks(
                "KarpenterSpotInterrupt-gamma",
                &tags(&[("team", "platform")])
            ),
            Owner::Unmarked
        );
        assert_eq!(marks("Karpenter-gamma", &tags(&[])), Owner::Unmarked);
        assert_eq!(marks("karpenter-deadbee", &tags(&[])), Owner::Unmarked);
        // name_prefix's id needs a prefix before it: 26 digits alone are a name someone chose.
        assert_eq!(
            marks("20231012123456789000000001", &tags(&[])),
            Owner::Unmarked
        );
    }
}
