//! The model of AWS the router's decision tests run on (aws-world's `WorldAws`) answers the
//! seam's calls as the emulator does through the Lambda's SDK adapter: one script of calls, run
//! against both estates built alike, gives the same answers as the router reads them. So what the
//! decision tests prove on the model holds of the calls the Lambda makes.

use std::collections::BTreeSet;

use anyhow::Result;
use aws_world::router::WorldAws;
use e2e_tests::{World, karpenter_tags, managed_nodegroup_tags};
use interruption_router::{
    accounts::Scope,
    aws::{
        Aws, CallError, Capacity, DescribeInstances, Described, EntryResult, Identity,
        InstanceFilter, SendEntry, Session, Tagged,
    },
    event::InstanceId,
    tenancy::record_name,
};
use local_aws::moto::{ACCOUNT, Placement, REGION};

const ROLE: &str = "arn:aws:iam::123456789012:role/interruption-router";

fn home() -> Session {
    Session {
        scope: Scope::new(ACCOUNT, REGION),
        identity: Identity::Home,
    }
}

/// A call's outcome as the router tells outcomes apart.
fn outcome<T>(answer: &Result<T, CallError>) -> String {
    match answer {
        Ok(_) => "ok".into(),
        Err(e) if e.is_missing_queue() => "missing queue".into(),
        Err(e) if e.is_missing_parameter() => "missing parameter".into(),
        Err(e) => format!("error {}", e.code),
    }
}

/// Instances as the resolver reads them: ids, their tags and what the answer describes (type,
/// zone, capacity type: DescribeInstances' alone), in no order.
fn instances(answer: Result<Vec<Tagged>, CallError>) -> String {
    type Read = (String, BTreeSet<(String, String)>, Option<String>);
    let read: BTreeSet<Read> = answer
        .expect("an answer")
        .into_iter()
        .map(|t| {
            let described = t
                .described
                .map(|d| format!("{} {} {}", d.instance_type, d.zone, d.capacity.label()));
            (
                t.id.as_str().to_owned(),
                t.tags.into_iter().collect(),
                described,
            )
        })
        .collect();
    format!("{read:?}")
}

/// The script: every call of the seam the router makes to an account of its own, each answer
/// written down as the router reads it.
async fn script<A: Aws>(aws: &A, ids: &[InstanceId]) -> Vec<String> {
    let at = home();
    let mut said = Vec::new();
    let tenant = aws.get_queue_url(&at, "karpenter-alpha").await;
    said.push(format!("GetQueueUrl tenant: {}", outcome(&tenant)));
    let tenant = tenant.expect("the tenant queue");
    let plain = aws
        .get_queue_url(&at, "plain")
        .await
        .expect("the plain queue");
    let gone = aws.get_queue_url(&at, "karpenter-gone").await;
    said.push(format!("GetQueueUrl gone: {}", outcome(&gone)));
    let gone_url = tenant.replace("karpenter-alpha", "karpenter-gone");

    let mut tags = aws.list_queue_tags(&at, &tenant).await.expect("tags");
    tags.sort();
    said.push(format!("ListQueueTags: {tags:?}"));
    let tags_gone = aws.list_queue_tags(&at, &gone_url).await;
    said.push(format!("ListQueueTags gone: {}", outcome(&tags_gone)));
    let policy = |p: Option<String>| p.map(|p| serde_json::from_str::<serde_json::Value>(&p));
    let tenant_policy = aws.get_queue_policy(&at, &tenant).await.expect("policy");
    said.push(format!(
        "Policy tenant: {:?}",
        policy(tenant_policy).is_some()
    ));
    let plain_policy = aws.get_queue_policy(&at, &plain).await.expect("policy");
    said.push(format!(
        "Policy plain: {:?}",
        policy(plain_policy).is_some()
    ));

    let record = aws
        .get_parameter(&at, &record_name("karpenter-alpha"))
        .await;
    said.push(format!("GetParameter record: {}", outcome(&record)));
    let no_record = aws.get_parameter(&at, &record_name("karpenter-gone")).await;
    said.push(format!("GetParameter none: {}", outcome(&no_record)));

    let by_id = aws
        .describe_instances(
            &at,
            DescribeInstances {
                filter: InstanceFilter::Ids(ids),
                next_token: None,
            },
        )
        .await
        .map(|page| page.instances);
    said.push(format!("DescribeInstances ids: {}", instances(by_id)));
    let swept = aws
        .describe_instances(
            &at,
            DescribeInstances {
                filter: InstanceFilter::TagKey("karpenter.sh/nodepool"),
                next_token: None,
            },
        )
        .await
        .map(|page| {
            assert_eq!(page.next_token, None, "one page");
            page.instances
        });
    said.push(format!("DescribeInstances sweep: {}", instances(swept)));
    let tagged = aws.get_resources(&at, ids).await;
    said.push(format!("GetResources: {}", instances(tagged)));

    let reason = [("reason", "queue-missing".to_owned())];
    let entries = [
        SendEntry {
            id: "0",
            body: "first",
            attributes: &[],
        },
        SendEntry {
            id: "1",
            body: "second",
            attributes: &reason,
        },
    ];
    let sent = aws
        .send_message_batch(&at, &tenant, &entries)
        .await
        .expect("a batch answer");
    let sent: Vec<String> = sent
        .iter()
        .map(|r| match r {
            EntryResult::Ok { id } => format!("{id} ok"),
            EntryResult::Failed(f) => format!("{} {}", f.id, f.code),
        })
        .collect();
    said.push(format!("SendMessageBatch: {sent:?}"));
    let to_gone = aws.send_message_batch(&at, &gone_url, &entries).await;
    said.push(format!("SendMessageBatch gone: {}", outcome(&to_gone)));
    said
}

