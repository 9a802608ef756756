//! Who made a resource: the CloudFormation stack that lists it (ListStackResources over every
//! active stack, read once per run), else what its tags say (`aws:cloudformation:*`, or a tag
//! that names Terraform). adopt deletes only what no tool owns: a stack or a Terraform apply
//! would re-create it.

use std::collections::BTreeMap;

use crate::aws::Aws;

/// Who made a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A CloudFormation stack (its name, and the resource's logical id there).
    Stack { stack: String, logical: String },
    /// Nothing says: by hand, or a tool that leaves no trace (Terraform tags nothing by itself).
    Unknown { tool_hint: Option<String> },
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Stack { stack, logical } => write!(f, "stack {stack} ({logical})"),
            Owner::Unknown {
                tool_hint: Some(hint),
            } => write!(f, "{hint} (by its tags)"),
            Owner::Unknown { tool_hint: None } => {
                f.write_str("hand or a tool that tags nothing (no stack)")
            }
        }
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
    pub async fn read(aws: &Aws) -> Self {
        let mut by_physical = BTreeMap::new();
        let mut pages = aws.cfn.list_stacks().into_paginator().send();
        let mut stacks = Vec::new();
        while let Some(Ok(page)) = pages.next().await {
            stacks.extend(
                page.stack_summaries()
                    .iter()
                    .filter(|s| {
                        s.stack_status()
                            .is_some_and(|st| !st.as_str().starts_with("DELETE_COMPLETE"))
                    })
                    .filter_map(|s| s.stack_name().map(str::to_owned)),
            );
        }
        for stack in stacks {
            let mut pages = aws
                .cfn
                .list_stack_resources()
                .stack_name(&stack)
                .into_paginator()
                .send();
            while let Some(Ok(page)) = pages.next().await {
                for r in page.stack_resource_summaries() {
                    if let (Some(physical), Some(logical)) =
                        (r.physical_resource_id(), r.logical_resource_id())
                    {
                        by_physical
                            .insert(physical.to_owned(), (stack.clone(), logical.to_owned()));
                    }
                }
            }
        }
        Self { by_physical }
    }

    /// The owner of a resource known by any of `ids` (name, URL, ARN), else what its tags hint.
    pub fn owner(&self, ids: &[&str], tags: &BTreeMap<String, String>) -> Owner {
        for id in ids {
            if let Some((stack, logical)) = self.by_physical.get(*id) {
                return Owner::Stack {
                    stack: stack.clone(),
                    logical: logical.clone(),
                };
            }
        }
        if let Some(stack) = tags.get("aws:cloudformation:stack-name") {
            return Owner::Stack {
                stack: stack.clone(),
                logical: tags
                    .get("aws:cloudformation:logical-id")
                    .cloned()
                    .unwrap_or_default(),
            };
        }
        let terraform = tags.iter().any(|(k, v)| {
            let (k, v) = (k.to_ascii_lowercase(), v.to_ascii_lowercase());
            k.contains("terraform") || (k.contains("managed") && v.contains("terraform"))
        });
        Owner::Unknown {
            tool_hint: terraform.then(|| "Terraform".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_come_from_the_stacks_then_from_tags() {
        let owners = StackOwners {
            by_physical: BTreeMap::from([(
                "Karpenter-alpha-SpotInterruptionRule-X".to_owned(),
                (
                    "Karpenter-alpha".to_owned(),
                    "SpotInterruptionRule".to_owned(),
                ),
            )]),
        };
        let tags = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            owners.owner(&["Karpenter-alpha-SpotInterruptionRule-X"], &tags(&[])),
            Owner::Stack {
                stack: "Karpenter-alpha".into(),
                logical: "SpotInterruptionRule".into()
            }
        );
        assert_eq!(
            owners.owner(
                &["q"],
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
        for terraform in [("Terraform", "true"), ("ManagedBy", "terraform")] {
            assert_eq!(
                owners.owner(&["q"], &tags(&[terraform])),
                Owner::Unknown {
                    tool_hint: Some("Terraform".into())
                }
            );
        }
        assert_eq!(
            owners.owner(&["q"], &tags(&[("team", "platform")])),
            Owner::Unknown { tool_hint: None }
        );
    }
}
