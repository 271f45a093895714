//! What a request to the gateway asks for: the discovery documents of
//! `subresources.kruntimes.io/v1alpha1`, or one call on a Run's subresource, with the verb the
//! API server authorised it as. Pure: a method and a path in, a [`Route`] out.

use http::Method;

use crate::api::{SUBRESOURCES_GROUP, SUBRESOURCES_VERSION, is_object_name};

/// One call on a Run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub namespace: String,
    pub run: String,
    pub what: What,
}

/// The subresource a call asks of its Run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// `GET runs/NAME/log` (`follow`, `tailLines`).
    Log,
    /// `POST runs/NAME/invoke`.
    Invoke,
    /// `GET runs/NAME/artifacts`: the Run's `status.artifactRefs`.
    ArtifactList,
    /// `GET runs/NAME/artifacts/ARTIFACT`: one artifact's bytes.
    Artifact(String),
}

impl What {
    /// The subresource RBAC names (`runs/<this>` in the group).
    pub fn subresource(&self) -> &'static str {
        match self {
            What::Log => "log",
            What::Invoke => "invoke",
            What::ArtifactList | What::Artifact(_) => "artifacts",
        }
    }

    /// The verb the API server authorised the request as (its RequestInfo: POST is `create`).
    pub fn verb(&self) -> &'static str {
        match self {
            What::Invoke => "create",
            What::Log | What::ArtifactList | What::Artifact(_) => "get",
        }
    }
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `GET /apis/subresources.kruntimes.io`: the APIGroup.
    Group,
    /// `GET /apis/subresources.kruntimes.io/v1alpha1`: the APIResourceList.
    Resources,
    Call(Call),
    /// A path the gateway does not serve, or a name that is no object name.
    NotFound(String),
    /// A served path with a method it does not take; the one it takes.
    MethodNotAllowed(&'static str),
}

/// The route of `method` on `path` (percent-encoded, as it came).
pub fn parse(method: &Method, path: &str) -> Route {
    let group = format!("/apis/{SUBRESOURCES_GROUP}");
    let Some(rest) = path.strip_prefix(&group) else {
        return Route::NotFound(format!("the gateway serves only {group}"));
    };
    let rest = rest.trim_end_matches('/');
    let get_only = |route: Route| match *method == Method::GET {
        true => route,
        false => Route::MethodNotAllowed("GET"),
    };
    if rest.is_empty() {
        return get_only(Route::Group);
    }
    let Some(rest) = rest.strip_prefix(&format!("/{SUBRESOURCES_VERSION}")) else {
        return Route::NotFound(format!(
            "{group} serves version {SUBRESOURCES_VERSION} only"
        ));
    };
    if rest.is_empty() {
        return get_only(Route::Resources);
    }
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let (namespace, run, sub, tail) = match parts.as_slice() {
        ["namespaces", ns, "runs", run, sub, tail @ ..] => (*ns, *run, *sub, tail),
        _ => {
            return Route::NotFound(
                "the gateway serves namespaces/NS/runs/NAME/{log,invoke,artifacts}".into(),
            );
        }
    };
    for (what, value) in [("namespace", namespace), ("Run name", run)] {
        if !is_object_name(value) {
            return Route::NotFound(format!("{value:?} is not a {what}"));
        }
    }
    let (what, takes) = match (sub, tail) {
        ("log", []) => (What::Log, Method::GET),
        ("invoke", []) => (What::Invoke, Method::POST),
        ("artifacts", []) => (What::ArtifactList, Method::GET),
        ("artifacts", [artifact]) => {
            let decoded = percent_encoding::percent_decode_str(artifact).decode_utf8();
            match decoded {
                Ok(name) if !name.is_empty() && !name.contains('/') && name != ".." => {
                    (What::Artifact(name.into_owned()), Method::GET)
                }
                _ => return Route::NotFound(format!("{artifact:?} is not an artifact name")),
            }
        }
        _ => {
            return Route::NotFound(format!(
                "runs/{sub} is not a subresource the gateway serves (log, invoke, artifacts)"
            ));
        }
    };
    if *method != takes {
        return Route::MethodNotAllowed(if takes == Method::GET { "GET" } else { "POST" });
    }
    Route::Call(Call {
        namespace: namespace.into(),
        run: run.into(),
        what,
    })
}

