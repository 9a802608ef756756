//! The README quick path's step 1, as a reader pastes it: `tools/install_routerctl.sh` (the
//! README's block is that file's text). It downloads a release's archive and `SHA256SUMS`, has
//! their attestations verified, checks the sums (`sha256sum` where there is one, `shasum -a 256`
//! where not, as on macOS), extracts the archive, checks its own sums, copies it into the bucket
//! and installs the routerctl of the machine's operating system (`uname -s`: Linux or Darwin) and
//! architecture (`uname -m`: aarch64 or arm64 give arm64). Run here in bash and in zsh (macOS's
//! login shell), each interactive and without its startup files, as a paste is, against a
//! stand-in release directory with stand-ins for `uname`, `curl`, `gh`, `aws` and `sudo` on a
//! PATH that holds only what the snippet calls. A check that fails stops every step after it.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use interruption_router::VERSION;

use super::repo_file;

const SNIPPET: &str = "tools/install_routerctl.sh";

/// The shells a reader pastes into: bash (most Linux machines) and zsh (macOS's), each read as an
/// interactive shell reads a paste, with no startup file (zsh's `-f`: so no
/// `interactive_comments`, which a zsh of its own defaults does not set).
fn shells() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut shells = vec![("bash", vec!["--norc", "--noprofile", "-i"])];
    if Command::new("zsh")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        shells.push(("zsh", vec!["-f", "-i"]));
    } else {
        // zsh is not on every machine that runs these tests (it is not in this project's image):
        // the comment check below still holds what zsh needs most.
        eprintln!("install snippet: zsh not on this machine, run in bash only");
    }
    shells
}

/// The binaries a release ships for an operator, each a stand-in saying which it is.
const ASSETS: [&str; 4] = [
    "routerctl-linux-x86_64",
    "routerctl-linux-arm64",
    "routerctl-darwin-x86_64",
    "routerctl-darwin-arm64",
];

struct Paste {
    /// The scratch directory: `releases/` (what the download URL serves), `bin/` (the PATH),
    /// `root/` (where `sudo` writes /usr/local), `work/` (where the snippet runs), `log`.
    dir: PathBuf,
}

