variable "region" {
  description = "The cluster's region: the region of the router's base stack (or of a spoke stack of it), whose exports the tenant stack imports."
  type        = string
}

variable "cluster_name" {
  description = "The new EKS cluster's name."
  type        = string
}

variable "kubernetes_version" {
  description = "The cluster's Kubernetes version (<major>.<minor>)."
  type        = string
  default     = "1.33"
}

variable "vpc_id" {
  description = "The VPC the cluster runs in."
  type        = string
}

variable "subnet_ids" {
  description = "The private subnets of the cluster's nodes (and of its control plane)."
  type        = list(string)
}

variable "release_bucket" {
  description = "The artifact bucket of this region holding the interruption-router release (make's BUCKET)."
  type        = string
}

variable "release_version" {
  description = "The interruption-router release whose tenant.yaml is deployed (make's RELEASE)."
  type        = string
}

variable "router_stack_name" {
  description = "The router's base stack name (make's STACK_NAME): the tenant stack is <router_stack_name>-tenant-<cluster_name>."
  type        = string
  default     = "interruption-router"
}

variable "karpenter_version" {
  description = "The Karpenter chart's version (Karpenter v1.9 to v1.15 read an interruption queue the router writes; the project's tests pin v1.14.0's parsers)."
  type        = string
  default     = "1.14.0"
}
