//! The emulator's own speed-ups change no answer: moto counts a queue's messages only for a call
//! that returns the counts and judges which it may hand out at one instant per scan
//! (`local-aws/src/moto_fixes/`), an instance still takes its image's architecture now that
//! the image is looked up by id (templates parsed by libyaml: `local_aws::moto`'s unit test),
//! and servers forked from one zygote (`local-aws/src/zygote.rs`) are as apart as servers
//! started one by one. And what the emulator
//! adds to moto answers as AWS does: SQS's per-minute counts in CloudWatch, late; a managed
//! policy a stack update changes, updated in place; a rule's state change reaching EventBridge's
//! delivery late (the EventBridge stand-in), as the model of AWS has it too; one queue called by
//! many at once (sends, receives, hand-backs, deletes) losing no message and failing no call; a
//! queue's stack found by its URL (DescribeStackResources by physical id).

use std::collections::HashMap;

use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName as Name;
use e2e_tests::World;

/// GetQueueAttributes of `names`.
async fn attributes(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    names: &[Name],
) -> Result<HashMap<Name, String>> {
    sqs.get_queue_attributes()
        .queue_url(url)
        .set_attribute_names(Some(names.to_vec()))
        .send()
        .await?
        .attributes
        .context("no attributes")
}

#[tokio::test]
async fn queue_counts_are_answered_when_asked_after_sends_and_receives() -> Result<()> {
    let world = World::start().await?;
    let (sqs, url) = (&world.sqs, world.create_queue("counted").await?);
    for n in 0..7 {
        sqs.send_message()
            .queue_url(&url)
            .message_body(n.to_string())
            .send()
            .await?;
    }
    sqs.send_message()
        .queue_url(&url)
        .message_body("delayed")
        .delay_seconds(60)
        .send()
        .await?;
    let received = sqs
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(3)
        .visibility_timeout(60)
        .wait_time_seconds(1)
        .send()
        .await?;
    assert_eq!(received.messages().len(), 3);

    let counts = [
        (Name::ApproximateNumberOfMessages, "4"),
        (Name::ApproximateNumberOfMessagesNotVisible, "3"),
        (Name::ApproximateNumberOfMessagesDelayed, "1"),
    ];
    let names: Vec<Name> = counts.iter().map(|(name, _)| name.clone()).collect();
    for asked in [&[Name::All][..], &names] {
        let answer = attributes(sqs, &url, asked).await?;
        for (name, want) in &counts {
            assert_eq!(
                answer.get(name).map(String::as_str),
                Some(*want),
                "{name} asked as {asked:?}: {answer:?}"
            );
        }
    }
    // A call that asks for no count still reads its setting.
    let retention = attributes(sqs, &url, &[Name::MessageRetentionPeriod]).await?;
    assert_eq!(
        retention
            .get(&Name::MessageRetentionPeriod)
            .map(String::as_str),
        Some("345600")
    );
    Ok(())
}

/// SQS's datapoints (minute, sum) of `metric` for `queue` over the last ten minutes.
async fn sqs_datapoints(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    queue: &str,
    metric: &str,
) -> Result<Vec<(i64, f64)>> {
    use aws_sdk_cloudwatch::{
        primitives::DateTime,
        types::{Dimension, Statistic},
    };
    let now = std::time::SystemTime::now();
    let out = cloudwatch
        .get_metric_statistics()
        .namespace("AWS/SQS")
        .metric_name(metric)
        .dimensions(Dimension::builder().name("QueueName").value(queue).build())
        .start_time(DateTime::from(now - std::time::Duration::from_secs(600)))
        .end_time(DateTime::from(now))
        .period(60)
        .statistics(Statistic::Sum)
        .send()
        .await?;
    let mut points: Vec<(i64, f64)> = out
        .datapoints()
        .iter()
        .filter_map(|d| Some((d.timestamp()?.secs(), d.sum()?)))
        .collect();
    points.sort_by_key(|(at, _)| *at);
    Ok(points)
}

