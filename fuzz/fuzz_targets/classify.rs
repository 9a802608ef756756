//! Fuzzes the event parser: any bytes, as an SQS body or a direct payload, must classify without
//! panicking, and whatever routes must stay sound (valid, distinct ids; Health copies that split
//! and re-classify to exactly the subset). Run: `make fuzz` (time-boxed; seeds from fixtures/).
#![no_main]

use libfuzzer_sys::fuzz_target;

// The router's core crate: the parser as the router runs it, without the AWS SDK (which the fuzz
// build would otherwise compile and instrument).
use router_core::event::{Classified, InstanceId, Kind, classify, health_body_for};

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else { return };
    let Ok(Classified::Route(interruption)) = classify(body) else { return };
    assert!(!interruption.instances.is_empty());
    for (n, id) in interruption.instances.iter().enumerate() {
        assert_eq!(InstanceId::parse(id.as_str()).as_ref(), Some(id));
        assert!(!interruption.instances[..n].contains(id), "{id} listed twice");
    }
    if interruption.kind == Kind::ScheduledChange {
        let subset = &interruption.instances[..1];
        if let Ok(copy) = health_body_for(body, subset) {
            match classify(&copy) {
                Ok(Classified::Route(c)) => assert_eq!(c.instances, subset),
                other => panic!("split copy not routable: {other:?}"),
            }
        }
    }
});
