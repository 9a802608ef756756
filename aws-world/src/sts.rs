//! STS's part of the model: a named profile acts in its account; AssumeRole is decided by the
//! role's trust policy for the caller (aws-model's evaluator), and answers a session whose caller
//! is `arn:aws:sts::<account>:assumed-role/<role>/<session>`, as GetCallerIdentity says.

use super::{World, policy};
use aws_model::{
    arn::arn_account,
    arn::arn_name_after_slash,
    policy::{Principal, Request, evaluate},
};
use router_core::aws::CallError;

impl World {
    /// The world as the credentials of profile `name` see it (the AWS CLI's and SDK's answer to
    /// an unknown profile).
    pub fn profiled(&self, name: &str) -> Result<World, CallError> {
        let account = self.lock().profiles.get(name).cloned().ok_or_else(|| {
            CallError::new(
                "ProfileNotFound",
                format!("the config profile ({name}) could not be found"),
            )
        })?;
        Ok(self.at(&account))
    }

    /// AssumeRole of `role_arn` by this view's caller: the world as the session sees it, or
    /// AccessDenied when the role does not exist or its trust policy does not admit the caller.
    pub fn assume_role(&self, role_arn: &str, session: &str) -> Result<World, CallError> {
        let caller = self.caller().to_owned();
        let trust = self.lock().roles.get(role_arn).map(|r| r.trust.clone());
        let denied = || {
            CallError::new(
                "AccessDenied",
                format!(
                    "AssumeRole {role_arn}: User: {caller} is not authorized to perform: \
                     sts:AssumeRole on resource: {role_arn}"
                ),
            )
        };
        let trust = trust.ok_or_else(denied)?;
        let trust = policy("trust policy", &trust).map_err(|_| denied())?;
        let context = [("aws:PrincipalArn", caller.as_str())];
        let decision = evaluate(
            std::slice::from_ref(&trust),
            &Request {
                principal: Principal::Aws(&caller),
                action: "sts:AssumeRole",
                resource: role_arn,
                context: &context,
            },
        );
        if !decision.is_allowed() {
            return Err(denied());
        }
        let account = arn_account(role_arn).unwrap_or_default();
        let session = format!(
            "arn:aws:sts::{account}:assumed-role/{}/{session}",
            arn_name_after_slash(role_arn)
        );
        Ok(self.as_caller(account, &session))
    }
}