/// SQS reports per queue and minute how many messages were sent, received and deleted, and the
/// empty receives, counting every caller (a second delete of a message with a valid handle too),
/// zero while the queue is active, and only minutes after the minute ends (SQS Developer Guide,
/// "Available CloudWatch metrics for Amazon SQS"). adopt decides a busy old queue on them.
#[tokio::test]
async fn sqs_counts_reach_cloudwatch_per_minute_late_and_count_every_caller() -> Result<()> {
    let world = World::start().await?;
    // Late: nothing of a finished minute shows before its delay.
    world
        .moto
        .set_sqs_metric_delay(std::time::Duration::from_secs(3600))
        .await?;
    let cloudwatch = aws_sdk_cloudwatch::Client::new(&world.config);
    // A second caller: another client, as another cluster's Karpenter would be.
    let other = aws_sdk_sqs::Client::new(&world.moto.sdk_config().await);
    let sqs = &world.sqs;
    // Act early in a minute, so that all of it falls in one.
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        % 60;
    if into_minute > 40 {
        tokio::time::sleep(std::time::Duration::from_secs(61 - into_minute)).await;
    }
    let url = world.create_queue("counted").await?;
    let idle = "idle";
    world.create_queue(idle).await?;
    for n in 0..3 {
        sqs.send_message()
            .queue_url(&url)
            .message_body(n.to_string())
            .send()
            .await?;
    }
    let received = other
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(2)
        .send()
        .await?;
    let handles: Vec<&str> = received
        .messages()
        .iter()
        .filter_map(|m| m.receipt_handle())
        .collect();
    assert_eq!(handles.len(), 2);
    for handle in [handles[0], handles[0], handles[1]] {
        other
            .delete_message()
            .queue_url(&url)
            .receipt_handle(handle)
            .send()
            .await?;
    }
    sqs.receive_message()
        .queue_url(&url)
        .max_number_of_messages(10)
        .send()
        .await?;
    let empty = sqs.receive_message().queue_url(&url).send().await?;
    assert!(empty.messages().is_empty());
    // The minute ends; with the delay still ahead, CloudWatch has nothing.
    let into_minute = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs()
        % 60;
    tokio::time::sleep(std::time::Duration::from_secs(61 - into_minute)).await;
    assert_eq!(
        sqs_datapoints(&cloudwatch, "counted", "NumberOfMessagesSent").await?,
        Vec::new()
    );
    // Once the delay has passed, each minute of the active queues is in, zero included.
    world
        .moto
        .set_sqs_metric_delay(std::time::Duration::ZERO)
        .await?;
    let sums = |points: Vec<(i64, f64)>| points.into_iter().map(|(_, v)| v).collect::<Vec<_>>();
    for (metric, want) in [
        ("NumberOfMessagesSent", 3.0),
        ("NumberOfMessagesReceived", 3.0),
        // The second delete of one message counts, as in SQS.
        ("NumberOfMessagesDeleted", 3.0),
        ("NumberOfEmptyReceives", 1.0),
    ] {
        // The minute it all happened in, then zeros (more minutes may have ended since).
        let points = sums(sqs_datapoints(&cloudwatch, "counted", metric).await?);
        assert_eq!(points.first(), Some(&want), "{metric}: {points:?}");
        assert!(
            points[1..].iter().all(|v| *v == 0.0),
            "{metric}: {points:?}"
        );
        let quiet = sums(sqs_datapoints(&cloudwatch, idle, metric).await?);
        assert!(
            !quiet.is_empty() && quiet.iter().all(|v| *v == 0.0),
            "{metric} of an idle queue: {quiet:?}"
        );
    }
    // routerctl's SDK adapter reads the same minutes as the SDK does (adopt's busy-queue path,
    // whose decisions the model's tests make on the same semantics: a datapoint per minute of
    // an active queue, zero included).
    let aws = aws_clients::aws::Aws::new(&world.config)?;
    let now = std::time::SystemTime::now();
    for (queue, metric) in [
        ("counted", "NumberOfMessagesReceived"),
        ("counted", "NumberOfMessagesDeleted"),
        (idle, "NumberOfMessagesReceived"),
    ] {
        let mut adapted = routerctl::cloud::moves::Moves::queue_metric(
            &aws,
            queue,
            metric,
            now - std::time::Duration::from_secs(600),
            now,
        )
        .await?;
        adapted.sort_by_key(|(at, _)| *at);
        let direct: Vec<(u64, f64)> = sqs_datapoints(&cloudwatch, queue, metric)
            .await?
            .into_iter()
            .map(|(at, v)| (at as u64, v))
            .collect();
        assert_eq!(adapted, direct, "{queue} {metric}");
    }
    Ok(())
}

