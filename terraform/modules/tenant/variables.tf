# The deployment's own variables, then every parameter of cloudformation/tenant.yaml in the template's
# order: its name in snake_case, its type, its default and its description (tools/check_terraform.py
# holds them to the template).

variable "release_bucket" {
  description = "The artifact bucket holding the release (make's BUCKET), in the region the stack is deployed to: CloudFormation reads the template from it, and base.yaml's function its code."
  type        = string
}

variable "release_version" {
  description = "The release to deploy (make's RELEASE), e.g. 0.2.0: the template is read from https://<release_bucket>.s3.<region>.amazonaws.com/<release_prefix>/<release_version>/tenant.yaml."
  type        = string
}

variable "release_prefix" {
  description = "The key prefix of the releases in the bucket (make's RELEASE_PREFIX; deployer.yaml's ArtifactPrefix)."
  type        = string
  default     = "interruption-router"
}

variable "iam_role_arn" {
  description = "The role CloudFormation deploys the stack as (make's CFN_ROLE: deployer.yaml's CloudFormationRoleArn output); null: the caller's credentials. docs/terraform.md says what DeployerPolicy then admits."
  type        = string
  default     = null
}

variable "router_stack_name" {
  description = "The base stack's name (make's STACK_NAME; deployer.yaml's StackName): this stack is <router_stack_name>-tenant-<cluster_name>, '_' becoming '-', as make deploy-tenant names it and DeployerPolicy admits it. It names the stack only: the queue imports the region's exports (router_name), or base_stack_name's."
  type        = string
  default     = "interruption-router"
}

# cloudformation/tenant.yaml's parameters.

variable "cluster_name" {
  description = "EKS cluster name, exactly as in the instances' cluster tag (eks:eks-cluster-name)."
  type        = string
}

variable "router_name" {
  description = "The router's RouterName (base.yaml and spoke.yaml): with BaseStackName empty, the queue imports <RouterName>:RouterRoleArn and <RouterName>:QueuePrefix, which the stack that connects this region exports whatever it is called: base.yaml in the router's own account and region, spoke.yaml everywhere else (a StackSet's too). So the queue admits exactly the principal the router writes it as."
  type        = string
  default     = "interruption-router"
}

variable "base_stack_name" {
  description = "Empty (the default) imports the region's exports above. A stack name imports <BaseStackName>-RouterRoleArn and <BaseStackName>-QueuePrefix instead, as tenant stacks deployed before those exports existed do."
  type        = string
  default     = ""
}

variable "router_role_arn" {
  description = "The sender's role ARN. Empty imports it (see BaseStackName); set it when nothing in this region exports it (another tool deployed the router, or you do not want the export lock)."
  type        = string
  default     = ""
}

variable "queue_prefix" {
  description = "Empty imports it, so the queue name always carries the prefix the router may send to. Set it only when nothing exports it (as for RouterRoleArn); it must then equal the base stack's QueuePrefix, or the router cannot send here."
  type        = string
  default     = ""
}

variable "queue_name" {
  description = "Empty: the queue is <QueuePrefix><ClusterName>. Set (by make deploy-tenant and routerctl adopt) only when that passes SQS's 80 characters: the name the router derives for such a cluster, <QueuePrefix>, the cluster name cut to fit, \"-\" and the first 8 hex digits of the SHA-256 of the cluster name."
  type        = string
  default     = ""
}

variable "karpenter_role_name" {
  description = "Optional name (not ARN) of Karpenter's controller IAM role (IRSA or Pod Identity); when set, a customer-managed policy granting consume access to this queue only is attached to it."
  type        = string
  default     = ""
}

variable "reader_role_arn" {
  description = "With KarpenterRoleName empty (KARPENTER_ROLE=none: the role's own policies grant it the queue), the ARN of the role Karpenter reads the queue as. The queue's policy refuses receive, delete, change visibility and purge to every other principal (KarpenterRoleName's role, or this one); with neither set it refuses no reader."
  type        = string
  default     = ""
}

variable "alarm_topic_arn" {
  description = "SNS topic (this region) the queue's age alarm notifies. Empty: the topic of the stack that connects this region, imported as <RouterName>:AlarmTopicArn (base.yaml or spoke.yaml, which create one when given none), or <BaseStackName>-AlarmTopicArn."
  type        = string
  default     = ""
}

variable "event_kinds" {
  description = "The interruption event kinds this cluster receives (default: all five, what Karpenter's own set-up delivers). Leave a kind out to decline it, as a cluster without Karpenter's rule for it would: e.g. scheduled-change (AWS Health maintenance) where terminating on-demand nodes early would lose local data. The router counts declined events (Declined.<cluster>.<kind>) and neither sends, dead-letters nor pages them. A change is used within the router's CacheTtlSeconds; the queue stays."
  type        = list(string)
  default     = ["spot-interruption", "rebalance-recommendation", "state-change", "capacity-reservation-interruption", "scheduled-change"]
}

variable "kms_key" {
  description = "Empty: the queue uses SSE-SQS (as before). Create: this stack creates a customer-managed KMS key (rotation on) for the queue, whose key policy admits exactly the router's sender role and, through IAM, Karpenter's controller role. A key ARN: an existing customer-managed key of this account and region, whose policy its owner keeps: it must let the router's sender and Karpenter's controller role use it (README, Locked-down accounts); the stack grants Karpenter's role kms:Decrypt on it through SQS."
  type        = string
  default     = ""
}
