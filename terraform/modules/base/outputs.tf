# Every output of cloudformation/base.yaml, in snake_case, with the template's description. An output
# under a Condition is null when the stack has none.

output "router_role_arn" {
  description = "The router's execution role; tenant.yaml lets only this role send to a cluster queue."
  value       = aws_cloudformation_stack.this.outputs["RouterRoleArn"]
}

output "function_name" {
  description = "Router function name."
  value       = aws_cloudformation_stack.this.outputs["FunctionName"]
}

output "ingest_queue_url" {
  description = "Central ingest queue URL."
  value       = aws_cloudformation_stack.this.outputs["IngestQueueUrl"]
}

output "ingest_queue_arn" {
  description = "Central ingest queue ARN."
  value       = aws_cloudformation_stack.this.outputs["IngestQueueArn"]
}

output "dead_letter_queue_url" {
  description = "DLQ URL (also the router's DEAD_LETTER_QUEUE_URL)."
  value       = aws_cloudformation_stack.this.outputs["DeadLetterQueueUrl"]
}

output "dead_letter_queue_arn" {
  description = "DLQ ARN."
  value       = aws_cloudformation_stack.this.outputs["DeadLetterQueueArn"]
}

output "queue_prefix" {
  description = "Prefix of the cluster queues the router sends to; tenant stacks must use the same."
  value       = aws_cloudformation_stack.this.outputs["QueuePrefix"]
}

output "region_router_role_arn" {
  description = "The principal the router writes this region's cluster queues as (here, its own role)."
  value       = aws_cloudformation_stack.this.outputs["RegionRouterRoleArn"]
}

output "region_queue_prefix" {
  description = "The cluster queue prefix, for this region's tenant stacks."
  value       = aws_cloudformation_stack.this.outputs["RegionQueuePrefix"]
}

output "alarm_topic_arn" {
  description = "The SNS topic every alarm of the router notifies (the one given, or the one this stack created): subscribe the on-call to it (aws sns subscribe --topic-arn <this> ...)."
  value       = aws_cloudformation_stack.this.outputs["AlarmTopicArn"]
}

output "region_alarm_topic_arn" {
  description = "The same topic, which this region's tenant stacks' queue-age alarms notify."
  value       = aws_cloudformation_stack.this.outputs["RegionAlarmTopicArn"]
}

output "hub_event_bus_arn" {
  description = "The central event bus; spoke.yaml's HubEventBusArn in every member account."
  value       = lookup(aws_cloudformation_stack.this.outputs, "HubEventBusArn", null)
}

output "direct_queue_arn" {
  description = "The direct queue; spoke.yaml's HubDirectQueueArn in the member accounts of this region, whose rules then deliver here themselves."
  value       = lookup(aws_cloudformation_stack.this.outputs, "DirectQueueArn", null)
}

output "queue_key_arn" {
  description = "The KMS key of the ingest queue and the DLQ (KmsKey=Create, or the key given)."
  value       = lookup(aws_cloudformation_stack.this.outputs, "QueueKeyArn", null)
}

output "dashboard_name" {
  description = "CloudWatch dashboard of the router (per-cluster forwards, reasons, latency, lookups)."
  value       = aws_cloudformation_stack.this.outputs["DashboardName"]
}

output "version" {
  description = "The release of this template (CHANGELOG.md); routerctl verify compares it with its own."
  value       = aws_cloudformation_stack.this.outputs["Version"]
}
