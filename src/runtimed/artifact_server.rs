//! runtimed's `GET /artifacts/<run>/<run uid>/<name>` on its API port: the bytes of a stored
//! artifact of a Run of this namespace, from the Runtime's artifact store (any Pod of the
//! Runtime serves any of its Runs' artifacts: they share the claim or the bucket). What
//! `kubectl kruntimes artifacts --download` reads through the gateway, like `logs`
//! ([`super::callers`] lets only it in). The store keeps a Run's artifacts by UID, so the UID
//! is checked to be the named Run's (one read of the Run): the gateway's leave for one Run's
//! artifacts reads no other's.
//! Reads only; the layout is [`super::artifacts`]'.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;

use kube::api::Api;

use super::artifacts::{self, Store};
use crate::api::Run;

#[derive(Clone)]
struct Served {
    store: Store,
    namespace: String,
    /// runtimed's own reads of the Runs of `namespace`.
    runs: Api<Run>,
}

/// The route, for `store` and the Runs `runs` reads.
pub fn routes(store: Store, runs: Api<Run>, namespace: String) -> Router {
    Router::new()
        .route("/artifacts/{run}/{uid}/{name}", get(serve))
        .with_state(Served {
            store,
            namespace,
            runs,
        })
}

async fn serve(
    State(served): State<Served>,
    UrlPath((run, uid, name)): UrlPath<(String, String, String)>,
) -> Response {
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            format!(
                "Run {run} (UID {uid}) has no artifact {name:?} in this Runtime's artifact store\n"
            ),
        )
            .into_response()
    };
    // One path segment each: nothing outside the Run's directory is ever read.
    if artifacts::check_name(&name).is_err() || artifacts::check_name(&uid).is_err() {
        return not_found();
    }
    // The caller was allowed this Run's artifacts: the UID must be this Run's.
    match served.runs.get_opt(&run).await {
        Ok(Some(r)) if r.metadata.uid.as_deref() == Some(uid.as_str()) => {}
        Ok(_) => return not_found(),
        Err(e) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("cannot read Run {run} to serve its artifact: {e}\n"),
            )
                .into_response();
        }
    }
    match served.store.open(&served.namespace, &uid, &name).await {
        Ok(Some(bytes)) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Body::from_stream(bytes),
        )
            .into_response(),
        Ok(None) => not_found(),
        Err(e) => (
            StatusCode::BAD_GATEWAY,
            format!("cannot read artifact {name:?} of Run {uid} from the artifact store: {e}\n"),
        )
            .into_response(),
    }
}