/// The APIGroup document.
pub fn group_document() -> serde_json::Value {
    let gv = format!("{SUBRESOURCES_GROUP}/{SUBRESOURCES_VERSION}");
    serde_json::json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": SUBRESOURCES_GROUP,
        "versions": [{"groupVersion": gv, "version": SUBRESOURCES_VERSION}],
        "preferredVersion": {"groupVersion": gv, "version": SUBRESOURCES_VERSION},
    })
}

/// The APIResourceList document: three subresources of `runs`, as KubeVirt's
/// `subresources.kubevirt.io` lists its own.
pub fn resources_document() -> serde_json::Value {
    let sub = |what: What| {
        serde_json::json!({
            "name": format!("runs/{}", what.subresource()),
            "singularName": "",
            "namespaced": true,
            "kind": "Run",
            "verbs": [what.verb()],
        })
    };
    serde_json::json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{SUBRESOURCES_GROUP}/{SUBRESOURCES_VERSION}"),
        "resources": [sub(What::Log), sub(What::Invoke), sub(What::ArtifactList)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "/apis/subresources.kruntimes.io/v1alpha1";

    fn call(ns: &str, run: &str, what: What) -> Route {
        Route::Call(Call {
            namespace: ns.into(),
            run: run.into(),
            what,
        })
    }

    #[test]
    fn each_subresource_has_its_path_and_method() {
        let at = |m: Method, p: &str| parse(&m, &format!("{BASE}{p}"));
        assert_eq!(
            at(Method::GET, "/namespaces/ml/runs/train/log"),
            call("ml", "train", What::Log)
        );
        assert_eq!(
            at(Method::POST, "/namespaces/ml/runs/fn/invoke"),
            call("ml", "fn", What::Invoke)
        );
        assert_eq!(
            at(Method::GET, "/namespaces/ml/runs/t/artifacts"),
            call("ml", "t", What::ArtifactList)
        );
        assert_eq!(
            at(Method::GET, "/namespaces/ml/runs/t/artifacts/model%2Ebin"),
            call("ml", "t", What::Artifact("model.bin".into()))
        );
        assert_eq!(
            at(Method::GET, "/namespaces/ml/runs/fn/invoke"),
            Route::MethodNotAllowed("POST")
        );
        assert_eq!(
            at(Method::DELETE, "/namespaces/ml/runs/t/log"),
            Route::MethodNotAllowed("GET")
        );
        assert_eq!(parse(&Method::GET, BASE), Route::Resources);
        assert_eq!(
            parse(&Method::GET, "/apis/subresources.kruntimes.io/"),
            Route::Group
        );
        assert_eq!(What::Invoke.verb(), "create");
        assert_eq!(What::Artifact("a".into()).subresource(), "artifacts");
    }

    #[test]
    fn names_that_are_no_object_names_and_other_paths_are_not_found() {
        for path in [
            format!("{BASE}/namespaces/ML/runs/t/log"),
            format!("{BASE}/namespaces/ml/runs/..%2Fx/log"),
            format!("{BASE}/namespaces/ml/runs/t/artifacts/a%2Fb"),
            format!("{BASE}/namespaces/ml/runs/t/artifacts/.."),
            format!("{BASE}/namespaces/ml/runs/t/exec"),
            format!("{BASE}/namespaces/ml/runs/t/log/extra"),
            format!("{BASE}/runs/t/log"),
            "/apis/subresources.kruntimes.io/v2".to_string(),
            "/api/v1/pods".to_string(),
        ] {
            assert!(
                matches!(parse(&Method::GET, &path), Route::NotFound(_)),
                "{path}: {:?}",
                parse(&Method::GET, &path)
            );
        }
    }
}
