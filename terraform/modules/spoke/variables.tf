# The deployment's own variables, then every parameter of cloudformation/spoke.yaml in the template's
# order: its name in snake_case, its type, its default and its description (tools/check_terraform.py
# holds them to the template).

variable "release_bucket" {
  description = "The artifact bucket holding the release (make's BUCKET), in the region the stack is deployed to: CloudFormation reads the template from it, and base.yaml's function its code."
  type        = string
}

variable "release_version" {
  description = "The release to deploy (make's RELEASE), e.g. 0.2.0: the template is read from https://<release_bucket>.s3.<region>.amazonaws.com/<release_prefix>/<release_version>/spoke.yaml."
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

variable "stack_name" {
  description = "The spoke stack's name (make's SPOKE_STACK; deployer.yaml's SpokeStackName)."
  type        = string
  default     = "interruption-router-spoke"
}

# cloudformation/spoke.yaml's parameters.

variable "hub_event_bus_arn" {
  description = "The hub stack's HubEventBusArn output (its central event bus)."
  type        = string
}

variable "hub_direct_queue_arn" {
  description = "In the hub's own region only: the hub stack's DirectQueueArn output. The five rules then write it themselves, as this stack's <SpokeRoleName>-direct-<region> role (one hop and one EventBridge quota fewer than through the hub bus). EventBridge delivers to another account's queue only in the same region: leave it empty in every other region, whose rules forward to HubEventBusArn."
  type        = string
  default     = ""
}

variable "router_role_arn" {
  description = "The hub stack's RouterRoleArn output (the router's execution role): the one principal the spoke role trusts."
  type        = string
}

variable "queue_prefix" {
  description = "Must equal the hub stack's QueuePrefix: the router names every cluster queue with it, in every account."
  type        = string
  default     = "karpenter-"
}

variable "spoke_role_name" {
  description = "Name of the role the router assumes here; must equal the hub stack's SpokeRoleName (the router builds arn:<partition>:iam::<account>:role<SpokeRolePath><SpokeRoleName> from it)."
  type        = string
  default     = "interruption-router-spoke"
}

variable "spoke_role_path" {
  description = "The spoke role's (and the direct role's) IAM path (empty: /); must equal the hub stack's SpokeRolePath. Set it when the role is created: a named role cannot be replaced, and tenant stacks import its ARN."
  type        = string
  default     = ""
}

variable "create_spoke_role" {
  description = "IAM is global: exactly one region's spoke stack per account creates the role (true), every other region's refers to it by name (false). Deploy the creating region first: a tenant queue policy naming a role that does not exist yet is refused."
  type        = string
  default     = "true"
}

variable "rule_name_prefix" {
  description = "Rules are named <RuleNamePrefix>-<kind>; unique per account and region."
  type        = string
  default     = "interruption-router"
}

variable "router_name" {
  description = "The hub stack's RouterName: names the exports this region's tenant stacks import whatever this stack is called (StackSets name theirs StackSet-<set>-<id>): <RouterName>:RouterRoleArn (the spoke role) and <RouterName>:QueuePrefix. The hub's own region has them from base.yaml, so this stack cannot be deployed there."
  type        = string
  default     = "interruption-router"
}

variable "permissions_boundary" {
  description = "The permissions boundary of the roles this stack creates: the name of a customer-managed policy of this account, with its path if any (empty: none). It must allow what their policies grant, and for the spoke role kms:GenerateDataKey and kms:Decrypt when the account's tenant queues use a KMS key (KmsKey)."
  type        = string
  default     = ""
}

variable "kms_key" {
  description = "The organisation's own KMS keys this account's tenant queues use (KmsKey=<key ARN> on tenant.yaml), any region, comma-separated: the spoke role may use them through SQS. Only the stack that creates the spoke role reads it. The keys' policies are their owner's: each must let the spoke role (or IAM) use it (README, Locked-down accounts)."
  type        = string
  default     = ""
}

variable "role_path" {
  description = "The forwarding role's IAM path (empty: /); changing it replaces the role. The spoke role takes its own, SpokeRolePath, which the hub must know too."
  type        = string
  default     = ""
}

variable "alarm_topic_arn" {
  description = "SNS topic (this account and region) the queue-age alarms of this region's tenant stacks notify. Empty: this stack creates one (the AlarmTopicArn output), which pages nobody until someone subscribes to it (routerctl verify --account fails until one is confirmed)."
  type        = string
  default     = ""
}
