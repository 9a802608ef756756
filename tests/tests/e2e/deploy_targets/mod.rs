//! The Makefile's deploy targets, run for real against a recording stand-in of the `aws` CLI
//! (tests/fixtures/aws_standin.py), which keeps stacks as the CLI does: an existing stack keeps
//! every parameter a re-run does not pass, stack names must be CloudFormation's, and a template
//! past 51,200 bytes needs --s3-bucket.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A scratch directory with the stand-in's record and state (`release::` deploys with it too).
pub(crate) struct Cli {
    pub(crate) dir: PathBuf,
}

impl Cli {
    pub(crate) fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("deploy-targets-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self { dir }
    }

    /// `make <args>` with the stand-in as AWS; (success, stdout + stderr).
    pub(crate) fn make(&self, args: &[&str]) -> (bool, String) {
        let standin = repo().join("tests/fixtures/aws_standin.py");
        let output = Command::new("make")
            .arg("-C")
            .arg(repo())
            .args(args)
            .arg(format!("AWS=python3 {}", standin.display()))
            .env("AWS_STANDIN_RECORD", self.dir.join("calls.jsonl"))
            .env("AWS_STANDIN_STATE", self.dir.join("stacks"))
            .output()
            .expect("make runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// `aws <args>` run as the stand-in, recorded like the targets' calls.
    pub(crate) fn aws(&self, args: &[&str]) -> (bool, String) {
        let output = Command::new("python3")
            .arg(repo().join("tests/fixtures/aws_standin.py"))
            .args(args)
            .env("AWS_STANDIN_RECORD", self.dir.join("calls.jsonl"))
            .env("AWS_STANDIN_STATE", self.dir.join("stacks"))
            .output()
            .expect("the stand-in runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    /// An IAM role the stand-in then knows (`aws iam create-role`), as the account has it.
    pub(crate) fn role(&self, name: &str) {
        let (ok, out) = self.aws(&["iam", "create-role", "--role-name", name]);
        assert!(ok, "{out}");
    }

    /// Every call recorded so far, each as its argument list.
    pub(crate) fn calls(&self) -> Vec<Vec<String>> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("calls.jsonl")) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| serde_json::from_str::<Vec<String>>(l).unwrap())
            .collect()
    }

    /// Every stack deploy recorded so far, a `cloudformation deploy` of a file or the
    /// `create-change-set` of a release's template from its URL (tools/deploy_stack.py): (stack,
    /// the whole argument list).
    pub(crate) fn deploys(&self) -> Vec<(String, Vec<String>)> {
        self.calls()
            .into_iter()
            .filter(|a| {
                a.starts_with(&["cloudformation".into(), "deploy".into()])
                    || a.starts_with(&["cloudformation".into(), "create-change-set".into()])
            })
            .map(|a| {
                let stack = a[a.iter().position(|x| x == "--stack-name").unwrap() + 1].clone();
                (stack, a)
            })
            .collect()
    }

    fn parameters(&self, stack: &str) -> BTreeMap<String, String> {
        let path = self.dir.join("stacks").join(format!("{stack}.json"));
        let stack: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        serde_json::from_value(stack["parameters"].clone()).unwrap()
    }
}

impl Drop for Cli {
    /// A run leaves nothing in the temp dir (CI machines run the suite many times).
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A zip holding a `bootstrap` whose ELF header says `machine` (183 aarch64, 62 x86-64).
pub(crate) fn zip_with_binary_for(dir: &Path, machine: u16) -> PathBuf {
    let zip = dir.join(format!("bootstrap-{machine}.zip"));
    let script = format!(
        "import struct, zipfile\n\
         header = b'\\x7fELF\\x02\\x01\\x01' + bytes(9) + struct.pack('<HH', 2, {machine})\n\
         with zipfile.ZipFile('{}', 'w') as z: z.writestr('bootstrap', header + bytes(44))",
        zip.display()
    );
    let status = Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    zip
}

/// The helm command a target printed: from its first comment line to the helm upgrade.
fn helm_snippet(out: &str) -> String {
    let start = out.find("# Points Karpenter").expect("a helm command");
    let rest = &out[start..];
    let end = rest.find("helm upgrade karpenter").expect("an upgrade");
    let end = end + rest[end..].find('\n').unwrap_or(rest.len() - end) + 1;
    rest[..end].to_owned()
}

/// The parameters a recorded deploy gives, by key: a `cloudformation deploy`'s
/// `--parameter-overrides`, or a change set's `--parameters` other than those it keeps
/// (UsePreviousValue).
pub(crate) fn overrides(args: &[String]) -> BTreeMap<String, String> {
    if let Some(i) = args.iter().position(|a| a == "--parameters") {
        let given: Vec<Value> = serde_json::from_str(&args[i + 1]).unwrap();
        return given
            .iter()
            .filter(|p| p["UsePreviousValue"] != true)
            .map(|p| {
                (
                    p["ParameterKey"].as_str().unwrap().to_owned(),
                    p["ParameterValue"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
    }
    args.iter()
        .skip_while(|a| *a != "--parameter-overrides")
        .skip(1)
        .take_while(|a| !a.starts_with("--"))
        .filter_map(|a| a.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

pub(crate) fn has(args: &[String], pair: &str) -> bool {
    args.iter().any(|a| a == pair)
}

#[test]
fn tenant_stacks_get_valid_names_and_keep_what_a_re_run_does_not_pass() {
    let cli = Cli::new("tenant");
    cli.role("KarpenterControllerRole-my_cluster");
    // EKS allows "_" in cluster names; CloudFormation does not allow it in stack names.
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=my_cluster",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=KarpenterControllerRole-my_cluster",
    ]);
    assert!(ok, "{out}");
    let deploys = cli.deploys();
    assert_eq!(deploys.len(), 1, "{out}");
    let (stack, args) = &deploys[0];
    assert_eq!(stack, "interruption-router-tenant-my-cluster");
    assert!(has(args, "ClusterName=my_cluster"), "{args:?}");
    assert!(
        has(args, "KarpenterRoleName=KarpenterControllerRole-my_cluster"),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("BaseStackName")),
        "{args:?}"
    );
    // The helm command: the one routerctl adopt prints, for this cluster's kube-context.
    let snippet = helm_snippet(&out);
    assert_eq!(
        snippet,
        routerctl::adopt::helm::snippet(&routerctl::adopt::helm::Target {
            cluster: "my_cluster",
            account: "123456789012",
            region: "eu-west-1",
            queue: "karpenter-my_cluster",
        })
    );

    // A re-run without KARPENTER_ROLE leaves Karpenter's access where it was.
    let (ok, out) = cli.make(&["deploy-tenant", "CLUSTER=my_cluster", "REGION=eu-west-1"]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(
        !args.iter().any(|a| a.starts_with("KarpenterRoleName")),
        "{args:?}"
    );
    assert_eq!(
        cli.parameters("interruption-router-tenant-my-cluster")["KarpenterRoleName"],
        "KarpenterControllerRole-my_cluster"
    );

    // A first deploy without KARPENTER_ROLE is refused (Karpenter would get AccessDenied), and
    // "none" is the explicit way to say its policies already grant the queue.
    let (ok, out) = cli.make(&["deploy-tenant", "CLUSTER=beta", "REGION=eu-west-1"]);
    assert!(!ok);
    assert!(out.contains("KARPENTER_ROLE is not set"), "{out}");
    assert_eq!(cli.deploys().len(), 2, "nothing deployed");
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=beta",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
    ]);
    assert!(ok, "{out}");
    assert_eq!(
        cli.parameters("interruption-router-tenant-beta")["KarpenterRoleName"],
        ""
    );

    // Another cluster whose name maps to the same stack name is refused, not deployed over.
    cli.role("x");
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=my-cluster",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=x",
    ]);
    assert!(!ok);
    assert!(out.contains("is cluster my_cluster's queue"), "{out}");
    assert_eq!(cli.deploys().len(), 3);
}

/// A KARPENTER_ROLE the account does not have (the migration guide's
/// KarpenterControllerRole-<cluster> where the getting-started guide made <cluster>-karpenter) is
/// refused before anything is created: the tenant stack would fail to attach its grant and end in
/// ROLLBACK_COMPLETE, which must be deleted before a retry.
#[test]
fn a_karpenter_role_that_does_not_exist_is_refused_before_anything_is_created() {
    let cli = Cli::new("tenant-missing-role");
    cli.role("alpha-karpenter");
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=KarpenterControllerRole-alpha",
    ]);
    assert!(!ok);
    assert!(
        out.contains(
            "KARPENTER_ROLE=KarpenterControllerRole-alpha: this account has no such IAM role"
        ) && out.contains("Nothing was created")
            && out.contains("names the role alpha-karpenter")
            && out.contains("aws eks list-pod-identity-associations"),
        "{out}"
    );
    assert!(cli.deploys().is_empty());
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=alpha-karpenter",
    ]);
    assert!(ok, "{out}");
    assert_eq!(cli.deploys().len(), 1);
}

