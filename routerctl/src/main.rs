//! `routerctl`: check and exercise a real deployment, and move clusters onto it.

use std::{process::ExitCode, time::Duration};

use aws_clients::aws::Aws;
use clap::Parser;
use routerctl::{
    adopt,
    cli::{Cli, Command},
    fis, insights, simulate, verify,
};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate {
            cluster,
            kind,
            count,
            instances,
            to,
            state,
            cluster_tag,
            managed_tag,
            region,
            account,
            profile,
            hub_region,
        } => {
            let options = simulate::Options {
                cluster,
                kind,
                count: count.into(),
                instances,
                to,
                state,
                cluster_tag,
                managed_tag,
            };
            // The cluster's account and region pick the instances; the hub's clients send.
            let run = async {
                let caller = Aws::load(region.clone()).await?;
                let site = match &account {
                    Some(account) => {
                        let region = caller.region.clone();
                        simulate::load_site(&caller, &region, account, profile.as_deref()).await?
                    }
                    None => caller,
                };
                let hub = match (&account, hub_region) {
                    (None, None) => site.clone(),
                    (_, hub_region) => Aws::load(hub_region.or(region)).await?,
                };
                let report = simulate::run_from(&hub, &site, &options).await?;
                print!("{}", report.render());
                Ok(report.failed() == 0)
            };
            run.await
        }
        Command::Verify {
            stack,
            clusters,
            account,
            spoke_stack,
            profile,
            org_id,
            karpenter_roles,
            region,
        } => {
            let options = verify::Options {
                stack,
                clusters,
                account,
                spoke_stack,
                profile,
                org_id,
                karpenter_roles,
            };
            let run = async {
                let report = verify::run(&Aws::load(region).await?, &options).await;
                print!("{}", report.render());
                Ok(report.passed())
            };
            run.await
        }
        Command::Adopt {
            stack,
            cluster,
            apply,
            rollback,
            stack_template,
            delete_hand_made,
            rule_settle,
            karpenter_roles,
            managed_tag,
            region,
            account,
            profile,
            spoke_stack,
            hub_region,
        } => {
            let mut options = adopt::Options {
                stack,
                cluster,
                verb: match (apply, rollback, stack_template) {
                    (true, _, _) => adopt::Verb::Apply,
                    (_, true, _) => adopt::Verb::Rollback,
                    (_, _, true) => adopt::Verb::StackTemplate,
                    _ => adopt::Verb::Plan,
                },
                karpenter_roles,
                managed_tag,
                delete_hand_made,
                settle: std::time::Duration::from_secs(rule_settle),
                member: None,
                site_flags: String::new(),
            };
            // The flags that reach this site, for the commands adopt prints.
            let flags = [
                ("--account", account.clone()),
                ("--profile", profile.clone()),
                ("--region", region.clone()),
                ("--hub-region", hub_region.clone()),
                (
                    "--spoke-stack",
                    Some(spoke_stack.clone()).filter(|s| s != verify::DEFAULT_SPOKE_STACK),
                ),
            ];
            options.site_flags = flags
                .iter()
                .filter_map(|(flag, value)| Some(format!(" {flag} {}", value.as_ref()?)))
                .collect();
            let run = async {
                let (hub, site, member) =
                    adopt::connect::reach(region, hub_region, account, profile, &spoke_stack)
                        .await?;
                options.member = member;
                let report = adopt::run_at(&hub, &site, &options).await?;
                match &report.outcome {
                    // The template alone on stdout, to redirect into a file.
                    adopt::Outcome::Template { edit, .. } => {
                        eprint!("{}", report.render());
                        print!("{}", edit.template);
                    }
                    _ => print!("{}", report.render()),
                }
                Ok(report.passed())
            };
            run.await
        }
        Command::Fis {
            cluster,
            template_id,
            experiment_id,
            stack,
            log_group,
            settle,
            timeout,
            strict,
            managed_tag,
            yes,
            region,
        } => {
            if experiment_id.is_none() && !yes {
                eprintln!(
                    "error: this starts a FIS experiment that interrupts running spot instances of the \
                     cluster; pass --yes to go ahead (or --experiment-id to report on one that ran)"
                );
                return ExitCode::from(2);
            }
            let options = fis::Options {
                cluster,
                template_id,
                experiment_id,
                stack,
                log_group,
                settle,
                poll: Duration::from_secs(5),
                timeout,
                strict,
                managed_tag,
            };
            match Aws::load(region).await {
                Ok(aws) => fis::run(&aws, &options, |what| eprintln!("  … {what}"))
                    .await
                    .map(|report| {
                        print!("{}", report.render());
                        report.passed()
                    }),
                Err(e) => Err(e),
            }
        }
        Command::Insights {
            since,
            clusters,
            json,
            regions,
            stack,
            log_group,
        } => {
            let options = insights::Options {
                stack,
                log_group,
                since,
                clusters,
            };
            let run = async {
                let mut hubs = Vec::new();
                match regions.is_empty() {
                    true => hubs.push(Aws::load(None).await?),
                    false => {
                        for region in regions {
                            hubs.push(Aws::load(Some(region)).await?);
                        }
                    }
                }
                let report = insights::run(&hubs, &options).await?;
                match json {
                    true => println!("{}", serde_json::to_string_pretty(&report.to_json())?),
                    false => print!("{}", report.render()),
                }
                Ok(report.passed())
            };
            run.await
        }
    };
    routerctl::exit_code(result)
}