/// Servers forked from one zygote share no state, draw their own ids, and are gone once stopped.
#[tokio::test]
async fn servers_forked_from_one_zygote_are_apart() -> Result<()> {
    let (one, two) = (World::start().await?, World::start().await?);
    let (a, b) = (one.launch(&[]).await?, two.launch(&[]).await?);
    assert_ne!(a, b, "two servers drew the same instance id");
    one.create_queue("only-in-one").await?;
    let missing = two.queue_url("only-in-one").await;
    assert!(missing.is_err(), "{missing:?}");
    let World { moto, sqs, .. } = one;
    moto.stop().await;
    let after = sqs.list_queues().send().await;
    assert!(after.is_err(), "a stopped server still answers: {after:?}");
    Ok(())
}

/// DescribeStackResources by a queue's URL names the stack that made the queue, and a queue no
/// stack made has none, through routerctl's SDK adapter as verify asks it (moto alone read
/// StackName only, and failed every such call).
#[tokio::test]
async fn a_queues_stack_is_found_by_its_url_and_a_hand_made_queue_has_none() -> Result<()> {
    use aws_clients::aws::Aws;
    use routerctl::cloud::Cloud;

    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    aws_clients::stacks::create(
        &aws.cfn,
        "made",
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      QueueName: by-stack\n",
        &[],
    )
    .await?;
    let by_stack = aws
        .sqs
        .get_queue_url()
        .queue_name("by-stack")
        .send()
        .await?;
    let by_hand = aws.sqs.create_queue().queue_name("by-hand").send().await?;
    assert_eq!(
        aws.stack_of(by_stack.queue_url().context("a URL")?).await?,
        Some("made".to_owned())
    );
    assert_eq!(
        aws.stack_of(by_hand.queue_url().context("a URL")?).await?,
        None
    );
    Ok(())
}

