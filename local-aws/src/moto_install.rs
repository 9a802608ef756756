//! Where the moto server comes from: `$MOTO_SERVER`, `moto_server` on `PATH`, or a venv of the
//! pinned release this installs under the user's cache directory; and the fixes it is started
//! with (`moto_fixes/`), written where concurrent tests and other checkouts cannot tear them.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use crate::moto::MOTO_VERSION;

pub(crate) async fn locate_or_install() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return Ok(PathBuf::from(path));
    }
    if let Some(path) = on_path("moto_server") {
        return Ok(path);
    }
    let venv = cache_dir().join(format!("moto-{MOTO_VERSION}"));
    let program = venv.join("bin/moto_server");
    if program.exists() {
        return Ok(program);
    }
    install(&venv).await?;
    Ok(program)
}

/// The fixes moto is started with ([`MOTO_FIXES`]), as `sitecustomize.py` in a directory of
/// their own; that directory.
pub(crate) fn install_fixes() -> Result<PathBuf> {
    install_fixes_in(&cache_dir(), MOTO_FIXES)
}

/// Writes `fixes` as `sitecustomize.py` into a directory under `cache` named by their content, so
/// checkouts with other fixes (another branch, an older clone) never rewrite the file under each
/// other's running emulators. Many tests of one process start moto at once: each writes under a
/// temporary name of its own and renames it into place (a rename replaces atomically), so none
/// reads a half-written file and none renames another's temporary file away.
fn install_fixes_in(cache: &Path, fixes: &str) -> Result<PathBuf> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(fixes, &mut hasher);
    let dir = cache.join(format!(
        "moto-fixes-{:016x}",
        std::hash::Hasher::finish(&hasher)
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join("sitecustomize.py");
    if std::fs::read_to_string(&file).ok().as_deref() != Some(fixes) {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let temp = dir.join(format!(
            "sitecustomize.py.{}.{}",
            std::process::id(),
            WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::write(&temp, fixes).with_context(|| format!("writing {}", temp.display()))?;
        std::fs::rename(&temp, &file).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(dir)
}

/// Where moto answers otherwise than AWS and a stand-in depends on AWS's answer
/// (`moto_fixes/mod.py` says which and why): its parts in order, one `sitecustomize.py`.
const MOTO_FIXES: &str = concat!(
    include_str!("moto_fixes/mod.py"),
    include_str!("moto_fixes/templates.py"),
    include_str!("moto_fixes/sqs.py"),
    include_str!("moto_fixes/stacks.py"),
    include_str!("moto_fixes/apis.py"),
);

async fn install(venv: &Path) -> Result<()> {
    eprintln!(
        "moto_server not found: installing moto[server]=={MOTO_VERSION} from PyPI into {}",
        venv.display()
    );
    let python = on_path("python3")
        .context("python3 is needed to install moto (pip install 'moto[server]')")?;
    run(Command::new(&python).args(["-m", "venv"]).arg(venv)).await?;
    run(Command::new(venv.join("bin/pip")).args([
        "install",
        "--quiet",
        &format!("moto[server]=={MOTO_VERSION}"),
    ]))
    .await
}

async fn run(command: &mut Command) -> Result<()> {
    let status = command
        .status()
        .await
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("interruption-router")
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::install_fixes_in;

    #[test]
    fn fixes_installed_by_many_tests_at_once_are_whole_and_kept_apart_by_content() {
        let cache = std::env::temp_dir().join(format!("moto-fixes-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        // Large enough that writing it takes longer than the threads take to start together.
        let fixes = "print('fixed')\n".repeat(200_000);
        let together = std::sync::Barrier::new(16);
        let dirs: Vec<PathBuf> = std::thread::scope(|s| {
            let starting: Vec<_> = (0..16)
                .map(|_| {
                    s.spawn(|| {
                        together.wait();
                        install_fixes_in(&cache, &fixes)
                    })
                })
                .collect();
            starting
                .into_iter()
                .map(|t| t.join().unwrap().unwrap())
                .collect()
        });
        assert!(dirs.windows(2).all(|w| w[0] == w[1]), "{dirs:?}");
        let file = dirs[0].join("sitecustomize.py");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), fixes);
        // Another checkout's fixes go elsewhere and leave these alone.
        let other = install_fixes_in(&cache, "print('other')\n").unwrap();
        assert_ne!(other, dirs[0]);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), fixes);
        std::fs::remove_dir_all(&cache).unwrap();
    }
}
