# Every output of cloudformation/spoke.yaml, in snake_case, with the template's description. An output
# under a Condition is null when the stack has none.

output "router_role_arn" {
  description = "The role the router sends to this account's cluster queues with (the spoke role)."
  value       = aws_cloudformation_stack.this.outputs["RouterRoleArn"]
}

output "queue_prefix" {
  description = "Prefix of the cluster queues; tenant stacks take it from here."
  value       = aws_cloudformation_stack.this.outputs["QueuePrefix"]
}

output "region_router_role_arn" {
  description = "The principal the router writes this region's cluster queues as (the spoke role)."
  value       = aws_cloudformation_stack.this.outputs["RegionRouterRoleArn"]
}

output "region_queue_prefix" {
  description = "The cluster queue prefix, for this region's tenant stacks."
  value       = aws_cloudformation_stack.this.outputs["RegionQueuePrefix"]
}

output "spoke_role_arn" {
  description = "The role the hub's router assumes in this account."
  value       = aws_cloudformation_stack.this.outputs["SpokeRoleArn"]
}

output "alarm_topic_arn" {
  description = "The SNS topic this region's tenant alarms notify (the one given, or the one this stack created): subscribe the on-call to it."
  value       = aws_cloudformation_stack.this.outputs["AlarmTopicArn"]
}

output "region_alarm_topic_arn" {
  description = "The same topic, which this region's tenant stacks import."
  value       = aws_cloudformation_stack.this.outputs["RegionAlarmTopicArn"]
}

output "hub_event_bus_arn" {
  description = "The hub bus this account's interruption events are forwarded to."
  value       = aws_cloudformation_stack.this.outputs["HubEventBusArn"]
}

output "direct_role_arn" {
  description = "The role this region's rules write the hub's direct queue as."
  value       = lookup(aws_cloudformation_stack.this.outputs, "DirectRoleArn", null)
}

output "version" {
  description = "The release of this template (CHANGELOG.md)."
  value       = aws_cloudformation_stack.this.outputs["Version"]
}