#[test]
fn the_base_stack_is_deployed_as_the_architecture_its_zip_holds_and_through_the_bucket() {
    let cli = Cli::new("base");
    let arm = zip_with_binary_for(&cli.dir, 183);
    let zip = format!("ZIP={}", arm.display());
    let base = [
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        zip.as_str(),
    ];

    let (ok, out) = cli.make(&[&base[..], &["LOG_LEVEL=DEBUG"]].concat());
    assert!(ok, "{out}");
    // Given no topic, the stack makes one: the target says how to subscribe the on-call to it.
    assert!(
        out.contains(
            "aws sns subscribe --region eu-west-1 --topic-arn \
             arn:aws:sns:eu-west-1:123456789012:interruption-router-AlarmTopic-STANDIN \
             --protocol email"
        ),
        "{out}"
    );
    let (stack, args) = cli.deploys().pop().unwrap();
    assert_eq!(stack, "interruption-router");
    assert!(has(&args, "Architecture=arm64"), "{args:?}");
    assert!(has(&args, "LogLevel=DEBUG"), "{args:?}");
    assert!(
        args.iter()
            .any(|a| a.starts_with("CodeS3Key=interruption-router/bootstrap-arm64-")),
        "{args:?}"
    );
    // base.yaml is past the inline limit: the template goes through the bucket.
    assert!(
        has(&args, "--s3-bucket") && has(&args, "artifacts"),
        "{args:?}"
    );

    // A re-run without LOG_LEVEL keeps the level the stack has.
    let (ok, out) = cli.make(&base);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(!args.iter().any(|a| a.starts_with("LogLevel")), "{args:?}");
    assert_eq!(cli.parameters("interruption-router")["LogLevel"], "DEBUG");

    // ARCH that disagrees with the zip is refused before anything is uploaded or deployed.
    let x86 = zip_with_binary_for(&cli.dir, 62);
    let (ok, out) = cli.make(&[
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        &format!("ZIP={}", arm.display()),
        "ARCH=x86_64",
    ]);
    assert!(!ok);
    assert!(out.contains("holds an arm64 binary"), "{out}");
    assert_eq!(cli.deploys().len(), 2);
    // The x86_64 zip deploys as x86_64, without ARCH.
    let (ok, out) = cli.make(&[
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        &format!("ZIP={}", x86.display()),
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "Architecture=x86_64"), "{args:?}");
}

