# Every output of cloudformation/tenant.yaml, in snake_case, with the template's description. An output
# under a Condition is null when the stack has none.

output "queue_name" {
  description = "Value for Karpenter's settings.interruptionQueue (helm) / INTERRUPTION_QUEUE."
  value       = aws_cloudformation_stack.this.outputs["QueueName"]
}

output "queue_url" {
  description = "Queue URL."
  value       = aws_cloudformation_stack.this.outputs["QueueUrl"]
}

output "queue_arn" {
  description = "Queue ARN."
  value       = aws_cloudformation_stack.this.outputs["QueueArn"]
}

output "queue_key_arn" {
  description = "The queue's KMS key (KmsKey=Create, or the key given). Karpenter's controller role needs kms:Decrypt on it (through SQS); the stack grants it when KarpenterRoleName is set."
  value       = lookup(aws_cloudformation_stack.this.outputs, "QueueKeyArn", null)
}

output "queue_age_alarm_name" {
  description = "The alarm that pages when nobody reads the queue."
  value       = aws_cloudformation_stack.this.outputs["QueueAgeAlarmName"]
}

output "event_kinds" {
  description = "The event kinds the router sends this cluster (the queue's interruption-router:kinds tag)."
  value       = aws_cloudformation_stack.this.outputs["EventKinds"]
}

output "tenant_record_name" {
  description = "The SSM parameter that records this cluster as onboarded (the router reads it when the queue is missing)."
  value       = aws_cloudformation_stack.this.outputs["TenantRecordName"]
}
