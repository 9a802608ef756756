//! A moto server on a free loopback port: the local AWS that tests, the demo and the benchmarks
//! talk to through the real SDK (`AWS_ENDPOINT_URL`), started and stopped with this value.
//!
//! moto is found in this order: `$MOTO_SERVER`; `moto_server` on `PATH` (the Makefile puts its
//! pinned venv first); a venv made earlier under the user's cache directory. If none exists the
//! pinned `moto[server]` is installed from PyPI into that cache venv (`moto_install.rs`), so
//! `lab demo` also works on a fresh machine without the Makefile. Each server is forked from one process that
//! has imported moto once (`zygote.rs`), with the `python3` beside `moto_server`.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use crate::{
    moto_install::{install_fixes, locate_or_install},
    ports, zygote,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    process::{Child, Command},
};

/// The moto release everything here is tested with (also pinned in tools/requirements.txt).
pub const MOTO_VERSION: &str = "5.2.5";
/// Region and dummy credentials for the emulator.
pub const REGION: &str = "us-east-1";
pub const ACCOUNT: &str = "123456789012";

pub struct MotoServer {
    process: Process,
    endpoint: String,
    _port: ports::Reserved,
}

impl MotoServer {
    /// Starts a server and waits until it answers.
    pub async fn start() -> Result<Self> {
        let program = locate_or_install().await?;
        let fixes = install_fixes()?;
        let mut last_error = None;
        // A freed port can be taken before moto binds it; try a few.
        let python = zygote::python_for(&program);
        for _ in 0..3 {
            let port = ports::reserve()?;
            let mut process = match &python {
                Some(python) => {
                    Process::Forked(zygote::fork(python.clone(), fixes.clone(), port.0).await?)
                }
                None => Process::Spawned(spawn(&program, &fixes, port.0)?),
            };
            let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port.0));
            match wait_ready(addr, &mut process).await {
                Ok(()) => {
                    return Ok(Self {
                        process,
                        endpoint: format!("http://{addr}"),
                        _port: port,
                    });
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("moto did not start")))
    }

    /// `http://127.0.0.1:<port>`, the value for `AWS_ENDPOINT_URL`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Environment that points an SDK-using process at this server.
    pub fn env(&self) -> Vec<(String, String)> {
        env_for(&self.endpoint)
    }

    /// An SDK configuration for this server.
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        sdk_config_for(&self.endpoint).await
    }

    /// Wipes all state.
    pub async fn reset(&self) -> Result<()> {
        let status = http_request(self.addr(), "POST", "/moto-api/reset", b"").await?;
        if status != 200 {
            bail!("moto reset answered {status}");
        }
        Ok(())
    }

    /// How long after a minute ends SQS's datapoints for it (NumberOfMessagesSent, …Received,
    /// …Deleted, NumberOfEmptyReceives: every caller's, per queue) reach CloudWatch; 150 s unless
    /// set (`moto_fixes/`).
    pub async fn set_sqs_metric_delay(&self, delay: Duration) -> Result<()> {
        self.configure(&format!(
            r#"{{"sqs": {{"metric_delay_seconds": {}}}}}"#,
            delay.as_secs()
        ))
        .await
    }

    /// How long each StackSet operation runs (RUNNING, refusing another unless managed execution
    /// queues it) before it SUCCEEDS; 3 s unless set (`moto_fixes/`). CloudFormation's take
    /// minutes: a test of what a second operation meets sets a time no machine's load outlasts.
    pub async fn set_stack_set_operation_time(&self, time: Duration) -> Result<()> {
        self.configure(&format!(
            r#"{{"cloudformation": {{"stack_set_operation_seconds": {}}}}}"#,
            time.as_secs()
        ))
        .await
    }

    /// POST /moto-api/config with `body` (the stand-ins' settings among moto's own).
    async fn configure(&self, body: &str) -> Result<()> {
        let status = http_request(self.addr(), "POST", "/moto-api/config", body.as_bytes()).await?;
        if status != 201 {
            bail!("moto's /moto-api/config answered {status}");
        }
        Ok(())
    }

    /// Creates `bucket` if needed and stores `body` at `key` (plain path-style S3 over HTTP; moto
    /// does not check signatures, and this saves the harness an S3 client).
    pub async fn put_object(&self, bucket: &str, key: &str, body: &[u8]) -> Result<()> {
        let created = http_request(self.addr(), "PUT", &format!("/{bucket}"), b"").await?;
        let stored = http_request(self.addr(), "PUT", &format!("/{bucket}/{key}"), body).await?;
        if created != 200 || stored != 200 {
            bail!("moto S3 answered {created}/{stored} storing s3://{bucket}/{key}");
        }
        Ok(())
    }

    fn addr(&self) -> &str {
        self.endpoint.trim_start_matches("http://")
    }

    /// Stops the server now (it also stops when this value is dropped).
    pub async fn stop(mut self) {
        match &mut self.process {
            Process::Spawned(child) => {
                let _ = child.kill().await;
            }
            Process::Forked(forked) => forked.stop().await,
        }
    }
}

