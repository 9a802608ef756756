//! The helm command the deploy targets print, run against a stand-in `helm`.

use super::*;

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
    let _ = std::fs::remove_dir_all(&dir);
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        recorded,
    )
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
