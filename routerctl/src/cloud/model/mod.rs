//! routerctl's seam answered by the model of AWS ([`aws_world::World`]): what verify reads
//! ([`super::Cloud`], `reads.rs`), what simulate sends, fis starts and adopt changes
//! ([`super::Deliveries`], [`super::Experiments`], [`super::Moves`], `acts.rs`), what insights
//! queries ([`super::queries::LogQueries`], `queries.rs`), each from the world's state as AWS
//! answers. The world itself, and the semantics it keeps, are aws-world's;
//! the router's decision tests run on the same world.

mod acts;
mod queries;
mod reads;

pub use aws_world::*;