impl Drop for Paste {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn sha256_hex(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

impl Paste {
    /// A release of `VERSION` laid out as its GitHub release's assets (`release.py assets`): the
    /// archive of `interruption-router/<version>/` and `latest/`, its files beside it, and a
    /// SHA256SUMS of them all; and a PATH of stand-ins, with `sha256sum` on it or not.
    fn new(name: &str, with_sha256sum: bool) -> Self {
        let dir = std::env::temp_dir().join(format!("install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let paste = Self { dir };
        for sub in ["releases", "bin", "root", "work", "tree"] {
            std::fs::create_dir_all(paste.dir.join(sub)).unwrap();
        }
        let version_dir = paste.dir.join("tree/interruption-router").join(VERSION);
        let latest = paste.dir.join("tree/interruption-router/latest");
        std::fs::create_dir_all(&version_dir).unwrap();
        std::fs::create_dir_all(&latest).unwrap();
        for asset in ASSETS {
            write_executable(&version_dir.join(asset), &format!("stand-in {asset}\n"));
        }
        std::fs::write(version_dir.join("base.yaml"), "stand-in base.yaml\n").unwrap();
        std::fs::write(latest.join("VERSION"), format!("{VERSION}\n")).unwrap();
        let sums = |dir: &Path, names: &[&str]| {
            let text: String = names
                .iter()
                .map(|n| format!("{}  {n}\n", sha256_hex(&dir.join(n))))
                .collect();
            std::fs::write(dir.join("SHA256SUMS"), text).unwrap();
        };
        let mut version_files: Vec<&str> = ASSETS.to_vec();
        version_files.push("base.yaml");
        version_files.sort();
        sums(&version_dir, &version_files);
        sums(&latest, &["VERSION"]);
        let releases = paste.dir.join("releases");
        let archive = format!("interruption-router-{VERSION}.tar.gz");
        let tarred = Command::new("tar")
            .arg("-czf")
            .arg(releases.join(&archive))
            .arg("interruption-router")
            .current_dir(paste.dir.join("tree"))
            .output()
            .unwrap();
        assert!(tarred.status.success(), "{tarred:?}");
        for f in version_files.iter().chain(&["SHA256SUMS"]) {
            std::fs::copy(version_dir.join(f), releases.join(f)).unwrap();
        }
        let mut published: Vec<&str> = version_files.clone();
        published.push(&archive);
        published.sort();
        sums(&releases, &published);

        let bin = paste.dir.join("bin");
        let stand_ins = [
            (
                "uname",
                "case \"$1\" in -s) echo \"$FAKE_UNAME_S\";; -m) echo \"$FAKE_UNAME_M\";; *) exit 2;; esac\n",
            ),
            (
                "curl",
                "echo \"curl $*\" >> \"$FAKE_LOG\"\nfor url; do :; done\n\
                 case \"$url\" in \"$RELEASES/v$VERSION/\"*) ;; *) exit 22;; esac\n\
                 cp \"$FAKE_RELEASES/${url##*/}\" . 2>/dev/null || exit 22\n",
            ),
            (
                "gh",
                "echo \"gh $*\" >> \"$FAKE_LOG\"\nexit \"${FAKE_GH_EXIT:-0}\"\n",
            ),
            ("aws", "echo \"aws $*\" >> \"$FAKE_LOG\"\n"),
            // /usr/local/… is written under root/ instead.
            (
                "sudo",
                "echo \"sudo $*\" >> \"$FAKE_LOG\"\nn=$#\nfor a in \"$@\"; do\n\
                 case \"$a\" in /usr/local/*) a=\"$FAKE_ROOT$a\";; esac\nset -- \"$@\" \"$a\"\ndone\n\
                 shift \"$n\"\nexec \"$@\"\n",
            ),
            (
                "shasum",
                "echo \"shasum $*\" >> \"$FAKE_LOG\"\nexec /usr/bin/shasum \"$@\"\n",
            ),
        ];
        for (name, body) in stand_ins {
            write_executable(&bin.join(name), &format!("#!/bin/sh\n{body}"));
        }
        if with_sha256sum {
            write_executable(
                &bin.join("sha256sum"),
                "#!/bin/sh\necho \"sha256sum $*\" >> \"$FAKE_LOG\"\nexec /usr/bin/sha256sum \"$@\"\n",
            );
        }
        // What the snippet and tar call, and nothing more (no sha256sum among them).
        for tool in ["tar", "gzip", "tr", "sed", "mkdir", "install", "cp"] {
            let real = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{tool} not on this machine"));
            std::os::unix::fs::symlink(real, bin.join(tool)).unwrap();
        }
        paste
    }

    /// The snippet pasted into `shell` on a machine whose `uname -s` and `-m` say `os` and `arch`.
    fn run(&self, shell: &str, args: &[&str], os: &str, arch: &str, gh_exit: u8) -> Output {
        let work = self.dir.join(format!("work/{shell}-{os}-{arch}-{gh_exit}"));
        std::fs::create_dir_all(&work).unwrap();
        let _ = std::fs::remove_file(self.log());
        let _ = std::fs::remove_dir_all(self.dir.join("root/usr"));
        let snippet = std::fs::File::open(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(SNIPPET),
        )
        .expect(SNIPPET);
        let shell_path = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(shell))
            .find(|p| p.exists())
            .unwrap();
        Command::new(shell_path)
            .args(args)
            .current_dir(&work)
            .env_clear()
            .env("PATH", self.dir.join("bin"))
            .env("HOME", &work)
            .env("TERM", "dumb")
            .env(
                "RELEASES",
                "https://github.com/example/interruption-router/releases/download",
            )
            .env("VERSION", VERSION)
            .env("BUCKET", "my-artifacts-eu-west-1")
            .env("FAKE_UNAME_S", os)
            .env("FAKE_UNAME_M", arch)
            .env("FAKE_GH_EXIT", gh_exit.to_string())
            .env("FAKE_RELEASES", self.dir.join("releases"))
            .env("FAKE_ROOT", self.dir.join("root"))
            .env("FAKE_LOG", self.log())
            .stdin(Stdio::from(snippet))
            .output()
            .unwrap()
    }

    fn log(&self) -> PathBuf {
        self.dir.join("log")
    }

    fn logged(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }

    fn installed(&self) -> PathBuf {
        self.dir.join("root/usr/local/bin/routerctl")
    }
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Pasted lines are read as an interactive shell reads them: zsh without
/// `interactive_comments` (its default) runs a `#` as a command, and hands a trailing
/// `# comment` to the command before it as arguments. The snippet has none.
#[test]
fn the_install_snippet_has_no_comment_for_zsh_to_misread() {
    let snippet = repo_file(SNIPPET);
    for (n, line) in snippet.lines().enumerate() {
        assert!(
            !line.trim_start().starts_with('#') && !line.contains(" #"),
            "{SNIPPET}:{}: a comment: {line}",
            n + 1
        );
    }
}

/// The README's step 1 is the snippet tested here, and none of the quick path's blocks holds a
/// comment a pasting zsh would take as arguments.
#[test]
fn the_readmes_quick_path_pastes_this_snippet_and_no_comment() {
    let blocks: Vec<String> = super::quick_path_blocks()
        .iter()
        .map(|b| b.trim_end_matches([' ', '\n']).to_owned() + "\n")
        .collect();
    let snippet = repo_file(SNIPPET);
    assert!(
        blocks.contains(&snippet),
        "README's step 1 is not {SNIPPET}: {blocks:#?}"
    );
    for block in &blocks {
        for line in block.lines() {
            assert!(
                !line.trim_start().starts_with('#') && !line.contains(" #"),
                "a comment in the quick path: {line}"
            );
        }
    }
}

/// Each machine gets its own routerctl: Linux on x86_64 and aarch64, macOS on arm64 and x86_64
/// (where there is no sha256sum: `shasum -a 256` checks instead), the sums checked before
/// anything is extracted and the release copied into the bucket, in bash and zsh alike.
#[test]
fn the_install_snippet_installs_the_routerctl_of_each_os_and_architecture() {
    for (with_sha256sum, os, arch, asset) in [
        (false, "Darwin", "arm64", "routerctl-darwin-arm64"),
        (false, "Darwin", "x86_64", "routerctl-darwin-x86_64"),
        (true, "Linux", "aarch64", "routerctl-linux-arm64"),
        (true, "Linux", "x86_64", "routerctl-linux-x86_64"),
    ] {
        let paste = Paste::new(&format!("{os}-{arch}"), with_sha256sum);
        for (shell, args) in shells() {
            let out = paste.run(shell, &args, os, arch, 0);
            let case = format!("{shell} on {os} {arch}");
            assert!(out.status.success(), "{case}: {}", said(&out));
            let installed = paste.installed();
            assert_eq!(
                std::fs::read_to_string(&installed).unwrap_or_default(),
                format!("stand-in {asset}\n"),
                "{case}: {}",
                said(&out)
            );
            assert_eq!(
                std::fs::metadata(&installed).unwrap().permissions().mode() & 0o777,
                0o755,
                "{case}"
            );
            let log = paste.logged();
            let lines: Vec<&str> = log.lines().collect();
            let checker = if with_sha256sum {
                "sha256sum"
            } else {
                "shasum -a 256"
            };
            let checks: Vec<&&str> = lines
                .iter()
                .filter(|l| l.starts_with("sha256sum ") || l.starts_with("shasum "))
                .collect();
            assert_eq!(
                checks,
                [
                    &&*format!("{checker} --check --ignore-missing SHA256SUMS"),
                    &&*format!("{checker} --check SHA256SUMS"),
                ],
                "{case}: {log}"
            );
            let at = |prefix: &str| {
                lines
                    .iter()
                    .position(|l| l.starts_with(prefix))
                    .unwrap_or_else(|| panic!("{case}: no {prefix}: {log}"))
            };
            assert!(
                at("curl ") < at("gh attestation verify interruption-router-"),
                "{log}"
            );
            assert!(
                at("gh attestation verify SHA256SUMS") < at(checker.split(' ').next().unwrap())
            );
            assert!(
                at(checker.split(' ').next().unwrap()) < at("aws s3 sync"),
                "{log}"
            );
            assert!(
                lines.contains(
                    &"aws s3 sync interruption-router/ s3://my-artifacts-eu-west-1/interruption-router/"
                ),
                "{log}"
            );
            assert!(
                lines.contains(&&*format!(
                    "sudo install -m 0755 interruption-router/{VERSION}/{asset} /usr/local/bin/routerctl"
                )),
                "{log}"
            );
        }
    }
}

/// A download whose sum does not match, or whose attestation does not verify, stops the paste:
/// nothing is extracted, copied into the bucket or installed.
#[test]
fn the_install_snippet_stops_at_a_sum_or_an_attestation_that_fails() {
    let paste = Paste::new("refused", false);
    let archive = paste
        .dir
        .join("releases")
        .join(format!("interruption-router-{VERSION}.tar.gz"));
    for (shell, args) in shells() {
        let refused = paste.run(shell, &args, "Darwin", "arm64", 1);
        assert!(!refused.status.success(), "{shell}: {}", said(&refused));
        let log = paste.logged();
        assert_eq!(
            log.matches("gh attestation verify").count(),
            1,
            "{shell}: {log}"
        );
        assert!(
            !log.contains("shasum") && !log.contains("aws "),
            "{shell}: {log}"
        );
        assert!(!paste.installed().exists(), "{shell}: installed");
    }
    let mut bytes = std::fs::read(&archive).unwrap();
    bytes.extend(b"corrupted");
    std::fs::write(&archive, bytes).unwrap();
    for (shell, args) in shells() {
        let refused = paste.run(shell, &args, "Darwin", "arm64", 0);
        assert!(!refused.status.success(), "{shell}: {}", said(&refused));
        assert!(
            said(&refused).contains("FAILED"),
            "{shell}: {}",
            said(&refused)
        );
        let log = paste.logged();
        assert!(
            !log.contains("aws ") && !log.contains("sudo "),
            "{shell}: {log}"
        );
        let work = paste.dir.join(format!("work/{shell}-Darwin-arm64-0"));
        assert!(
            !work.join("interruption-router").exists(),
            "{shell}: extracted from an archive whose sum failed"
        );
        assert!(!paste.installed().exists(), "{shell}: installed");
    }
}