/// A managed policy whose statements a stack update changes stays the same policy, as
/// CloudFormation updates it (a new default version; attachments as listed): moto alone drops
/// it from the stack, and the role loses its grant.
#[tokio::test]
async fn a_managed_policy_changed_by_a_stack_update_is_updated_in_place() -> Result<()> {
    use aws_clients::aws::Aws;

    let world = World::start().await?;
    let aws = Aws::new(&world.moto.sdk_config().await)?;
    for role in ["reader", "other"] {
        lab::sandbox::create_karpenter_role(&aws.iam, role).await?;
    }
    let template = |action: &str, role: &str| {
        format!(
            "Resources:\n  Grant:\n    Type: AWS::IAM::ManagedPolicy\n    Properties:\n      \
             Roles: [{role}]\n      PolicyDocument:\n        Version: \"2012-10-17\"\n        \
             Statement:\n          - Effect: Allow\n            Action: {action}\n            \
             Resource: \"*\"\n"
        )
    };
    aws_clients::stacks::create(
        &aws.cfn,
        "grant",
        &template("sqs:ReceiveMessage", "reader"),
        &[],
    )
    .await?;
    let arn = aws_clients::aws::stack_resource(&aws, "grant", "Grant").await?;
    aws_clients::stacks::update(
        &aws.cfn,
        "grant",
        &template("sqs:DeleteMessage", "other"),
        &[],
    )
    .await?;
    assert_eq!(
        aws_clients::aws::stack_resource(&aws, "grant", "Grant").await?,
        arn
    );
    let policy = aws.iam.get_policy().policy_arn(&arn).send().await?;
    let version = policy
        .policy()
        .and_then(|p| p.default_version_id())
        .context("no version")?;
    let document = aws
        .iam
        .get_policy_version()
        .policy_arn(&arn)
        .version_id(version)
        .send()
        .await?;
    let text = aws_model::policy::decode_iam_document(
        document
            .policy_version()
            .and_then(|v| v.document())
            .unwrap_or_default(),
    )
    .map_err(anyhow::Error::msg)?;
    assert!(
        text.contains("sqs:DeleteMessage") && !text.contains("sqs:ReceiveMessage"),
        "{text}"
    );
    for (role, attached) in [("reader", false), ("other", true)] {
        let listed = aws
            .iam
            .list_attached_role_policies()
            .role_name(role)
            .send()
            .await?;
        let has = listed
            .attached_policies()
            .iter()
            .any(|p| p.policy_arn() == Some(arn.as_str()));
        assert_eq!(has, attached, "{role}");
    }
    Ok(())
}

