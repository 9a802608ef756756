//! The AWS clients the operator commands use, built once from one SDK configuration, and error
//! text that names what AWS said instead of the SDK's bare "service error".

use std::{collections::BTreeMap, error::Error, time::SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use aws_credential_types::{Credentials, provider::SharedCredentialsProvider};
use aws_sdk_sqs::{
    config::http::HttpResponse,
    error::{DisplayErrorContext, ProvideErrorMetadata, SdkError},
};

/// One client per service, all for the same account and region. Fields are public so a test can
/// point a single service elsewhere (e.g. Lambda at a local Invoke API).
#[derive(Clone)]
pub struct Aws {
    pub region: String,
    pub cfn: aws_sdk_cloudformation::Client,
    pub ec2: aws_sdk_ec2::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub lambda: aws_sdk_lambda::Client,
    pub events: aws_sdk_eventbridge::Client,
    pub iam: aws_sdk_iam::Client,
    pub kms: aws_sdk_kms::Client,
    pub fis: aws_sdk_fis::Client,
    pub logs: aws_sdk_cloudwatchlogs::Client,
    pub cloudwatch: aws_sdk_cloudwatch::Client,
    pub sts: aws_sdk_sts::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub sns: aws_sdk_sns::Client,
    /// The configuration the clients were built from (what [`Aws::assume_role`] starts from).
    pub config: aws_config::SdkConfig,
}

impl Aws {
    /// Clients from the usual chain (environment, profile, instance role), in `region` if given.
    /// `AWS_ENDPOINT_URL` is honoured, which is how the tests and `demo --keep` reach the emulator.
    pub async fn load(region: Option<String>) -> Result<Self> {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = region {
            loader = loader.region(aws_config::Region::new(region));
        }
        Self::new(&loader.load().await)
    }

    /// Clients with the credentials of a named profile (from the shared config and credentials
    /// files), in `region`.
    pub async fn load_profile(profile: &str, region: &str) -> Result<Self> {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .profile_name(profile)
            .region(aws_config::Region::new(region.to_owned()))
            .load()
            .await;
        Self::new(&config)
    }

    /// Clients acting as `role_arn`, assumed now with these clients' credentials (same region and
    /// endpoint). The credentials are not refreshed: for a command's run, not a long-lived process.
    pub async fn assume_role(&self, role_arn: &str, session_name: &str) -> Result<Self> {
        let out = self
            .sts
            .assume_role()
            .role_arn(role_arn)
            .role_session_name(session_name)
            .send()
            .await
            .map_err(|e| anyhow!("AssumeRole {role_arn}: {}", describe(&e)))?;
        let c = out
            .credentials()
            .context("AssumeRole returned no credentials")?;
        let credentials = Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_owned()),
            SystemTime::try_from(*c.expiration()).ok(),
            "routerctl-assume-role",
        );
        let config = self
            .config
            .to_builder()
            .credentials_provider(SharedCredentialsProvider::new(credentials))
            .build();
        Self::new(&config)
    }

    /// The account and ARN these clients act as (STS GetCallerIdentity).
    pub async fn caller(&self) -> Result<(String, String)> {
        let out = self
            .sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| anyhow!("GetCallerIdentity: {}", describe(&e)))?;
        Ok((
            out.account().unwrap_or_default().to_owned(),
            out.arn().unwrap_or_default().to_owned(),
        ))
    }

    pub fn new(config: &aws_config::SdkConfig) -> Result<Self> {
        let Some(region) = config.region() else {
            bail!(
                "no AWS region configured: pass --region or set AWS_REGION (or a profile's region)"
            );
        };
        Ok(Self {
            region: region.to_string(),
            cfn: aws_sdk_cloudformation::Client::new(config),
            ec2: aws_sdk_ec2::Client::new(config),
            sqs: aws_sdk_sqs::Client::new(config),
            lambda: aws_sdk_lambda::Client::new(config),
            events: aws_sdk_eventbridge::Client::new(config),
            iam: aws_sdk_iam::Client::new(config),
            kms: aws_sdk_kms::Client::new(config),
            fis: aws_sdk_fis::Client::new(config),
            logs: aws_sdk_cloudwatchlogs::Client::new(config),
            cloudwatch: aws_sdk_cloudwatch::Client::new(config),
            sts: aws_sdk_sts::Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            sns: aws_sdk_sns::Client::new(config),
            config: config.clone(),
        })
    }
}

