# The base stack (cloudformation/base.yaml) of an interruption-router release, deployed once in the
# hub's account and region from the release's own template URL, as `make deploy-base
# RELEASE=<version>` deploys it. By URL because base.yaml is past the 51,200 bytes CloudFormation
# takes inline (template_body); with code_s3_key empty the function runs the release's zip from
# the same bucket. docs/terraform.md.

data "aws_region" "current" {}

resource "aws_cloudformation_stack" "this" {
  name = var.stack_name
  # The release's layout (make release), the one deployer.yaml's DeployerPolicy admits.
  template_url = "https://${var.release_bucket}.s3.${data.aws_region.current.region}.amazonaws.com/${var.release_prefix}/${var.release_version}/base.yaml"
  capabilities = ["CAPABILITY_IAM"]
  iam_role_arn = var.iam_role_arn

  # Every parameter of the template, from its variable: the stack is what the configuration says
  # (an update passes them all; a parameter left at its variable's default gets the template's).
  parameters = {
    CodeS3Bucket                   = var.code_s3_bucket
    CodeS3Key                      = var.code_s3_key
    QueuePrefix                    = var.queue_prefix
    RouterName                     = var.router_name
    ClusterTagKeys                 = var.cluster_tag_keys
    ManagedTagKey                  = var.managed_tag_key
    Architecture                   = var.architecture
    MemorySize                     = tostring(var.memory_size)
    BatchSize                      = tostring(var.batch_size)
    MaximumBatchingWindowInSeconds = tostring(var.maximum_batching_window_in_seconds)
    MaximumConcurrency             = tostring(var.maximum_concurrency)
    LogRetentionInDays             = tostring(var.log_retention_in_days)
    AlarmTopicArn                  = var.alarm_topic_arn
    LogLevel                       = var.log_level
    CacheTtlSeconds                = tostring(var.cache_ttl_seconds)
    NegativeCacheTtlSeconds        = tostring(var.negative_cache_ttl_seconds)
    CacheMaxEntries                = tostring(var.cache_max_entries)
    SweepIntervalSeconds           = tostring(var.sweep_interval_seconds)
    LookupHedgeDelayMs             = var.lookup_hedge_delay_ms
    Ec2SuspectAfterFailures        = tostring(var.ec2_suspect_after_failures)
    Ec2SuspectSeconds              = tostring(var.ec2_suspect_seconds)
    ServedAccounts                 = var.served_accounts
    OrganizationId                 = var.organization_id
    CentralBus                     = var.central_bus
    SpokeRoleName                  = var.spoke_role_name
    SpokeRolePath                  = var.spoke_role_path
    KmsKey                         = var.kms_key
    PermissionsBoundary            = var.permissions_boundary
    RolePath                       = var.role_path
  }
}
