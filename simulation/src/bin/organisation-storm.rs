//! `make bench`'s organisation storm: the organisation and storm, in a hub region with
//! the default EventBridge quota and in one with 750 target invocations a second; prints the
//! figures and, with `--write FILE`, puts them in FILE's "Organisation storm" section.

fn main() -> anyhow::Result<()> {
    simulation::report::main()
}
