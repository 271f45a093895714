//! runtimed's `GET /artifacts/<run uid>/<name>` on its probe port: the bytes of a stored
//! artifact of a Run of this namespace, from the Runtime's artifact store (any Pod of the
//! Runtime serves any of its Runs' artifacts: they share the claim or the bucket). What
//! `kubectl kruntimes artifacts --download` reads through the API server's Pod proxy, like
//! `logs`, for callers the API server allows `get runs/artifacts` in the namespace
//! ([`super::callers`]). Reads only; the layout is [`super::artifacts`]'.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;

use super::artifacts::{self, Store};

#[derive(Clone)]
struct Served {
    store: Store,
    namespace: String,
}

/// The route, for `store` and the Runs of `namespace`.
pub fn routes(store: Store, namespace: String) -> Router {
    Router::new()
        .route("/artifacts/{uid}/{name}", get(serve))
        .with_state(Served { store, namespace })
}

async fn serve(
    State(served): State<Served>,
    UrlPath((uid, name)): UrlPath<(String, String)>,
) -> Response {
    let not_found = || {
        (
            StatusCode::NOT_FOUND,
            format!("Run {uid} has no artifact {name:?} in this Runtime's artifact store\n"),
        )
            .into_response()
    };
    // One path segment each: nothing outside the Run's directory is ever read.
    if artifacts::check_name(&name).is_err() || artifacts::check_name(&uid).is_err() {
        return not_found();
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
