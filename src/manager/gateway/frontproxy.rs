//! Who the API server says a request is from. The gateway is an aggregated API server: the
//! API server authenticates the user, then proxies the request with its front-proxy client
//! certificate and names the user in headers (`X-Remote-User`, `X-Remote-Group`,
//! `X-Remote-Extra-*`). Those headers are believed only on a connection whose client
//! certificate chains to the request-header CA and carries one of the allowed names, all read
//! from the ConfigMap `kube-system/extension-apiserver-authentication`, as every aggregated
//! server does (k8s.io/apiserver's `RequestHeaderAuthenticationOptions`).
//!
//! [`RequestHeader::from_config_map`] and [`RequestHeader::user`] are pure; the TLS layer
//! (rustls, [`RequestHeader::client_verifier`]) proves the chain, this module the name.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::HeaderMap;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// The ConfigMap that publishes the API server's front-proxy settings.
pub const CONFIG_MAP: &str = "extension-apiserver-authentication";
/// Its namespace.
pub const CONFIG_MAP_NAMESPACE: &str = "kube-system";

/// The API server's request-header authentication settings.
#[derive(Debug, Clone)]
pub struct RequestHeader {
    pub client_ca: Vec<CertificateDer<'static>>,
    /// Common names a front-proxy certificate may have; empty: any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

/// The user a request is from, as the API server authenticated them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub name: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl RequestHeader {
    /// The settings from the ConfigMap's data, or why they cannot be used.
    pub fn from_config_map(data: &BTreeMap<String, String>) -> Result<Self, String> {
        let list = |key: &str| -> Result<Vec<String>, String> {
            match data.get(key) {
                None => Ok(Vec::new()),
                Some(json) => serde_json::from_str(json)
                    .map_err(|e| format!("{key} is not a JSON list of strings: {e}")),
            }
        };
        let pem = data
            .get("requestheader-client-ca-file")
            .filter(|pem| !pem.trim().is_empty())
            .ok_or(
                "it has no requestheader-client-ca-file: the API server runs without the aggregation layer (start kube-apiserver with --requestheader-client-ca-file and --proxy-client-cert-file)",
            )?;
        let client_ca = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("requestheader-client-ca-file is not PEM: {e}"))?;
        if client_ca.is_empty() {
            return Err("requestheader-client-ca-file holds no certificate".into());
        }
        let settings = RequestHeader {
            client_ca,
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_prefixes: list("requestheader-extra-headers-prefix")?,
        };
        if settings.username_headers.is_empty() {
            return Err("requestheader-username-headers is empty".into());
        }
        Ok(settings)
    }

    /// The client-certificate check of the TLS layer: a certificate, when one is presented,
    /// must chain to the request-header CA (a connection without one is let through, and
    /// [`RequestHeader::user`] refuses it).
    pub fn client_verifier(
        &self,
    ) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in &self.client_ca {
            roots.add(cert.clone()).map_err(|e| e.to_string())?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .allow_unauthenticated()
            .build()
            .map_err(|e| e.to_string())
    }

    /// The user of a request on a connection whose verified client certificate is `peer`
    /// (`None`: the client presented none), from the headers the settings name.
    pub fn user(
        &self,
        peer: Option<&CertificateDer<'_>>,
        headers: &HeaderMap,
    ) -> Result<User, String> {
        let Some(peer) = peer else {
            return Err("the gateway answers only the API server (no front-proxy client certificate): call it through the API server, /apis/subresources.kruntimes.io".into());
        };
        let name = common_name(peer)?;
        if !self.allowed_names.is_empty() && !self.allowed_names.contains(&name) {
            return Err(format!(
                "the client certificate's common name {name:?} is not one of requestheader-allowed-names"
            ));
        }
        let first = |names: &[String]| {
            names.iter().find_map(|h| {
                let v = headers.get(h.as_str())?.to_str().ok()?;
                (!v.is_empty()).then(|| v.to_string())
            })
        };
        let user = first(&self.username_headers)
            .ok_or("the API server named no user (no request-header username)")?;
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (header, value) in headers {
            let header = header.as_str();
            let Some(key) = self
                .extra_prefixes
                .iter()
                .find_map(|p| strip_prefix_ignore_case(header, p))
            else {
                continue;
            };
            // The key is percent-encoded in the header name (k8s.io/apiserver's
            // `unescapeExtraKey`), and lower case.
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_lowercase();
            if let Ok(value) = value.to_str() {
                extra.entry(key).or_default().push(value.to_string());
            }
        }
        Ok(User {
            name: user,
            uid: first(&self.uid_headers),
            groups,
            extra,
        })
    }
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
        .filter(|rest| !rest.is_empty())
}

/// The subject common name of a certificate.
fn common_name(cert: &CertificateDer<'_>) -> Result<String, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| format!("the client certificate cannot be read: {e}"))?;
    let cn = parsed.subject().iter_common_name().next();
    match cn.map(|cn| cn.as_str()) {
        Some(Ok(name)) => Ok(name.to_string()),
        Some(Err(_)) => Err("the client certificate's common name is not text".into()),
        None => Err("the client certificate has no common name".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn front_proxy(cn: &str) -> (String, CertificateDer<'static>) {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.clone().self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client.distinguished_name.push(DnType::CommonName, cn);
        let cert = client.signed_by(&key, &issuer).unwrap();
        (ca_cert.pem(), cert.der().clone())
    }

    fn settings(ca_pem: &str) -> RequestHeader {
        let data = BTreeMap::from([
            (
                "requestheader-client-ca-file".to_string(),
                ca_pem.to_string(),
            ),
            (
                "requestheader-allowed-names".into(),
                r#"["front-proxy-client"]"#.into(),
            ),
            (
                "requestheader-username-headers".into(),
                r#"["X-Remote-User"]"#.into(),
            ),
            (
                "requestheader-group-headers".into(),
                r#"["X-Remote-Group"]"#.into(),
            ),
            (
                "requestheader-extra-headers-prefix".into(),
                r#"["X-Remote-Extra-"]"#.into(),
            ),
        ]);
        RequestHeader::from_config_map(&data).unwrap()
    }

    #[test]
    fn the_user_comes_from_the_headers_only_on_the_front_proxys_connection() {
        let (ca, cert) = front_proxy("front-proxy-client");
        let rh = settings(&ca);
        rh.client_verifier().unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-remote-user", "alice".parse().unwrap());
        h.append("x-remote-group", "devs".parse().unwrap());
        h.append("x-remote-group", "system:authenticated".parse().unwrap());
        h.insert("x-remote-extra-scopes%2fread", "yes".parse().unwrap());
        let user = rh.user(Some(&cert), &h).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes/read"], ["yes"]);
        // No certificate: the headers are anyone's to forge.
        let err = rh.user(None, &h).unwrap_err();
        assert!(
            err.starts_with("the gateway answers only the API server"),
            "{err}"
        );
        // A certificate of that CA with another name.
        let (_, other) = front_proxy("someone-else");
        let err = rh.user(Some(&other), &h).unwrap_err();
        assert!(err.contains("\"someone-else\" is not one of"), "{err}");
        // The proxy named no user.
        let err = rh.user(Some(&cert), &HeaderMap::new()).unwrap_err();
        assert!(err.contains("named no user"), "{err}");
    }

    #[test]
    fn an_api_server_without_the_aggregation_layer_is_said_so() {
        let err = RequestHeader::from_config_map(&BTreeMap::new()).unwrap_err();
        assert!(err.contains("without the aggregation layer"), "{err}");
    }
}
