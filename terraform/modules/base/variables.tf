# The deployment's own variables, then every parameter of cloudformation/base.yaml in the template's
# order: its name in snake_case, its type, its default and its description (tools/check_terraform.py
# holds them to the template).

variable "release_bucket" {
  description = "The artifact bucket holding the release (make's BUCKET), in the region the stack is deployed to: CloudFormation reads the template from it, and base.yaml's function its code."
  type        = string
}

variable "release_version" {
  description = "The release to deploy (make's RELEASE), e.g. 0.2.0: the template is read from https://<release_bucket>.s3.<region>.amazonaws.com/<release_prefix>/<release_version>/base.yaml."
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
  description = "The base stack's name (make's STACK_NAME; deployer.yaml's StackName). Tenant stacks are named <stack_name>-tenant-<cluster>. At most 73 characters, and not starting with the queue prefix."
  type        = string
  default     = "interruption-router"
}

# cloudformation/base.yaml's parameters.

variable "code_s3_bucket" {
  description = "S3 bucket holding the router's bootstrap.zip (same region as the stack)."
  type        = string
}

variable "code_s3_key" {
  description = "Object key of the zip. Empty: this template's release, <CodePrefix>/bootstrap-<Architecture>.zip (the Release mapping; make release lays it out). A build of your own: a new key per build (e.g. bootstrap-<sha256>.zip): CloudFormation only updates the function code when this value changes."
  type        = string
  default     = ""
}

variable "queue_prefix" {
  description = "Cluster queues are named <QueuePrefix><cluster>; must match tenant.yaml's QueuePrefix."
  type        = string
  default     = "karpenter-"
}

variable "router_name" {
  description = "Names the exports tenant stacks of this region import whatever this stack is called: <RouterName>:RouterRoleArn and <RouterName>:QueuePrefix. spoke.yaml exports the same names in every other region, so a spoke of this router cannot be deployed in this account and region (its events come through the default-bus rules here). Change it only for a second router in the same region."
  type        = string
  default     = "interruption-router"
}

variable "cluster_tag_keys" {
  description = "Comma-separated EC2 tag keys naming the cluster, in priority order; a key ending in '*' takes the cluster name from the rest of the key."
  type        = string
  default     = "eks:eks-cluster-name,kubernetes.io/cluster/*,aws:eks:cluster-name"
}

variable "managed_tag_key" {
  description = "Only instances carrying this tag key are routed (Karpenter-launched). Empty routes every instance that has a cluster tag."
  type        = string
  default     = "karpenter.sh/nodepool"
}

variable "architecture" {
  description = "Must match how bootstrap.zip was built (make package ARCH=...)."
  type        = string
  default     = "arm64"
}

variable "memory_size" {
  description = "Function memory in MB."
  type        = number
  default     = 128
}

variable "batch_size" {
  description = "Records per invocation. Above 10, MaximumBatchingWindowInSeconds must be at least 1 (an AWS rule for SQS event sources)."
  type        = number
  default     = 100
}

variable "maximum_batching_window_in_seconds" {
  description = "How long Lambda gathers records before invoking. Keep it small: a spot warning gives two minutes in total."
  type        = number
  default     = 1
}

variable "maximum_concurrency" {
  description = "At most this many batches at once (the mapping's ScalingConfig). Each new execution environment assumes every member account's spoke role and sweeps each account's EC2 tags once, so this bounds the router's AssumeRole and DescribeInstances calls in a storm; 5 carries 1,000 clusters' worst storm in the simulation (docs/many-accounts.md)."
  type        = number
  default     = 5
}

variable "log_retention_in_days" {
  description = "Retention of the function's log group."
  type        = number
  default     = 30
}

variable "alarm_topic_arn" {
  description = "SNS topic (this region) every alarm notifies. Empty: this stack creates one (the AlarmTopicArn output), which pages nobody until someone subscribes to it (make deploy-base prints how; routerctl verify fails until a subscription is confirmed)."
  type        = string
  default     = ""
}

variable "log_level" {
  description = "Lambda application log level (the runtime reads it as AWS_LAMBDA_LOG_LEVEL)."
  type        = string
  default     = "INFO"
}

variable "cache_ttl_seconds" {
  description = "CACHE_TTL_SECONDS. How long an instance -> cluster answer is kept."
  type        = number
  default     = 3600
}