#[test]
fn spokes_are_deployed_with_named_iam_and_the_other_templates_fit_inline() {
    let cli = Cli::new("spoke");
    let (ok, out) = cli.make(&["deploy-spoke", "REGION=eu-west-1"]);
    assert!(!ok, "a new spoke stack needs the hub's outputs");
    assert!(out.contains("needs HUB_BUS and ROUTER_ROLE"), "{out}");
    let (ok, out) = cli.make(&[
        "deploy-spoke",
        "REGION=eu-west-1",
        "HUB_BUS=arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        "ROUTER_ROLE=arn:aws:iam::123456789012:role/interruption-router-RouterRole-X",
        "CREATE_SPOKE_ROLE=true",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "CAPABILITY_NAMED_IAM"), "{args:?}");
    // A re-run with nothing set passes no parameter at all: every value stays.
    let (ok, out) = cli.make(&["deploy-spoke", "REGION=eu-west-1"]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(!has(&args, "--parameter-overrides"), "{args:?}");
    assert_eq!(
        cli.parameters("interruption-router-spoke")["CreateSpokeRole"],
        "true"
    );

    // The targets deploy tenant, spoke and fis.yaml inline: each must stay within the limit.
    for template in ["tenant.yaml", "spoke.yaml", "fis.yaml"] {
        let size = std::fs::metadata(repo().join("cloudformation").join(template))
            .unwrap()
            .len();
        assert!(
            size <= 51_200,
            "{template} is {size} bytes: deploy it through S3"
        );
    }
}

/// The stand-in refuses what CloudFormation refuses: a template whose resources need a capability
/// the call does not acknowledge.
#[test]
fn the_stand_in_refuses_a_deploy_without_the_capability_its_template_needs() {
    let cli = Cli::new("capabilities");
    let standin = repo().join("tests/fixtures/aws_standin.py");
    let deploy = |template: &str, capabilities: &[&str]| {
        let mut command = Command::new("python3");
        command
            .arg(&standin)
            .args([
                "cloudformation",
                "deploy",
                "--region",
                "eu-west-1",
                "--stack-name",
                "s",
            ])
            .arg("--template-file")
            .arg(repo().join("cloudformation").join(template));
        if !capabilities.is_empty() {
            command.arg("--capabilities").args(capabilities);
        }
        command.args(["--parameter-overrides", "ClusterName=alpha"]);
        let output = command
            .env("AWS_STANDIN_RECORD", cli.dir.join("calls.jsonl"))
            .env("AWS_STANDIN_STATE", cli.dir.join("stacks"))
            .output()
            .unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, err) = deploy("spoke.yaml", &["CAPABILITY_IAM"]);
    assert!(!ok, "spoke.yaml names its role");
    assert!(
        err.contains("InsufficientCapabilitiesException") && err.contains("CAPABILITY_NAMED_IAM"),
        "{err}"
    );
    assert!(deploy("spoke.yaml", &["CAPABILITY_NAMED_IAM"]).0);
    for template in ["tenant.yaml", "fis.yaml"] {
        let (ok, err) = deploy(template, &[]);
        assert!(!ok && err.contains("[CAPABILITY_IAM]"), "{template}: {err}");
        assert!(deploy(template, &["CAPABILITY_IAM"]).0, "{template}");
    }
    // Every target the Makefile has passes what its template needs.
    let (ok, out) = cli.make(&["deploy-fis", "CLUSTER=alpha", "REGION=eu-west-1"]);
    assert!(ok, "{out}");
}

/// What `make <target>` would run before deploying, were every tools requirements file new (`make
/// -n -W`): a deploy installs no emulator, linter or test tool, only the AWS CLI, and that only when
/// the machine has none.
#[test]
fn deploying_installs_the_aws_cli_at_most_never_the_test_tools() {
    let requirements: Vec<String> = std::fs::read_dir(repo().join("tools"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("requirements") && name.ends_with(".txt"))
        .collect();
    assert!(requirements.len() >= 4, "{requirements:?}");
    let dry_run = |target: &[&str], aws: Option<&str>| {
        let mut make = Command::new("make");
        make.arg("-C").arg(repo()).arg("-n");
        for file in &requirements {
            make.arg("-W").arg(format!("tools/{file}"));
        }
        make.args(target);
        if let Some(aws) = aws {
            make.arg(format!("AWS={aws}"));
        }
        // A machine with no `aws` on PATH (make and python3 are in /usr/bin).
        let output = make
            .env("PATH", "/usr/bin:/bin")
            .output()
            .expect("make runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let targets: [&[&str]; 4] = [
        &[
            "deploy-base",
            "BUCKET=b",
            "REGION=eu-west-1",
            "RELEASE=9.9.9",
        ],
        &["deploy-spoke", "REGION=eu-west-1"],
        &["deploy-tenant", "CLUSTER=alpha", "REGION=eu-west-1"],
        &["deploy-fis", "CLUSTER=alpha", "REGION=eu-west-1"],
    ];
    for target in targets {
        let installs = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains("pip install"))
                .map(str::to_owned)
                .collect()
        };
        // No CLI on the machine: the CLI alone, into a venv of its own.
        let without = dry_run(target, None);
        assert_eq!(
            installs(&without),
            [
                ".venv-deploy/bin/pip install --quiet --disable-pip-version-check -r \
              tools/requirements-deploy.txt"
            ],
            "{target:?}: {without}"
        );
        assert!(
            without.contains(".venv-deploy/bin/aws "),
            "{target:?}: {without}"
        );
        // The operator's CLI: nothing installed.
        let with = dry_run(target, Some("/usr/local/bin/aws"));
        assert_eq!(installs(&with), Vec::<String>::new(), "{target:?}: {with}");
    }
    let deploy = std::fs::read_to_string(repo().join("tools/requirements-deploy.txt")).unwrap();
    let pins: Vec<&str> = deploy
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(pins.len(), 1, "{pins:?}");
    assert!(pins[0].starts_with("awscli=="), "{pins:?}");
}

mod helm;
mod locked_down;
