//! `routerctl verify`: its flags, and the report it prints.

use aws_clients::aws::Aws;

use crate::verify;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    options: verify::Options,
    #[arg(long)]
    region: Option<String>,
}

impl Args {
    /// Runs the command as the flags say: Ok(true) when all is well, Ok(false) when a check or
    /// verdict failed.
    pub async fn run(self) -> anyhow::Result<bool> {
        let Self { options, region } = self;
        let run = async {
            let report = verify::run(&Aws::load(region).await?, &options).await;
            print!("{}", report.render());
            Ok(report.passed())
        };
        run.await
    }
}
