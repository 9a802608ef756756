use super::*;

fn queue(retention: &str) -> Queue {
    Queue {
        name: "q".into(),
        arn: "arn".into(),
        url: "url".into(),
        attributes: [("MessageRetentionPeriod".to_owned(), retention.to_owned())].into(),
    }
}

#[test]
fn a_round_reads_back_from_its_tag_and_ripens() {
    let round = Round {
        started: UNIX_EPOCH + Duration::from_millis(1_700_000_000_000),
        probe: "routerctl-adopt-alpha-1700000000000".into(),
        backlog: None,
    };
    assert_eq!(Round::parse(&round.tag()), Some(round.clone()));
    // The sentinel's event id derives from the probe's: a later run finds it by the tag alone.
    assert_eq!(
        round.sentinel(),
        "routerctl-adopt-alpha-1700000000000-sentinel"
    );
    assert!(round.ripe(SystemTime::now()));
    let fresh = Round {
        started: SystemTime::now(),
        ..round
    };
    assert!(!fresh.ripe(SystemTime::now()));
    assert_eq!(Round::parse("not a round"), None);
    assert_eq!(Round::parse("2026-01-01T00:00:00Z a b"), None);
    assert_eq!(Round::parse("2026-01-01T00:00:00Z a b c d"), None);
}

#[test]
fn a_round_older_than_its_queues_keep_messages_is_expired() {
    let round = |age: u64| Round {
        started: SystemTime::now() - Duration::from_secs(age),
        probe: "p".into(),
        backlog: None,
    };
    let (short, long) = (queue("300"), queue("345600"));
    assert!(!round(100).expired(SystemTime::now(), [&short, &long]));
    assert!(round(280).expired(SystemTime::now(), [&short, &long]));
    assert!(!round(280).expired(SystemTime::now(), [&long]));
    assert_eq!(
        Round::expired_after([&short, &long]),
        Duration::from_secs(270)
    );
}

/// A round whose first read met a backlog keeps when it looked; it ripens when the counts'
/// window has ended, and never expires with its messages (the counts decide it).
#[test]
fn a_round_with_a_backlog_reads_back_and_ripens_on_its_counts_window() {
    let whole = |at: SystemTime| {
        UNIX_EPOCH + Duration::from_secs(at.duration_since(UNIX_EPOCH).unwrap().as_secs())
    };
    let now = whole(SystemTime::now());
    let round = Round {
        started: now - Duration::from_secs(70),
        probe: "routerctl-adopt-alpha-1700000000000".into(),
        backlog: Some(Looked {
            from: now - Duration::from_secs(3),
            until: now,
        }),
    };
    assert_eq!(Round::parse(&round.tag()), Some(round.clone()));
    // Past its quiet window, but the minute after its look has not ended.
    assert!(!round.ripe(SystemTime::now()));
    let old = Round {
        started: now - Duration::from_secs(900),
        backlog: Some(Looked {
            from: now - Duration::from_secs(800),
            until: now - Duration::from_secs(790),
        }),
        ..round.clone()
    };
    assert!(old.ripe(SystemTime::now()));
    assert!(!old.expired(SystemTime::now(), [&queue("300")]));
    assert!(
        Round {
            backlog: None,
            ..old
        }
        .expired(SystemTime::now(), [&queue("300")])
    );
}

#[test]
fn the_operators_commands_name_each_rule_and_the_region() {
    assert_eq!(
        disable_commands(&["A".into(), "B".into()], "eu-west-1"),
        "aws events disable-rule --region eu-west-1 --name A && aws events disable-rule \
             --region eu-west-1 --name B"
    );
}
