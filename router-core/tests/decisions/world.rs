//! The AWS the decisions are proven on: aws-world's model, the same one routerctl's tests run
//! on, behind the router's seam ([`WorldAws`]) with the layer of faults a test scripts.

pub use aws_world::router::{Fault, SWEEP, WorldAws, url};
use aws_world::{EPOCH_MS as WORLD_EPOCH_MS, World};

pub const HUB: &str = "111111111111";
pub const MEMBER: &str = "222222222222";
pub const REGION: &str = "us-east-1";
pub const OTHER_REGION: &str = "eu-west-1";
/// The wall clock at the start of a test: the world's.
pub const EPOCH_MS: u64 = WORLD_EPOCH_MS;
/// The router's execution role (base.yaml's).
pub const ROUTER_ROLE: &str = "arn:aws:iam::111111111111:role/interruption-router";

/// A world whose router runs in the hub's region, fed by base.yaml's ingest and direct queues
/// (their visibility timeout base.yaml's), with the spoke role spoke.yaml creates in `MEMBER`
/// (and in the hub, for its other regions) trusting the router's role.
pub fn hub() -> WorldAws {
    let world = World::new(HUB, REGION);
    for queue in ["interruption-router-ingest", "interruption-router-direct"] {
        world.create_queue(queue, &[("VisibilityTimeout", "180")]);
    }
    WorldAws::new(&world, ROUTER_ROLE, &[HUB, MEMBER])
}