/// `Code: message` as AWS returned it; for an answer without an AWS error, its HTTP status; else
/// the whole error chain (no credentials, no network, a timeout).
pub fn describe<E>(error: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + Error + 'static,
{
    match (error.code(), error.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => match error {
            SdkError::ServiceError(e) => format!(
                "HTTP {} without an AWS error code",
                e.raw().status().as_u16()
            ),
            other => DisplayErrorContext(other).to_string(),
        },
    }
}

/// The physical id of a stack's resource. (DescribeStackResources, not DescribeStackResource:
/// the emulator answers the latter with a 500.)
pub async fn stack_resource(aws: &Aws, stack: &str, logical: &str) -> Result<String> {
    stack_resources(&aws.cfn, stack)
        .await?
        .remove(logical)
        .with_context(|| format!("stack {stack} has no resource {logical}"))
}

/// The stack's resources, logical id → physical id (DescribeStackResources), as AWS answered:
/// routerctl's seam and the lab read them alike.
pub async fn read_stack_resources(
    cfn: &aws_sdk_cloudformation::Client,
    stack: &str,
) -> Result<BTreeMap<String, String>, aws_call_error::CallError> {
    Ok(cfn
        .describe_stack_resources()
        .stack_name(stack)
        .send()
        .await
        .map_err(aws_call_error::call_error)?
        .stack_resources()
        .iter()
        .filter_map(|r| {
            Some((
                r.logical_resource_id()?.to_owned(),
                r.physical_resource_id()?.to_owned(),
            ))
        })
        .collect())
}

/// [`read_stack_resources`], its error naming the call, for the lab and the tests.
pub async fn stack_resources(
    cfn: &aws_sdk_cloudformation::Client,
    stack: &str,
) -> Result<BTreeMap<String, String>> {
    read_stack_resources(cfn, stack)
        .await
        .map_err(|e| anyhow!("DescribeStackResources {stack}: {e}"))
}

/// Every rule on the default event bus (all pages of ListRules).
pub async fn default_bus_rules(aws: &Aws) -> Result<Vec<aws_sdk_eventbridge::types::Rule>> {
    bus_rules(aws, None).await
}

/// Every rule on the event bus `bus` (`None`: the default bus), all pages of ListRules.
pub async fn bus_rules(
    aws: &Aws,
    bus: Option<&str>,
) -> Result<Vec<aws_sdk_eventbridge::types::Rule>> {
    let mut rules = Vec::new();
    let mut next: Option<String> = None;
    loop {
        let page = aws
            .events
            .list_rules()
            .set_event_bus_name(bus.map(str::to_owned))
            .set_next_token(next.take())
            .send()
            .await
            .map_err(|e| anyhow!("ListRules {}: {}", bus.unwrap_or("default"), describe(&e)))?;
        rules.extend(page.rules().iter().cloned());
        next = page.next_token().map(str::to_owned);
        if next.is_none() {
            return Ok(rules);
        }
    }
}

/// The URL of the queue named `name` (GetQueueUrl): through an emulator's clients, the emulator's
/// URL, which a stack's outputs (naming AWS's host) are not.
pub async fn queue_url(sqs: &aws_sdk_sqs::Client, name: &str) -> Result<String> {
    sqs.get_queue_url()
        .queue_name(name)
        .send()
        .await
        .map_err(|e| anyhow!("GetQueueUrl {name}: {}", describe(&e)))?
        .queue_url()
        .map(str::to_owned)
        .with_context(|| format!("GetQueueUrl {name} answered no URL"))
}
