//! A fake runtime server for the shell's tests: the contract's `Runtime` service in this
//! process on a loopback port, whose executions run nothing and end when the test says so.
//! It counts `Execute` calls, so that a test sees an execution started once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tonic::{Request, Response, Status};

use crate::runtimed::proto::runtime_server::{Runtime, RuntimeServer};
use crate::runtimed::proto::*;

#[derive(Clone, Default)]
pub(super) struct FakeServer {
    executions: Arc<Mutex<HashMap<String, StatusResponse>>>,
    executed: Arc<Mutex<usize>>,
}

impl FakeServer {
    /// Serves on a free loopback port; returns the server and its address.
    pub(super) async fn start() -> (FakeServer, String) {
        let server = FakeServer::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let address = listener.local_addr().expect("its address").to_string();
        let incoming = futures::stream::unfold(listener, |listener| async move {
            let next = listener.accept().await.map(|(stream, _)| stream);
            Some((next, listener))
        });
        let service = RuntimeServer::new(server.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming),
        );
        (server, address)
    }

    /// The ids of the executions it holds.
    pub(super) fn ids(&self) -> Vec<String> {
        self.executions.lock().unwrap().keys().cloned().collect()
    }

    /// How many executions were started.
    pub(super) fn executed(&self) -> usize {
        *self.executed.lock().unwrap()
    }

    /// Ends execution `id` with `exit_code`.
    pub(super) fn finish(&self, id: &str, exit_code: i32) {
        let mut executions = self.executions.lock().unwrap();
        let status = executions.get_mut(id).expect("the execution");
        status.exit_code = exit_code;
        status.state = match exit_code {
            0 => ExecutionState::Succeeded,
            _ => ExecutionState::Failed,
        } as i32;
    }
}

#[tonic::async_trait]
impl Runtime for FakeServer {
    async fn execute(
        &self,
        req: Request<ExecuteRequest>,
    ) -> Result<Response<ExecuteResponse>, Status> {
        let id = req.into_inner().id;
        let mut executions = self.executions.lock().unwrap();
        if !executions.contains_key(&id) {
            *self.executed.lock().unwrap() += 1;
            executions.insert(
                id.clone(),
                StatusResponse {
                    id: id.clone(),
                    state: ExecutionState::Running as i32,
                    ..Default::default()
                },
            );
        }
        Ok(Response::new(ExecuteResponse { id }))
    }

    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let id = req.into_inner().id;
        match self.executions.lock().unwrap().get(&id) {
            Some(status) => Ok(Response::new(status.clone())),
            None => Err(Status::not_found(format!("execution {id} not found"))),
        }
    }

    async fn list(&self, _: Request<ListRequest>) -> Result<Response<ListResponse>, Status> {
        let entries = self.executions.lock().unwrap().values().cloned().collect();
        Ok(Response::new(ListResponse { entries }))
    }

    async fn cancel(
        &self,
        req: Request<CancelRequest>,
    ) -> Result<Response<CancelResponse>, Status> {
        let id = req.into_inner().id;
        if let Some(status) = self.executions.lock().unwrap().get_mut(&id) {
            status.state = ExecutionState::Failed as i32;
            status.exit_code = -1;
        }
        Ok(Response::new(CancelResponse {}))
    }

    async fn forget(
        &self,
        req: Request<ForgetRequest>,
    ) -> Result<Response<ForgetResponse>, Status> {
        self.executions.lock().unwrap().remove(&req.into_inner().id);
        Ok(Response::new(ForgetResponse {}))
    }

    async fn health(&self, _: Request<HealthRequest>) -> Result<Response<HealthResponse>, Status> {
        Ok(Response::new(HealthResponse {
            healthy: true,
            message: String::new(),
        }))
    }
}
