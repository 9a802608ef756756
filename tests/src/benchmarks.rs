//! BENCHMARKS.md as `make bench` writes it: the storm benchmark writes the report from the top,
//! and keeps what follows [`KEPT`] as it was (the dated runs kept by hand); the organisation storm
//! replaces its own marked block (simulation::report).

/// The line from which BENCHMARKS.md is carried over unchanged by the storm benchmark.
pub const KEPT: &str = "<!-- kept by hand: make bench leaves what follows as it is -->";

/// `report`, then what `old` holds from [`KEPT`] on, if anything.
pub fn with_kept(report: &str, old: &str) -> String {
    match old.find(KEPT) {
        Some(at) => format!("{}\n\n{}", report.trim_end(), &old[at..]),
        None => report.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewrite_keeps_what_follows_the_marker_and_nothing_else_of_the_old_file() {
        let old =
            format!("# old report\nstale figure 1.0\n\n{KEPT}\n\n## Earlier runs\n2026: 3.0 s\n");
        let new = with_kept("# new report\nfigure 2.0\n", &old);
        assert!(new.starts_with("# new report\nfigure 2.0\n"), "{new}");
        assert!(!new.contains("stale figure"), "{new}");
        assert!(
            new.ends_with(&format!("{KEPT}\n\n## Earlier runs\n2026: 3.0 s\n")),
            "{new}"
        );
        assert_eq!(with_kept("# r\n", "# no marker\n"), "# r\n");
    }
}