variable "negative_cache_ttl_seconds" {
  description = "NEGATIVE_CACHE_TTL_SECONDS. How long \"not ours\" is kept (short: tags can land just after launch); at most CacheTtlSeconds."
  type        = number
  default     = 60
}

variable "cache_max_entries" {
  description = "CACHE_MAX_ENTRIES. Bound on cached instances per execution environment."
  type        = number
  default     = 100000
}

variable "sweep_interval_seconds" {
  description = "SWEEP_INTERVAL_SECONDS. An execution environment lists an account and region's Karpenter nodes on its first lookup there, and again on a miss after this long; 0 never sweeps."
  type        = number
  default     = 600
}

variable "lookup_hedge_delay_ms" {
  description = "LOOKUP_HEDGE_DELAY_MS. How long a cold lookup waits for DescribeInstances before it also asks the Tagging API: auto (the p95 of recent latencies), a fixed 1-3000 ms, or off."
  type        = string
  default     = "auto"
}

variable "ec2_suspect_after_failures" {
  description = "EC2_SUSPECT_AFTER_FAILURES. Consecutive DescribeInstances failures after which an account and region asks the Tagging API first."
  type        = number
  default     = 2
}

variable "ec2_suspect_seconds" {
  description = "EC2_SUSPECT_SECONDS. How long EC2 stays suspected after that; 0 never suspects it."
  type        = number
  default     = 30
}

variable "served_accounts" {
  description = "Accounts whose events the router handles besides its own (SERVED_ACCOUNTS). Empty: this account only. A comma-separated list of account ids: those accounts, each reached through the role its spoke.yaml stack creates (SpokeRoleName). \"*\": every account whose events reach the router, i.e. whatever the central bus's policy admits (with OrganizationId)."
  type        = string
  default     = ""
}

variable "organization_id" {
  description = "CentralBus only: the organisation whose accounts may put events on the central bus (aws:PrincipalOrgID), with ServedAccounts=\"*\". Empty: the bus admits the ServedAccounts list."
  type        = string
  default     = ""
}

variable "central_bus" {
  description = "Enabled creates the event bus <stack>-hub that spoke.yaml stacks forward to (member accounts', and this account's other regions'), with the same five rules as the default bus. It admits the organisation (OrganizationId with ServedAccounts=\"*\"), or the ServedAccounts list, or with ServedAccounts empty this account alone. It also creates the direct queue <stack>-direct (the DirectQueueArn output), which the spoke stacks of this region write straight into with their own rules (spoke.yaml's HubDirectQueueArn), admitting the same accounts' <SpokeRoleName>-direct-<region> roles."
  type        = string
  default     = "Disabled"
}

variable "spoke_role_name" {
  description = "Name of the role spoke.yaml creates in each member account (same value there)."
  type        = string
  default     = "interruption-router-spoke"
}

variable "spoke_role_path" {
  description = "The IAM path of the role spoke.yaml creates in each member account (empty: /; same value there, SpokeRolePath). The router assumes arn:<partition>:iam::<account>:role<path><name>."
  type        = string
  default     = ""
}

variable "kms_key" {
  description = "Empty: the ingest queue, the direct queue (CentralBus) and the DLQ use SSE-SQS. Create: this stack creates a customer-managed KMS key (rotation on) for them, whose key policy admits exactly the stack's EventBridge rules, the served accounts' direct roles through SQS, and, through IAM, the router role. A key ARN: an existing customer-managed key of this account and region, whose policy its owner keeps: it must let EventBridge, the router role and (CentralBus) the member accounts' <SpokeRoleName>-direct-<region> roles use it (README, Locked-down accounts); the stack grants the router role its use through SQS."
  type        = string
  default     = ""
}

variable "permissions_boundary" {
  description = "The permissions boundary of the router role: the name of a customer-managed policy of this account, with its path if any (empty: none). It must allow what the role's policy grants, kms:Decrypt and kms:GenerateDataKey included with KmsKey=Create."
  type        = string
  default     = ""
}

variable "role_path" {
  description = "The router role's IAM path (empty: /). Changing it on a deployed stack replaces the role (IAM cannot move a role), and with it every tenant queue's grant: redeploy the tenant stacks."
  type        = string
  default     = ""
}