#[tokio::test]
async fn the_model_answers_the_routers_seam_as_the_emulator_does() -> Result<()> {
    let world = World::start().await?;
    // alpha's node a spot c6i.2xlarge in the region's third zone; the others as moto launches by
    // default (an On-Demand m5.large in the first).
    let spot = Placement {
        instance_type: "c6i.2xlarge",
        zone: Some("us-east-1c"),
        spot: true,
    };
    let alpha = local_aws::moto::launch_as(&world.ec2, &karpenter_tags("alpha"), 1, spot)
        .await?
        .pop()
        .expect("an instance");
    let managed = world.launch(&managed_nodegroup_tags("beta")).await?;
    let bare = world.launch(&[]).await?;
    world.create_tenant_queue("alpha").await?;
    world.create_queue("plain").await?;

    let model = WorldAws::new(&aws_world::World::new(ACCOUNT, REGION), ROLE, &[]);
    for (id, tags) in [
        (&managed, managed_nodegroup_tags("beta")),
        (&bare, Vec::new()),
    ] {
        let tags: Vec<(&str, &str)> = tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        model.instance(ACCOUNT, REGION, id, &tags);
    }
    let described = Described {
        instance_type: "c6i.2xlarge".into(),
        zone: "us-east-1c".into(),
        capacity: Capacity::Spot,
    };
    model.node_of((ACCOUNT, REGION), &alpha, ("alpha", "default"), described);
    model.tenant(ACCOUNT, REGION, "alpha");
    model.queue(ACCOUNT, REGION, "plain", &[], None);

    let ids: Vec<InstanceId> = [&alpha, &managed, &bare, "i-0123456789abcdef9"]
        .iter()
        .map(|id| InstanceId::parse(id).expect("an instance id"))
        .collect();
    let emulator = script(&*super::aws(&world).await, &ids).await;
    let modelled = script(&model, &ids).await;
    assert_eq!(modelled, emulator);

    // What the sends left in the tenant queue, message attributes included.
    let received = world
        .sqs
        .receive_message()
        .queue_url(world.queue_url("karpenter-alpha").await?)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await?;
    let mut held: Vec<(String, Vec<(String, String)>)> = received
        .messages()
        .iter()
        .map(|m| {
            let attributes = m
                .message_attributes()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.string_value().unwrap_or_default().to_owned()))
                .collect();
            (m.body().unwrap_or_default().to_owned(), attributes)
        })
        .collect();
    held.sort();
    let mut modelled_held: Vec<(String, Vec<(String, String)>)> = model
        .held(ACCOUNT, REGION, "karpenter-alpha")
        .into_iter()
        .map(|m| (m.body, m.attributes))
        .collect();
    modelled_held.sort();
    assert_eq!(modelled_held, held);
    Ok(())
}
