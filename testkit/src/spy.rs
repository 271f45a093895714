//! A spy in front of runtimed's API, as a Runtime author's proxy in the Runtime Pod would be: a
//! TLS server that records every request it passes on (method, target, every header, the body)
//! and forwards it to runtimed. Shared by the control-plane tests, the latency bench and, in
//! the test runtime server's `--spy`, the single-node cluster, where it prints each request as
//! one JSON line on stdout for the test to read from the container's log.
//!
//! It depends on nothing of the test world, so that a binary can take it alone.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};

/// What the spy saw of one request: method, path, every header and the body.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    /// All of it as one text, to search.
    pub fn text(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        format!("{}\n{}\n{}", self.target, headers.join("\n"), self.body)
    }

    /// The bearer token it carried.
    pub fn bearer(&self) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .and_then(|(_, v)| v.strip_prefix("Bearer "))
    }
}

/// How the spy runs.
pub struct Options {
    /// Where it listens (TLS, a self-made certificate).
    pub listen: SocketAddr,
    /// runtimed's API, e.g. `https://127.0.0.1:9443`.
    pub to: String,
    /// A header whose token the spy moves into `Authorization`, as runtimed once read a
    /// caller's token from `X-Kruntimes-Authorization` behind the API server's Pod proxy
    /// (which strips `Authorization`): the old path, for the latency bench.
    pub token_header: Option<&'static str>,
    /// Print each request as a JSON line on stdout.
    pub print: bool,
}

/// A running spy.
pub struct Spy {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Spy {
    pub async fn start(options: Options) -> Spy {
        use kruntimes::telemetry::http::{Bounds, secure};
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let client = kruntimes::manager::gateway::upstream::http_client().unwrap();
        let recorded = seen.clone();
        let options = Arc::new(options);
        let shared = options.clone();
        let app = axum::Router::new().fallback(move |request: Request| {
            let (client, recorded, options) = (client.clone(), recorded.clone(), shared.clone());
            async move { forward(client, recorded, &options, request).await }
        });
        let tls = Arc::new(secure::server_config(None, &["spy".into()]).unwrap());
        secure::serve_tls(
            options.listen,
            app,
            move || tls.clone(),
            Bounds::default(),
            std::future::pending(),
        )
        .await
        .unwrap();
        Spy {
            port: options.listen.port(),
            seen,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn forward(
    client: reqwest::Client,
    recorded: Arc<Mutex<Vec<Seen>>>,
    options: &Options,
    request: Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 4 << 20).await.unwrap().to_vec();
    let target = parts
        .uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let seen = Seen {
        target: format!("{} {target}", parts.method),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    if options.print {
        println!("{}", serde_json::to_string(&seen).unwrap());
    }
    recorded.lock().unwrap().push(seen);
    let mut onward = client.request(parts.method, format!("{}{target}", options.to));
    for (k, v) in &parts.headers {
        if Some(k.as_str()) == options.token_header {
            onward = onward.header(http::header::AUTHORIZATION, v);
        } else if k != http::header::HOST {
            onward = onward.header(k, v);
        }
    }
    match onward.body(body).send().await {
        Ok(answer) => {
            let code = answer.status();
            (code, axum::body::Body::from_stream(answer.bytes_stream())).into_response()
        }
        Err(e) => (http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}
