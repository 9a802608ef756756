//! A synthetic event ([`aws_model::events::Synthetic`]) as EventBridge's PutEvents takes it.

use aws_model::events::Synthetic;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;

/// What PutEvents needs of an event.
pub trait PutEvents {
    /// The event as a PutEvents entry (EventBridge assigns the envelope's id, account and time).
    fn put_events_entry(&self) -> PutEventsRequestEntry;
}

impl PutEvents for Synthetic {
    fn put_events_entry(&self) -> PutEventsRequestEntry {
        let resources = self.event["resources"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        PutEventsRequestEntry::builder()
            .source(self.kind.source())
            .detail_type(self.kind.detail_type())
            .detail(self.event["detail"].to_string())
            .set_resources(Some(
                resources
                    .iter()
                    .filter_map(|r| r.as_str().map(str::to_owned))
                    .collect(),
            ))
            .build()
    }
}