/// A server: its own `moto_server` process, or a fork of the zygote ([`zygote`]).
enum Process {
    Spawned(Child),
    Forked(zygote::Forked),
}

impl Process {
    fn pid(&self) -> Option<u32> {
        match self {
            Process::Spawned(child) => child.id(),
            Process::Forked(forked) => Some(forked.pid),
        }
    }

    /// Whether it exited, and how.
    fn exited(&mut self) -> Result<Option<String>> {
        Ok(match self {
            Process::Spawned(child) => child.try_wait()?.map(|status| status.to_string()),
            Process::Forked(forked) => (!forked.alive()).then(|| "an error".to_owned()),
        })
    }
}

fn spawn(program: &Path, fixes: &Path, port: u16) -> Result<Child> {
    Command::new(program)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        // moto_fixes/, loaded as sitecustomize: where moto answers otherwise than AWS.
        .env("PYTHONPATH", fixes)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(match std::env::var_os("MOTO_LOG_DIR") {
            Some(dir) => {
                std::fs::File::create(std::path::Path::new(&dir).join(format!("moto-{port}.log")))
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null())
            }
            None => Stdio::null(),
        })
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", program.display()))
}

/// Instance tags Karpenter puts on a node it launches for `cluster`.
pub fn karpenter_tags(cluster: &str) -> Vec<(String, String)> {
    vec![
        ("eks:eks-cluster-name".into(), cluster.into()),
        (format!("kubernetes.io/cluster/{cluster}"), "owned".into()),
        ("karpenter.sh/nodepool".into(), "default".into()),
    ]
}

/// `cluster`'s tenant as tenant.yaml makes it, as far as the router looks: the queue
/// `karpenter-<cluster>` tagged for the cluster ([`router_core::tenancy::TENANT_TAG`]),
/// and its tenant record ([`router_core::tenancy::record_name`]). Returns the queue URL.
pub async fn create_tenant_queue(config: &aws_config::SdkConfig, cluster: &str) -> Result<String> {
    let name = format!("karpenter-{cluster}");
    let out = aws_sdk_sqs::Client::new(config)
        .create_queue()
        .queue_name(&name)
        .tags(router_core::tenancy::TENANT_TAG, cluster)
        .send()
        .await
        .with_context(|| format!("CreateQueue {name}"))?;
    let record = router_core::tenancy::record_name(&name);
    aws_sdk_ssm::Client::new(config)
        .put_parameter()
        .name(&record)
        .value(cluster)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .with_context(|| format!("PutParameter {record}"))?;
    Ok(out.queue_url().context("no queue url")?.to_owned())
}

/// Deletes a tenant as deleting its tenant stack does: the queue and its tenant record.
pub async fn delete_tenant(config: &aws_config::SdkConfig, queue_url: &str) -> Result<()> {
    aws_sdk_sqs::Client::new(config)
        .delete_queue()
        .queue_url(queue_url)
        .send()
        .await
        .with_context(|| format!("DeleteQueue {queue_url}"))?;
    let name = queue_url.rsplit('/').next().unwrap_or_default();
    aws_sdk_ssm::Client::new(config)
        .delete_parameter()
        .name(router_core::tenancy::record_name(name))
        .send()
        .await
        .with_context(|| format!("DeleteParameter for {name}"))?;
    Ok(())
}

/// What a node is launched as: its type, its zone (`None`: the region's first, as moto picks),
/// and whether it is a spot instance.
#[derive(Debug, Clone, Copy)]
pub struct Placement<'a> {
    pub instance_type: &'a str,
    pub zone: Option<&'a str>,
    pub spot: bool,
}

impl Placement<'_> {
    /// What RunInstances launches when asked for nothing in particular here: an On-Demand
    /// m5.large in the region's first zone.
    pub const DEFAULT: Placement<'static> = Placement {
        instance_type: "m5.large",
        zone: None,
        spot: false,
    };
}

/// Launches `count` instances with `tags` (none: untagged) in one RunInstances call; returns
/// their ids. What stands in for Karpenter launching nodes.
pub async fn launch(
    ec2: &aws_sdk_ec2::Client,
    tags: &[(String, String)],
    count: i32,
) -> Result<Vec<String>> {
    launch_as(ec2, tags, count, Placement::DEFAULT).await
}

/// [`launch`], of the type, in the zone and bought as `placement` says.
pub async fn launch_as(
    ec2: &aws_sdk_ec2::Client,
    tags: &[(String, String)],
    count: i32,
    placement: Placement<'_>,
) -> Result<Vec<String>> {
    use aws_sdk_ec2::types::{
        InstanceMarketOptionsRequest, InstanceType, MarketType, Placement as Zone, ResourceType,
        Tag, TagSpecification,
    };
    let mut request = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::from(placement.instance_type))
        .min_count(count)
        .max_count(count);
    if let Some(zone) = placement.zone {
        request = request.placement(Zone::builder().availability_zone(zone).build());
    }
    if placement.spot {
        request = request.instance_market_options(
            InstanceMarketOptionsRequest::builder()
                .market_type(MarketType::Spot)
                .build(),
        );
    }
    if !tags.is_empty() {
        let tags = tags
            .iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        request = request.tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .set_tags(Some(tags))
                .build(),
        );
    }
    let out = request.send().await.context("RunInstances")?;
    Ok(out
        .instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_owned))
        .collect())
}

