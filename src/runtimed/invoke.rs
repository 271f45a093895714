//! runtimed's invoke endpoint, `POST /invoke/<run>` on its API port: one invocation of a
//! Ready function Run of this Pod through the runtime server's `InvokeFunction`. People reach
//! it through the gateway (`kubectl kruntimes invoke run/NAME`, the Run's `invoke`
//! subresource), the only caller [`super::callers`] lets in. Bounded: 1 MiB in, the server's
//! answer out.
//!
//! Owns the HTTP mapping only: the registrations are the agent's, the call is
//! [`super::remote::RuntimeServer::invoke`]'s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::remote::RuntimeServer;
use crate::runtimed::proto::FunctionRegistration;

/// The largest invocation payload accepted.
pub const MAX_INPUT: usize = 1 << 20;
/// How long one invocation may take.
const INVOKE_TIMEOUT: Duration = Duration::from_secs(60);

type Registrations = Arc<Mutex<HashMap<String, FunctionRegistration>>>;

/// The `/invoke/<run>` route over `server` and the agent's `registrations`.
pub fn routes(server: RuntimeServer, registrations: Registrations) -> Router {
    Router::new()
        .route("/invoke/{run}", post(invoke))
        .layer(DefaultBodyLimit::max(MAX_INPUT))
        .with_state((server, registrations))
}

async fn invoke(
    State((server, registrations)): State<(RuntimeServer, Registrations)>,
    Path(run): Path<String>,
    headers: HeaderMap,
    input: Bytes,
) -> Response {
    let registration = registrations
        .lock()
        .expect("registrations")
        .get(&run)
        .cloned();
    let Some(registration) = registration else {
        return (
            StatusCode::NOT_FOUND,
            format!("Run {run} is not a Ready function Run on this Runtime Pod\n"),
        )
            .into_response();
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or(crate::api::DEFAULT_INVOKE_CONTENT_TYPE)
        .to_string();
    match server
        .invoke(&registration, input.to_vec(), &content_type, INVOKE_TIMEOUT)
        .await
    {
        Ok(answer) => {
            let content_type = match answer.content_type.as_str() {
                "" => "application/octet-stream".to_string(),
                other => other.to_string(),
            };
            ([(header::CONTENT_TYPE, content_type)], answer.output).into_response()
        }
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            format!(
                "the runtime server refused the invocation of Run {run}: {:?}: {}\n",
                e.code(),
                e.message()
            ),
        )
            .into_response(),
    }
}
