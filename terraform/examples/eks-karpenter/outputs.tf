output "interruption_queue" {
  description = "The queue Karpenter reads (the tenant stack's QueueName output), which the router writes."
  value       = module.tenant.queue_name
}

output "karpenter_role_name" {
  description = "Karpenter's controller role (the karpenter module's iam_role_name output), the tenant stack's KarpenterRoleName: routerctl verify --cluster <cluster> checks it may read the queue."
  value       = module.karpenter.iam_role_name
}

output "karpenter_node_role_name" {
  description = "The role of the nodes Karpenter launches (the karpenter module's node_iam_role_name output): the EC2NodeClass's role."
  value       = module.karpenter.node_iam_role_name
}