/// The EventBridge stand-in and the model of AWS agree on a rule change's delay: delivery goes by
/// the old state until the change applies (the stand-in: `delay` after it first sees it; the
/// model: `aws_world`'s `RULE_CHANGE_DELAY`, its own test), so a command counting on a change at
/// once misses events on both, as EventBridge's "allow a short period of time" warns.
#[tokio::test]
async fn the_eventbridge_stand_in_delivers_by_a_rules_old_state_until_its_delay_passes()
-> Result<()> {
    use std::time::{Duration, Instant};

    let world = World::start().await?;
    let aws = aws_clients::aws::Aws::new(&world.config)?;
    let url = world.create_queue("old").await?;
    let arn = "arn:aws:sqs:us-east-1:123456789012:old";
    let allow = serde_json::json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
        "Resource": arn}]});
    world
        .sqs
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(Name::Policy, allow.to_string())
        .send()
        .await?;
    aws.events
        .put_rule()
        .name("Spot")
        .event_pattern(r#"{"source": ["aws.ec2"]}"#)
        .send()
        .await?;
    aws.events
        .put_targets()
        .rule("Spot")
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("q")
                .arn(arn)
                .build()?,
        )
        .send()
        .await?;
    let delay = Duration::from_secs(2);
    let bus = local_aws::eventbridge::DefaultBus::new(&aws, delay).await?;
    let event =
        serde_json::json!({"version": "0", "id": "e", "source": "aws.ec2", "detail-type": "x"});
    assert_eq!(bus.put(&event).await?, [arn]);

    aws.events.disable_rule().name("Spot").send().await?;
    let disabled = Instant::now();
    // It stops delivering, and never sooner than the delay (a slow machine only makes it later).
    let stopped = loop {
        if bus.put(&event).await?.is_empty() {
            break disabled.elapsed();
        }
        assert!(
            disabled.elapsed() < Duration::from_secs(60),
            "never stopped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(stopped >= delay, "stopped after {stopped:?}");
    Ok(())
}

/// SQS keeps every message it accepted until it is deleted, whoever calls at the same moment
/// (SQS Developer Guide, "Amazon SQS visibility timeout"): one queue's sends, receives,
/// hand-backs and deletes, all at once as a storm makes them, lose no message and fail no call.
/// moto answers each request on a thread of its own and changes a queue's messages without its
/// lock (`moto_fixes/` takes it): a receive meeting a handed-back message failed after hiding
/// the messages before it, and a delete can drop a message sent meanwhile. Messages held in
/// flight make each of moto's passes over the queue long, as a busy ingest queue's are (with 500
/// held, moto without the lock failed none of 4 runs; with 1,000, 6 of 8).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queue_sent_received_handed_back_and_deleted_at_once_loses_nothing() -> Result<()> {
    use std::{
        collections::BTreeSet,
        sync::Mutex,
        time::{Duration, Instant},
    };

    use aws_sdk_sqs::types::{
        ChangeMessageVisibilityBatchRequestEntry as Hand, DeleteMessageBatchRequestEntry as Delete,
    };

    const SENT: usize = 300;
    const RECEIVERS: usize = 4;
    let world = World::start().await?;
    // No retries: a call the emulator fails is seen here, not hidden by the SDK's retry.
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&world.config)
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .build(),
    );
    let url = world.create_queue("busy").await?;
    e2e_tests::send_all(&sqs, &url, (0..1000).map(|n| format!("held {n}"))).await?;
    let mut held = 0;
    while held < 1000 {
        let out = sqs
            .receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .send()
            .await?;
        held += out.messages().len();
    }

    let errors = Mutex::new(Vec::<String>::new());
    // A failed call's answer: the HTTP status the emulator gave, or the error if none.
    fn failure<E: std::error::Error + 'static>(
        e: aws_sdk_sqs::error::SdkError<E, aws_sdk_sqs::config::http::HttpResponse>,
    ) -> String {
        match e.raw_response() {
            Some(r) => format!("HTTP {}", r.status().as_u16()),
            None => aws_sdk_sqs::error::DisplayErrorContext(&e).to_string(),
        }
    }
    let note = |call: &str, result: Result<(), String>| {
        if let Err(failure) = result {
            errors.lock().unwrap().push(format!("{call}: {failure}"));
        }
    };
    let deleted = Mutex::new(BTreeSet::<String>::new());
    let handed_back = Mutex::new(BTreeSet::<String>::new());
    let sending_done = Mutex::new(None::<Instant>);
    let send = async {
        for n in 0..SENT {
            let body = format!("m{n}");
            let sent = sqs.send_message().queue_url(&url).message_body(&body);
            note(
                &format!("SendMessage {body}"),
                sent.send().await.map(drop).map_err(failure),
            );
        }
        *sending_done.lock().unwrap() = Some(Instant::now());
    };
    let receive = || async {
        let quiet = || {
            sending_done
                .lock()
                .unwrap()
                .is_some_and(|at| at.elapsed() > Duration::from_secs(10))
        };
        while deleted.lock().unwrap().len() < SENT && !quiet() {
            let received = sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .visibility_timeout(30)
                .wait_time_seconds(1)
                .send()
                .await;
            let out = match received {
                Ok(out) => out,
                Err(e) => {
                    note("ReceiveMessage", Err(failure(e)));
                    continue;
                }
            };
            // Each message's first receive hands every third back for a second, as the router
            // hands back a record whose queue failed; the rest, and every second receive, are
            // deleted.
            let (mut hand, mut delete) = (Vec::new(), Vec::new());
            for (i, m) in out.messages().iter().enumerate() {
                let (id, handle) = (i.to_string(), m.receipt_handle().unwrap_or_default());
                let body = m.body().unwrap_or_default().to_owned();
                let third = body
                    .trim_start_matches('m')
                    .parse::<usize>()
                    .is_ok_and(|n| n % 3 == 0);
                if third && handed_back.lock().unwrap().insert(body.clone()) {
                    let entry = Hand::builder().id(id).receipt_handle(handle);
                    hand.push(entry.visibility_timeout(1).build()?);
                } else {
                    delete.push(Delete::builder().id(id).receipt_handle(handle).build()?);
                    deleted.lock().unwrap().insert(body);
                }
            }
            if !hand.is_empty() {
                let call = sqs.change_message_visibility_batch().queue_url(&url);
                let result = call.set_entries(Some(hand)).send().await;
                note(
                    "ChangeMessageVisibilityBatch",
                    result.map(drop).map_err(failure),
                );
            }
            if !delete.is_empty() {
                let call = sqs.delete_message_batch().queue_url(&url);
                let result = call.set_entries(Some(delete)).send().await;
                note("DeleteMessageBatch", result.map(drop).map_err(failure));
            }
        }
        Ok::<(), anyhow::Error>(())
    };
    let receivers = futures_util::future::join_all((0..RECEIVERS).map(|_| receive()));
    let (_, received) = tokio::join!(send, receivers);
    for r in received {
        r?;
    }
    let errors = errors.into_inner().unwrap();
    assert!(errors.is_empty(), "calls failed: {errors:#?}");
    let deleted = deleted.into_inner().unwrap();
    let missing: Vec<String> = (0..SENT)
        .map(|n| format!("m{n}"))
        .filter(|b| !deleted.contains(b))
        .collect();
    assert!(
        missing.is_empty(),
        "sent, answered, never received: {missing:?}"
    );
    Ok(())
}