/// Environment variables that point an SDK-using process at `endpoint` with dummy credentials.
pub fn env_for(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_SESSION_TOKEN", "testing"),
        ("AWS_REGION", REGION),
        ("AWS_DEFAULT_REGION", REGION),
        // Keep the SDK away from ~/.aws and the instance metadata service.
        ("AWS_CONFIG_FILE", "/dev/null"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// An SDK configuration for the emulator at `endpoint` (which may be a proxy in front of moto).
pub async fn sdk_config_for(endpoint: &str) -> aws_config::SdkConfig {
    let credentials = aws_config::Region::new(REGION);
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(credentials)
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "testing", "testing", None, None, "moto",
        ))
        .load()
        .await
}

async fn wait_ready(addr: SocketAddr, process: &mut Process) -> Result<()> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        if let Some(status) = process.exited()? {
            bail!(
                "moto_server exited with {status} before it was ready (port {} taken?)",
                addr.port()
            );
        }
        // Another server answering on the port is not this moto (see crate::ports).
        if http_request(&addr.to_string(), "GET", "/moto-api/", b"")
            .await
            .is_ok_and(|s| s == 200)
            && process
                .pid()
                .is_some_and(|pid| ports::held_by(pid, addr.port()))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("moto_server on {addr} did not answer within 30 s")
}

/// A bare HTTP/1.1 request; returns the status code. Enough for moto's control API and S3.
async fn http_request(addr: &str, method: &str, path: &str, body: &[u8]) -> Result<u16> {
    let mut stream = TcpStream::connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response)).await??;
    let head = String::from_utf8_lossy(&response[..response.len().min(64)]).to_string();
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an HTTP response: {head:?}"))
}

/// An SDK configuration acting as `account` in `region` on the emulator at `endpoint`: the
/// credentials AssumeRole returns for `arn:aws:iam::<account>:role/<role>` (moto isolates accounts
/// by them, and enforces no trust policy, so the role need not exist).
pub async fn sdk_config_as(
    endpoint: &str,
    account: &str,
    region: &str,
    role: &str,
) -> Result<aws_config::SdkConfig> {
    let base = sdk_config_for(endpoint)
        .await
        .to_builder()
        .region(Some(aws_config::Region::new(region.to_owned())))
        .build();
    let assumed = aws_clients::aws::Aws::new(&base)?
        .assume_role(&format!("arn:aws:iam::{account}:role/{role}"), "routerctl")
        .await
        .with_context(|| format!("acting as account {account} on the emulator"))?;
    Ok(assumed.config)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::moto_install::{install_fixes, locate_or_install};

    /// moto_fixes/ parses stack templates with libyaml's parser (for speed): every template the
    /// project deploys, adopts or upgrades from parses to what moto's own loader makes of it.
    #[tokio::test]
    async fn templates_parse_with_libyaml_as_with_motos_own_loader() {
        let python = locate_or_install().await.unwrap().with_file_name("python");
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut templates: Vec<PathBuf> = ["cloudformation", "tests/fixtures", "releases/0.1.0"]
            .iter()
            .flat_map(|dir| std::fs::read_dir(repo.join(dir)).unwrap())
            .map(|entry| entry.unwrap().path())
            .flat_map(|path| match std::fs::read_dir(&path) {
                Ok(inner) => inner.map(|e| e.unwrap().path()).collect(),
                Err(_) => vec![path],
            })
            .filter(|path| {
                path.extension().is_some_and(|e| e == "yaml")
                    && std::fs::read_to_string(path).is_ok_and(|t| t.contains("Resources:"))
            })
            .collect();
        templates.sort();
        assert!(templates.len() >= 15, "{templates:?}");
        let compared = std::process::Command::new(&python)
            .env("PYTHONPATH", install_fixes().unwrap())
            .arg("-c")
            .arg(
                "import sys, yaml\n\
                 from moto.cloudformation import models, utils\n\
                 assert 'libyaml' in models.Stack.parse_template.__qualname__, \
                     models.Stack.parse_template.__qualname__\n\
                 yaml.add_multi_constructor('', utils.yaml_tag_constructor)\n\
                 for path in sys.argv[1:]:\n\
                 \x20   text = open(path).read()\n\
                 \x20   mine, motos = models.Stack.parse_template(text), yaml.load(text, Loader=yaml.Loader)\n\
                 \x20   assert mine == motos, path\n\
                 print(len(sys.argv) - 1)\n",
            )
            .args(&templates)
            .output()
            .unwrap();
        assert!(
            compared.status.success(),
            "{}",
            String::from_utf8_lossy(&compared.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&compared.stdout).trim(),
            templates.len().to_string()
        );
    }
}
