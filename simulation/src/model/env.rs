//! One execution environment's view of the [`World`]: the router's [`Aws`] seam, each call
//! handed to the world, which answers as AWS does.

use std::{sync::Arc, time::SystemTime};

use router_core::{
    aws::{
        Aws, CallError, Credentials, DescribeInstances, EntryResult, InstancePage, SendEntry,
        Session, Tagged, VisibilityEntry,
    },
    event::InstanceId,
};

use super::World;

/// One execution environment's seam onto the [`World`].
pub struct EnvAws {
    pub env: usize,
    pub world: Arc<World>,
}

impl Aws for EnvAws {
    fn now(&self) -> SystemTime {
        self.world.now_wall()
    }
    fn jitter(&self) -> f64 {
        self.world.jitter()
    }
    async fn assume_role(&self, role_arn: &str) -> Result<Credentials, CallError> {
        self.world.assume_role(self.env, role_arn).await
    }
    async fn describe_instances(
        &self,
        at: &Session,
        query: DescribeInstances<'_>,
    ) -> Result<InstancePage, CallError> {
        self.world.describe_instances(at, query).await
    }
    async fn get_resources(
        &self,
        at: &Session,
        ids: &[InstanceId],
    ) -> Result<Vec<Tagged>, CallError> {
        self.world.get_resources(at, ids).await
    }
    async fn get_queue_url(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world.get_queue_url(at, name).await
    }
    async fn list_queue_tags(
        &self,
        at: &Session,
        url: &str,
    ) -> Result<Vec<(String, String)>, CallError> {
        self.world.list_queue_tags(at, url).await
    }
    async fn get_queue_policy(
        &self,
        _at: &Session,
        _url: &str,
    ) -> Result<Option<String>, CallError> {
        // Every tenant queue carries its tag: the policy is never asked.
        Ok(None)
    }
    async fn get_role_id(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world.get_role_id(at, name).await
    }
    async fn get_parameter(&self, at: &Session, name: &str) -> Result<String, CallError> {
        self.world.get_parameter(at, name).await
    }
    async fn send_message_batch(
        &self,
        at: &Session,
        url: &str,
        entries: &[SendEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.world.send_message_batch(at, url, entries).await
    }
    async fn change_message_visibility_batch(
        &self,
        at: &Session,
        _url: &str,
        entries: &[VisibilityEntry<'_>],
    ) -> Result<Vec<EntryResult>, CallError> {
        self.world
            .change_message_visibility_batch(at, entries)
            .await
    }
}
