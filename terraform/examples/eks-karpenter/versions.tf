terraform {
  required_version = ">= 1.5.7"

  # Pinned: the versions whose schemas tools/check_terraform.py holds this example to
  # (tests/fixtures/terraform/). terraform-aws-eks 21.19.0 needs the AWS provider 6.28 or later.
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "6.28.0"
    }
    helm = {
      source  = "hashicorp/helm"
      version = "3.1.2"
    }
  }
}
