//! The loopback HTTP/1.1 server under the local stand-ins (the Lambda Runtime API, the Lambda
//! Invoke API and the AWS proxy): a free port on 127.0.0.1, one hyper connection task per client,
//! stopped when dropped.

use std::{future::Future, net::SocketAddr};

use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;

pub struct LoopbackServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl LoopbackServer {
    /// Serves `handle` until dropped. A handler error closes the connection without an answer,
    /// which is how the proxy plays a connection reset.
    pub async fn start<F, Fut, E>(handle: F) -> Result<Self>
    where
        F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
        Fut: Future<Output = Result<Response<Full<Bytes>>, E>> + Send + 'static,
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let listener = crate::ports::bind_loopback().await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let handle = handle.clone();
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service_fn(handle))
                        .await;
                });
            }
        });
        Ok(Self { addr, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