/// moto_fixes/ judges which of a queue's messages a receive may take at one instant per scan
/// (moto read the clock twice per message): a message handed back is received again, one held
/// is not, and a delayed one arrives once its delay passes, within a long poll that wakes for it.
#[tokio::test]
async fn handed_back_held_and_delayed_messages_are_received_as_sqs_receives_them() -> Result<()> {
    let world = World::start().await?;
    let (sqs, url) = (&world.sqs, world.create_queue("judged").await?);
    let receive = |visibility: i32, wait: i32| {
        sqs.receive_message()
            .queue_url(&url)
            .max_number_of_messages(10)
            .visibility_timeout(visibility)
            .wait_time_seconds(wait)
            .send()
    };
    for body in ["handed back", "held"] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await?;
    }
    let first = receive(600, 0).await?;
    assert_eq!(first.messages().len(), 2, "{first:?}");
    for message in first.messages() {
        if message.body() == Some("handed back") {
            sqs.change_message_visibility()
                .queue_url(&url)
                .receipt_handle(message.receipt_handle().context("receipt")?)
                .visibility_timeout(0)
                .send()
                .await?;
        }
    }
    let bodies = |out: &aws_sdk_sqs::operation::receive_message::ReceiveMessageOutput| {
        out.messages()
            .iter()
            .filter_map(|m| m.body().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    assert_eq!(bodies(&receive(600, 0).await?), ["handed back"]);

    sqs.send_message()
        .queue_url(&url)
        .message_body("delayed")
        .delay_seconds(1)
        .send()
        .await?;
    // The long poll returns as soon as the delay passes (20 s is SQS's longest wait).
    assert_eq!(bodies(&receive(600, 20).await?), ["delayed"]);
    Ok(())
}

/// moto_fixes/ looks the image RunInstances launches up by its id (moto matched a filter
/// against every image it knows): an instance still takes its image's architecture.
#[tokio::test]
async fn an_instance_takes_the_architecture_of_the_image_it_launches() -> Result<()> {
    let world = World::start().await?;
    let ec2 = &world.ec2;
    for architecture in ["arm64", "x86_64"] {
        let images = ec2
            .describe_images()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("architecture")
                    .values(architecture)
                    .build(),
            )
            .send()
            .await?;
        let image = images.images().first().context("no image")?;
        let launched = ec2
            .run_instances()
            .image_id(image.image_id().context("image id")?)
            .min_count(1)
            .max_count(1)
            .send()
            .await?;
        let instance = launched.instances().first().context("no instance")?;
        assert_eq!(
            instance.architecture().map(|a| a.as_str()),
            Some(architecture),
            "{instance:?}"
        );
    }
    Ok(())
}
