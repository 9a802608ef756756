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

    /// Every call recorded so far, each as its argument list.
    pub(crate) fn calls(&self) -> Vec<Vec<String>> {
        let Ok(text) = std::fs::read_to_string(self.dir.join("calls.jsonl")) else {
            return Vec::new();
        };
        text.lines()
            .map(|l| serde_json::from_str::<Vec<String>>(l).unwrap())
            .collect()
    }

    /// Every `cloudformation deploy` recorded so far: (stack, the whole argument list).
    pub(crate) fn deploys(&self) -> Vec<(String, Vec<String>)> {
        self.calls()
            .into_iter()
            .filter(|a| a.starts_with(&["cloudformation".into(), "deploy".into()]))
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

/// Runs `snippet` with a stand-in `helm` first on PATH that records each call and answers as
/// helm would for a release `list` describes (its JSON), whose rendered manifest is `manifest`,
/// or fails like a helm without `list` when `list` is None. (exit status, stderr, the calls.)
fn run_snippet(snippet: &str, list: Option<&str>, manifest: &str) -> (bool, String, Vec<String>) {
    let dir = std::env::temp_dir().join(format!(
        "helm-stub-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let calls = dir.join("calls");
    std::fs::write(dir.join("list.json"), list.unwrap_or("")).unwrap();
    std::fs::write(dir.join("manifest.yaml"), manifest).unwrap();
    let helm = dir.join("helm");
    std::fs::write(
        &helm,
        format!(
            "#!/usr/bin/env bash\n\
             echo \"$*\" >> {calls}\n\
             case \"$1\" in\n\
               list) {list} ;;\n\
               get) cat {dir}/manifest.yaml ;;\n\
               upgrade) echo 'Release \"karpenter\" has been upgraded.' ;;\n\
               *) echo \"Error: unknown command \\\"$1\\\" for \\\"helm\\\"\" >&2; exit 1 ;;\n\
             esac\n",
            calls = calls.display(),
            dir = dir.display(),
            list = if list.is_some() {
                format!("cat {}/list.json", dir.display())
            } else {
                "echo 'Error: unknown flag: --output' >&2; exit 1".to_owned()
            },
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&helm).status().unwrap();
    let script = dir.join("snippet.sh");
    std::fs::write(&script, snippet).unwrap();
    let output = Command::new("bash")
        .arg(&script)
        .env(
            "PATH",
            format!("{}:{}", dir.display(), std::env::var("PATH").unwrap()),
        )
        .env_remove("KUBE_CONTEXT")
        .output()
        .unwrap();
    let recorded = std::fs::read_to_string(&calls)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        recorded,
    )
}

/// The `--parameter-overrides` of a recorded `cloudformation deploy`, by key.
fn overrides(args: &[String]) -> BTreeMap<String, String> {
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

/// Locked-down accounts: KMS_KEY, PERMISSIONS_BOUNDARY and ROLE_PATH reach the stacks that take
/// them, only when set; a re-run without them keeps what the stack has.
#[test]
fn locked_down_settings_reach_the_stacks_only_when_set() {
    let cli = Cli::new("locked-down");
    let arm = zip_with_binary_for(&cli.dir, 183);
    let zip = format!("ZIP={}", arm.display());
    let boundary = "PERMISSIONS_BOUNDARY=platform/boundary";
    let base = [
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        zip.as_str(),
    ];
    let locked = [
        base.as_slice(),
        &[
            "KMS_KEY=Create",
            boundary,
            "ROLE_PATH=/platform/",
            "SPOKE_ROLE_PATH=/platform/spokes/",
        ],
    ]
    .concat();
    let (ok, out) = cli.make(&locked);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    for pair in [
        "KmsKey=Create",
        "PermissionsBoundary=platform/boundary",
        "RolePath=/platform/",
        "SpokeRolePath=/platform/spokes/",
    ] {
        assert!(has(&args, pair), "{pair}: {args:?}");
    }
    let (ok, out) = cli.make(&base);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let named = |args: &[String], key: &str| args.iter().any(|a| a.starts_with(&format!("{key}=")));
    for key in ["KmsKey", "PermissionsBoundary", "RolePath", "SpokeRolePath"] {
        assert!(!named(&args, key), "a re-run passes no {key}: {args:?}");
    }
    let kept = cli.parameters("interruption-router");
    assert_eq!(kept["KmsKey"], "Create");
    assert_eq!(kept["RolePath"], "/platform/");

    // The spoke stack takes the boundary and the path, not KMS_KEY=Create (it has no queue; keys
    // the tenant stacks create name the spoke role themselves).
    let (ok, out) = cli.make(&[
        "deploy-spoke",
        "REGION=eu-west-1",
        "HUB_BUS=arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        "ROUTER_ROLE=arn:aws:iam::123456789012:role/interruption-router-RouterRole-X",
        "KMS_KEY=Create",
        boundary,
        "ROLE_PATH=/platform/",
        "SPOKE_ROLE_PATH=/platform/spokes/",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "RolePath=/platform/"), "{args:?}");
    assert!(has(&args, "SpokeRolePath=/platform/spokes/"), "{args:?}");
    assert!(
        named(&args, "PermissionsBoundary") && !named(&args, "KmsKey"),
        "{args:?}"
    );
    // The organisation's keys its tenant queues use: the spoke role is granted them.
    let keys =
        "arn:aws:kms:eu-west-1:111111111111:key/k1,arn:aws:kms:us-east-1:111111111111:key/k2";
    let (ok, out) = cli.make(&[
        "deploy-spoke",
        "REGION=eu-west-1",
        "HUB_BUS=arn:aws:events:us-east-1:123456789012:event-bus/interruption-router-hub",
        "ROUTER_ROLE=arn:aws:iam::123456789012:role/interruption-router-RouterRole-X",
        &format!("KMS_KEY={keys}"),
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, &format!("KmsKey={keys}")), "{args:?}");

    // A tenant stack takes the key; it creates no role.
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        "KMS_KEY=Create",
        boundary,
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    assert!(has(&args, "KmsKey=Create"), "{args:?}");
    assert!(!named(&args, "PermissionsBoundary"), "{args:?}");
}

/// The printed helm command can never upgrade Karpenter by accident: run with a stand-in helm,
/// it upgrades only the release it found, in the cluster's own kube-context, keeping its chart
/// version and namespace; anything else stops it before the upgrade.
#[test]
fn the_printed_helm_command_upgrades_only_what_it_found_and_fails_closed() {
    let snippet = routerctl::adopt::helm::snippet(&routerctl::adopt::helm::Target {
        cluster: "alpha",
        account: "111111111111",
        region: "eu-west-1",
        queue: "karpenter-alpha",
    });
    let context = "arn:aws:eks:eu-west-1:111111111111:cluster/alpha";
    let release = r#"[{"name":"karpenter","namespace":"kube-system","revision":"3","chart":"karpenter-1.0.6","app_version":"1.0.6"}]"#;
    let (ok, err, calls) = run_snippet(&snippet, Some(release), "kind: Deployment\n");
    assert!(ok, "{err}");
    assert_eq!(
        calls.last().unwrap(),
        &format!(
            "upgrade karpenter oci://public.ecr.aws/karpenter/karpenter --kube-context {context} \
             --namespace kube-system --version 1.0.6 --reuse-values --set \
             settings.interruptionQueue=karpenter-alpha"
        )
    );
    assert!(
        calls
            .iter()
            .all(|c| c.contains(&format!("--kube-context {context}"))),
        "{calls:?}"
    );

    let upgraded = |calls: &[String]| calls.iter().any(|c| c.starts_with("upgrade"));
    // A helm whose list cannot answer JSON (or fails for any reason): nothing upgraded.
    let (ok, _, calls) = run_snippet(&snippet, None, "");
    assert!(!ok && !upgraded(&calls), "{calls:?}");
    // No release in that context (Argo CD renders the chart without one, or the wrong context).
    let (ok, err, calls) = run_snippet(&snippet, Some("[]"), "");
    assert!(!ok && !upgraded(&calls), "{calls:?}");
    assert!(
        err.contains("Argo CD") && err.contains("KUBE_CONTEXT"),
        "{err}"
    );
    // A chart whose version cannot be told: never `--version ""`.
    let unversioned = release.replace("karpenter-1.0.6", "karpenter");
    let (ok, err, calls) = run_snippet(&snippet, Some(&unversioned), "");
    assert!(!ok && !upgraded(&calls), "{calls:?}");
    assert!(err.contains("version to keep is unknown"), "{err}");
    // Flux owns the release: change the value in Git instead.
    let flux = "metadata:\n  labels:\n    helm.toolkit.fluxcd.io/name: karpenter\n";
    let (ok, err, calls) = run_snippet(&snippet, Some(release), flux);
    assert!(!ok && !upgraded(&calls), "{calls:?}");
    assert!(err.contains("Flux manages release karpenter"), "{err}");
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

/// A first `make deploy-tenant` takes from the base stack what `routerctl adopt` takes
/// ([`aws_model::stacks::TENANT_INHERITS`]): the key setting, the alarm topic and the RouterName,
/// unless given; a re-run passes none of them (the stack keeps its own).
#[test]
fn a_tenant_takes_the_base_stacks_key_topic_and_router_name_as_adopt_does() {
    use aws_model::stacks::{TENANT_INHERITS, tenant_parameters};
    use interruption_router::event::Kinds;

    let makefile = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let listed: Vec<&str> = makefile
        .lines()
        .find_map(|l| l.strip_prefix("TENANT_INHERITS := "))
        .expect("the Makefile's TENANT_INHERITS")
        .split_whitespace()
        .collect();
    assert_eq!(listed, TENANT_INHERITS);

    let cli = Cli::new("tenant-inherits");
    let arm = zip_with_binary_for(&cli.dir, 183);
    let zip = format!("ZIP={}", arm.display());
    let topic = "arn:aws:sns:eu-west-1:123456789012:platform-alarms";
    let (ok, out) = cli.make(&[
        "deploy-base",
        "BUCKET=artifacts",
        "REGION=eu-west-1",
        zip.as_str(),
        "KMS_KEY=Create",
        &format!("ALARM_TOPIC={topic}"),
        "PARAMS=RouterName=ir-two",
    ]);
    assert!(ok, "{out}");
    let base = cli.parameters("interruption-router");

    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=alpha",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=KarpenterControllerRole-alpha",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> =
        tenant_parameters(&base, "alpha", "KarpenterControllerRole-alpha", Kinds::ALL)
            .into_iter()
            .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    assert_eq!(made["KmsKey"], "Create");
    assert_eq!(made["AlarmTopicArn"], topic);
    assert_eq!(made["RouterName"], "ir-two");

    // A cluster name as long as EKS allows: its queue is named as the router derives it.
    let long = "a-cluster-name-as-long-as-eks-allows-".repeat(3)[..100].to_owned();
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        &format!("CLUSTER={long}"),
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
    ]);
    assert!(ok, "{out}");
    let (stack, args) = cli.deploys().pop().unwrap();
    assert_eq!(stack.len(), "interruption-router-tenant-".len() + 100);
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> = tenant_parameters(&base, &long, "", Kinds::ALL)
        .into_iter()
        .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    let router = interruption_router::config::QueueNameTemplate::parse("karpenter-{cluster}")
        .unwrap()
        .queue_name(&long)
        .unwrap();
    assert_eq!(made["QueueName"], router);
    assert_eq!(router.len(), 80);
    assert!(
        helm_snippet(&out).contains(&format!("settings.interruptionQueue={router}")),
        "{out}"
    );

    // A cluster's choice of event kinds (adopt deploys the old rules' choice): the same
    // EventKinds from both.
    let kinds: Kinds = [
        interruption_router::event::Kind::SpotInterruption,
        interruption_router::event::Kind::StateChange,
    ]
    .into_iter()
    .collect();
    let (ok, out) = cli.make(&[
        "deploy-tenant",
        "CLUSTER=gamma",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        &format!("EVENT_KINDS={}", aws_model::stacks::event_kinds(kinds)),
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    let made = overrides(&args);
    let adopt: BTreeMap<String, String> = tenant_parameters(&base, "gamma", "", kinds)
        .into_iter()
        .collect();
    assert_eq!(made, adopt, "make deploy-tenant and routerctl adopt differ");
    assert_eq!(made["EventKinds"], "spot-interruption,state-change");

    // Given, it wins; a re-run inherits nothing.
    let cli_given = Cli::new("tenant-inherits-given");
    let (ok, out) = cli_given.make(&[
        "deploy-tenant",
        "CLUSTER=beta",
        "REGION=eu-west-1",
        "KARPENTER_ROLE=none",
        "ALARM_TOPIC=arn:aws:sns:eu-west-1:123456789012:team-beta",
    ]);
    assert!(ok, "{out}");
    let (_, args) = cli_given.deploys().pop().unwrap();
    assert!(
        has(
            &args,
            "AlarmTopicArn=arn:aws:sns:eu-west-1:123456789012:team-beta"
        ),
        "{args:?}"
    );
    let (ok, out) = cli.make(&["deploy-tenant", "CLUSTER=alpha", "REGION=eu-west-1"]);
    assert!(ok, "{out}");
    let (_, args) = cli.deploys().pop().unwrap();
    for key in TENANT_INHERITS {
        assert!(
            !args.iter().any(|a| a.starts_with(&format!("{key}="))),
            "a re-run passes no {key}: {args:?}"
        );
    }
}
