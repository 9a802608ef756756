# A member account's (or the hub account's other region's) spoke stack (cloudformation/spoke.yaml) of
# an interruption-router release, deployed from the release's template URL as `make deploy-spoke
# RELEASE=<version>` deploys it. It names its IAM role (the router assumes it by name), hence
# CAPABILITY_NAMED_IAM. docs/terraform.md.

data "aws_region" "current" {}

resource "aws_cloudformation_stack" "this" {
  name = var.stack_name
  # The release's layout (make release), the one deployer.yaml's DeployerPolicy admits.
  template_url = "https://${var.release_bucket}.s3.${data.aws_region.current.region}.amazonaws.com/${var.release_prefix}/${var.release_version}/spoke.yaml"
  capabilities = ["CAPABILITY_NAMED_IAM"]
  iam_role_arn = var.iam_role_arn

  # Every parameter of the template, from its variable: the stack is what the configuration says
  # (an update passes them all; a parameter left at its variable's default gets the template's).
  parameters = {
    HubEventBusArn      = var.hub_event_bus_arn
    HubDirectQueueArn   = var.hub_direct_queue_arn
    RouterRoleArn       = var.router_role_arn
    QueuePrefix         = var.queue_prefix
    SpokeRoleName       = var.spoke_role_name
    SpokeRolePath       = var.spoke_role_path
    CreateSpokeRole     = var.create_spoke_role
    RuleNamePrefix      = var.rule_name_prefix
    RouterName          = var.router_name
    PermissionsBoundary = var.permissions_boundary
    KmsKey              = var.kms_key
    RolePath            = var.role_path
    AlarmTopicArn       = var.alarm_topic_arn
  }
}
