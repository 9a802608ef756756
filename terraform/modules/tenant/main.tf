# A cluster's tenant stack (cloudformation/tenant.yaml) of an interruption-router release: its
# Karpenter queue, the queue's tenant record and alarm, and Karpenter's grant, deployed from the
# release's template URL as `make deploy-tenant RELEASE=<version>` deploys it, under the same
# stack name. It imports the region's exports (the base stack's here, a spoke stack's elsewhere):
# deploy it after the stack that exports them. docs/terraform.md.

data "aws_region" "current" {}

resource "aws_cloudformation_stack" "this" {
  name = "${var.router_stack_name}-tenant-${replace(var.cluster_name, "_", "-")}"
  # The release's layout (make release), the one deployer.yaml's DeployerPolicy admits.
  template_url = "https://${var.release_bucket}.s3.${data.aws_region.current.region}.amazonaws.com/${var.release_prefix}/${var.release_version}/tenant.yaml"
  capabilities = ["CAPABILITY_IAM"]
  iam_role_arn = var.iam_role_arn

  # Every parameter of the template, from its variable: the stack is what the configuration says
  # (an update passes them all; a parameter left at its variable's default gets the template's).
  parameters = {
    ClusterName       = var.cluster_name
    RouterName        = var.router_name
    BaseStackName     = var.base_stack_name
    RouterRoleArn     = var.router_role_arn
    QueuePrefix       = var.queue_prefix
    QueueName         = var.queue_name
    KarpenterRoleName = var.karpenter_role_name
    ReaderRoleArn     = var.reader_role_arn
    AlarmTopicArn     = var.alarm_topic_arn
    EventKinds        = join(",", var.event_kinds)
    KmsKey            = var.kms_key
  }
}
