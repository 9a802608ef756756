//! A role's policies read once (the router role, the spoke role, Karpenter's): the reader lives
//! in [`aws_model::roles`], shared with the Karpenter stand-in.

pub(crate) use aws_model::roles::Role;
