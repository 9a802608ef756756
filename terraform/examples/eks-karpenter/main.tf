# A new EKS cluster whose Karpenter reads the interruption queue the router writes, beside
# terraform-aws-eks's karpenter module: the module makes Karpenter's controller role (Pod
# Identity), its node role and access entry, and no queue and no rules of its own
# (enable_spot_termination = false); the router's tenant stack makes the queue, grants the
# controller role (the module's iam_role_name output) and records the cluster as onboarded; and
# Karpenter's chart is pointed at the queue (settings.interruptionQueue). The router's base stack
# (terraform/modules/base, or make deploy-base) must stand in the region first: the tenant stack
# imports its exports. docs/terraform.md.

provider "aws" {
  region = var.region
}

# The chart is installed in the new cluster, as the identity that created it.
provider "helm" {
  kubernetes = {
    host                   = module.eks.cluster_endpoint
    cluster_ca_certificate = base64decode(module.eks.cluster_certificate_authority_data)
    exec = {
      api_version = "client.authentication.k8s.io/v1beta1"
      command     = "aws"
      args        = ["eks", "get-token", "--cluster-name", module.eks.cluster_name, "--region", var.region]
    }
  }
}

module "eks" {
  source  = "terraform-aws-modules/eks/aws"
  version = "21.19.0"

  name               = var.cluster_name
  kubernetes_version = var.kubernetes_version
  vpc_id             = var.vpc_id
  subnet_ids         = var.subnet_ids

  # Terraform installs the chart below through the public endpoint, as the cluster's creator.
  endpoint_public_access                   = true
  enable_cluster_creator_admin_permissions = true

  # The Pod Identity agent before any node: Karpenter's controller gets its role through it.
  addons = {
    eks-pod-identity-agent = { before_compute = true }
    vpc-cni                = { before_compute = true }
    kube-proxy             = {}
    coredns                = {}
  }

  # Two nodes for Karpenter's controller itself; Karpenter launches the rest.
  eks_managed_node_groups = {
    controller = {
      instance_types = ["m7i.large"]
      min_size       = 2
      max_size       = 2
      desired_size   = 2
      labels         = { "karpenter.sh/controller" = "true" }
    }
  }
}

module "karpenter" {
  source  = "terraform-aws-modules/eks/aws//modules/karpenter"
  version = "21.19.0"

  cluster_name = module.eks.cluster_name

  # No interruption queue and no EventBridge rules of the module's own: the router's rule set
  # delivers this cluster's interruptions into the tenant stack's queue.
  enable_spot_termination = false
}

# The cluster's interruption queue, written by the router alone, read by Karpenter's controller
# role alone (the module's role, granted by the stack's managed policy, which the module's
# attachments leave alone: they are not exclusive).
module "tenant" {
  source = "../../modules/tenant"

  release_bucket    = var.release_bucket
  release_version   = var.release_version
  router_stack_name = var.router_stack_name

  cluster_name        = module.eks.cluster_name
  karpenter_role_name = module.karpenter.iam_role_name
}

resource "helm_release" "karpenter" {
  # After the controller's nodes and its Pod Identity association: a pod admitted before the
  # association exists runs without the role's credentials.
  depends_on = [module.eks, module.karpenter]

  name       = "karpenter"
  namespace  = module.karpenter.namespace
  repository = "oci://public.ecr.aws/karpenter"
  chart      = "karpenter"
  version    = var.karpenter_version

  values = [yamlencode({
    settings = {
      clusterName = module.eks.cluster_name
      # The tenant stack's queue (its QueueName output), which the router writes.
      interruptionQueue = module.tenant.queue_name
    }
    # The service account the module's Pod Identity association gives the controller role.
    serviceAccount = {
      name = module.karpenter.service_account
    }
    # On the controller's own nodes, not on nodes it manages.
    nodeSelector = { "karpenter.sh/controller" = "true" }
  })]
}
