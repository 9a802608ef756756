//! Releases: the version everywhere ([`version`]), the release directory `make release` builds,
//! made here by the same script from a stand-in binary ([`artifacts`]), deploying it with the make
//! targets ([`deploying`]), from its URLs alone ([`from_release`]) or with the README's quick path
//! for a getting-started guide's cluster ([`quick_path`]), the upgrade from the previous release's stacks while events flow
//! ([`upgrade`]), the deployer's least-privilege policy ([`deployer`]), and the spoke as a
//! StackSet deploys it in every member account ([`organisation`]), and what ships linking no lab
//! ([`shipped`]).

mod artifacts;
pub(crate) mod deployer;
mod deploying;
mod from_release;
mod organisation;
mod quick_path;
mod shipped;

mod upgrade;
mod version;

use std::path::{Path, PathBuf};

/// A scratch directory of one test, removed when it ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("release-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The checkout the tests run in.
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is in the checkout")
        .to_owned()
}

/// The templates a release shipped, as `releases/<version>/` keeps them.
fn released_template(version: &str, name: &str) -> String {
    let path = repo().join("releases").join(version).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The release before this one: the highest version under `releases/` below the workspace's.
fn previous_release() -> String {
    let current = semver(interruption_router::VERSION);
    let mut kept: Vec<(Vec<u64>, String)> = std::fs::read_dir(repo().join("releases"))
        .expect("releases/")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|v| (semver(&v), v))
        .filter(|(parsed, _)| *parsed < current)
        .collect();
    kept.sort();
    kept.pop()
        .expect("a release before this one in releases/")
        .1
}

fn semver(v: &str) -> Vec<u64> {
    v.split('.')
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{v} is not a version")))
        .collect()
}
