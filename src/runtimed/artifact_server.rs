//! runtimed's `GET /artifacts/<run uid>/<name>` on its probe port: the bytes of a stored
//! artifact of a Run of this namespace, from the Runtime's filesystem artifact store (any Pod
//! of the Runtime serves any of its Runs' artifacts: they share the claim). What
//! `kubectl kruntimes artifacts --download` reads through the API server's Pod proxy, like
//! `logs`. Reads files only; the layout is [`super::artifacts`]'.

use axum::Router;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use tokio::io::AsyncReadExt as _;

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
    let path = served
        .store
        .root
        .join(Store::run_path(&served.namespace, &uid))
        .join(&name);
    let file = match tokio::fs::File::open(&path).await {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return not_found(),
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read artifact {name:?} of Run {uid}: {e}\n"),
            )
                .into_response();
        }
    };
    let chunks = futures::stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 64 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(buf), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        Body::from_stream(chunks),
    )
        .into_response()
}
