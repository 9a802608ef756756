terraform {
  required_version = ">= 1.5.7"

  required_providers {
    aws = {
      source = "hashicorp/aws"
      # 6.0 gave data.aws_region its region attribute.
      version = ">= 6.0"
    }
  }
}
