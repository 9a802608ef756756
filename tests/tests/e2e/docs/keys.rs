//! docs/locked-down.md: the key policy statements it tells an organisation's key owner to paste
//! are the ones `routerctl verify` prints and the stacks write into keys of their own
//! ([`aws_model::documents::key_statements`]), placeholders filled in.

use std::collections::BTreeMap;

use aws_model::documents::{KeyedStack, base_key_statements, key_statements};
use serde_json::Value;

use super::repo_file;

const ACCOUNT: &str = "111122223333";
const REGION: &str = "eu-west-1";
const ROUTER: &str = "arn:aws:iam::111122223333:role/interruption-router-RouterRole-X";
const MEMBER: &str = "444455556666";

/// The JSON blocks of `text`, placeholders replaced.
fn json_blocks(text: &str) -> Vec<Value> {
    text.split("```json\n")
        .skip(1)
        .map(|rest| {
            let block = &rest[..rest.find("```").expect("a closed block")];
            let filled = block
                .replace("<account>", ACCOUNT)
                .replace("<region>", REGION)
                .replace("<the router role's ARN>", ROUTER)
                .replace("<member account>", MEMBER)
                .replace("<SpokeRoleName>", "interruption-router-spoke");
            serde_json::from_str(&filled).unwrap_or_else(|e| panic!("{e}: {block}"))
        })
        .collect()
}

#[test]
fn the_statements_the_docs_give_a_key_owner_are_the_ones_verify_prints() {
    let doc = repo_file("docs/locked-down.md");
    let blocks = json_blocks(&doc);
    let base = key_statements(KeyedStack::Base, ACCOUNT, REGION, "").unwrap();
    let tenant = key_statements(KeyedStack::Tenant, ACCOUNT, REGION, ROUTER).unwrap();
    let hub = base_key_statements(
        ACCOUNT,
        REGION,
        &BTreeMap::from([
            ("CentralBus".to_owned(), "Enabled".to_owned()),
            ("ServedAccounts".to_owned(), MEMBER.to_owned()),
        ]),
    )
    .unwrap();
    let by_sid = |all: &[Value], sid: &str| {
        all.iter()
            .find(|s| s["Sid"] == sid)
            .cloned()
            .unwrap_or_else(|| panic!("no {sid}"))
    };
    assert_eq!(
        blocks,
        [
            by_sid(&base, "EventBridgeRulesOfThisAccountDeliver"),
            by_sid(&hub, "MemberDirectRolesUseItThroughSqs"),
            by_sid(&tenant, "RouterSendsThroughSqs"),
        ]
    );
    // The account's roles' statements it names by Sid exist too.
    for sid in [
        "AccountRolesUseItThroughSqs",
        "AccountRolesDecryptThroughSqs",
    ] {
        assert!(doc.contains(&format!("`{sid}`")), "{sid}");
        assert!(base.iter().chain(&tenant).any(|s| s["Sid"] == sid), "{sid}");
    }
}
