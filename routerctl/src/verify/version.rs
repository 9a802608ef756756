//! `version`: which release the base stack was deployed from, and whether it is this routerctl's.
//! verify expects this release's templates (rule patterns, the function's environment, the
//! policies), so a deployment of another release can fail checks its own routerctl passes, or pass
//! ones it should not. The release is the stack's `Version` output (base.yaml's Release mapping,
//! which also tags the function); a stack deployed before releases were versioned has none.

use super::report::Check;
use crate::check::{self, Expect};
use crate::deployment::Base;

/// This routerctl's release: the workspace version the router and the templates carry too.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub(super) fn check(base: &Base, region: &str) -> Check {
    let deployed = base.output("Version");
    let problem = match deployed {
        Some(v) => format!(
            "{} was deployed from release {v}; this routerctl is {VERSION} and checks {VERSION}'s templates",
            base.name
        ),
        None => format!(
            "{} has no Version output: it was deployed from templates before releases were \
             versioned (0.1.0 or a checkout of that time), and this routerctl checks {VERSION}'s",
            base.name
        ),
    };
    let fix = format!(
        "update the stack to {VERSION} (make deploy-base RELEASE={VERSION} BUCKET=… REGION={region} \
         STACK_NAME={}; CHANGELOG.md says what else to update), or check it with routerctl {}",
        base.name,
        deployed.unwrap_or("0.1.0"),
    );
    // The code the function runs: the release's zip, or a build given by key.
    let code = match base.parameter("CodeS3Key") {
        None | Some("") => "the release's zip".to_owned(),
        Some(key) => format!("code CodeS3Key={key}"),
    };
    check::evaluate(
        "version",
        [Expect::that(
            deployed == Some(VERSION),
            format!("release {VERSION}, routerctl's own ({code})"),
        )
        .otherwise(problem, fix)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(version: Option<&str>, code_key: &str) -> Base {
        let outputs: Vec<(&str, &str)> = version.map(|v| ("Version", v)).into_iter().collect();
        crate::fixtures::base(&outputs, &[("CodeS3Key", code_key)])
    }

    #[test]
    fn the_deployed_release_passes_only_when_it_is_routerctls() {
        let same = check(&base(Some(VERSION), ""), "eu-west-1");
        assert!(same.passed, "{same:?}");
        assert_eq!(
            same.detail,
            format!("release {VERSION}, routerctl's own (the release's zip)")
        );
        let built = check(
            &base(Some(VERSION), "interruption-router/bootstrap-x86_64-ab.zip"),
            "r",
        );
        assert!(
            built
                .detail
                .ends_with("(code CodeS3Key=interruption-router/bootstrap-x86_64-ab.zip)")
        );

        let older = check(&base(Some("0.1.9"), ""), "eu-west-1");
        assert!(!older.passed);
        assert_eq!(
            older.detail,
            format!(
                "ir was deployed from release 0.1.9; this routerctl is {VERSION} and checks {VERSION}'s templates"
            )
        );
        let fix = older.fix.unwrap();
        assert!(
            fix.contains(&format!(
                "make deploy-base RELEASE={VERSION} BUCKET=… REGION=eu-west-1 STACK_NAME=ir"
            )),
            "{fix}"
        );
        assert!(fix.ends_with("or check it with routerctl 0.1.9"), "{fix}");

        let unversioned = check(&base(None, "bootstrap.zip"), "eu-west-1");
        assert!(!unversioned.passed);
        assert!(
            unversioned.detail.starts_with("ir has no Version output"),
            "{unversioned:?}"
        );
        assert!(unversioned.fix.unwrap().ends_with("routerctl 0.1.0"));
    }
}
