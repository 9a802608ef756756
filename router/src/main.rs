//! The Lambda binary (deployed as `bootstrap` on the `provided.al2023` runtime).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    interruption_router::bootstrap::run().await
}
