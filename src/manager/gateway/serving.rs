//! The gateway's serving certificate, which the API server checks against the APIService's
//! `caBundle`. Either a PEM pair from a directory (`--gateway-cert-dir`: a Secret mounted
//! there by cert-manager, whose CA injector fills the `caBundle`), or one the gateway keeps
//! itself: a CA and a certificate for the Service's DNS names in the Secret [`SECRET`] of its
//! namespace, made by the first replica that finds none, renewed from the same CA when a
//! third of its life is left (so the `caBundle` never changes under the other replica), and
//! the CA written to the APIService's `caBundle`. Re-read by every replica on each refresh.
//!
//! [`plan`] decides from what the Secret holds and the time; the rest reads and writes it.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, anyhow};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The Secret that keeps the self-made CA and certificate.
pub const SECRET: &str = "kubectl-kruntimes-gateway-tls";
/// The Service in front of the gateway, whose DNS name the certificate carries.
pub const SERVICE: &str = "kubectl-kruntimes-gateway";
/// The APIService of the gateway's group and version.
pub const APISERVICE: &str = "v1alpha1.subresources.kruntimes.io";
/// How long a self-made certificate is valid.
pub const CERT_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long the self-made CA is valid.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A certificate chain and its key, to serve.
pub struct Serving {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// The DNS names of the Service in `namespace`.
pub fn dns_names(namespace: &str) -> Vec<String> {
    vec![
        format!("{SERVICE}.{namespace}.svc"),
        format!("{SERVICE}.{namespace}.svc.cluster.local"),
    ]
}

/// What to do with what the Secret holds (its `ca.crt`, `ca.key`, `tls.crt`, `tls.key`).
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Serve it as it is.
    Keep,
    /// Issue a new certificate from the CA it holds.
    Renew,
    /// Make a CA and a certificate (none yet, unreadable, or a CA near its end).
    Create,
}

/// The plan for `data` at `now`: renew a certificate with a third of its life left or
/// without `names`, make all anew when the CA is missing or has a third of its life left.
pub fn plan(data: &BTreeMap<String, ByteString>, names: &[String], now: SystemTime) -> Plan {
    let read = |key: &str| data.get(key).and_then(|b| Facts::of_pem(&b.0));
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let fresh = |f: &Facts| {
        let third = (f.not_after - f.not_before) / 3;
        now >= f.not_before && now + third < f.not_after
    };
    match (read("ca.crt"), data.get("ca.key")) {
        (Some(ca), Some(_)) if fresh(&ca) => {}
        _ => return Plan::Create,
    }
    match (read("tls.crt"), data.get("tls.key")) {
        (Some(cert), Some(_))
            if fresh(&cert) && names.iter().all(|n| cert.dns_names.contains(n)) =>
        {
            Plan::Keep
        }
        _ => Plan::Renew,
    }
}

/// What [`plan`] reads of a certificate: its validity (Unix seconds) and DNS names.
struct Facts {
    not_before: i64,
    not_after: i64,
    dns_names: Vec<String>,
}

impl Facts {
    fn of_pem(pem: &[u8]) -> Option<Facts> {
        let der = CertificateDer::from_pem_slice(pem).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
        let validity = cert.validity();
        let dns_names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Some(Facts {
            not_before: validity.not_before.timestamp(),
            not_after: validity.not_after.timestamp(),
            dns_names,
        })
    }
}

/// A new CA (PEM certificate and key).
fn new_ca(now: SystemTime) -> anyhow::Result<(String, String)> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "kubectl-kruntimes-gateway-ca");
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now.into();
    params.not_after = (now + CA_LIFETIME).into();
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A certificate for `names` issued by the CA (PEM certificate and key).
fn issue(
    ca_pem: &str,
    ca_key_pem: &str,
    names: &[String],
    now: SystemTime,
) -> anyhow::Result<(String, String)> {
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair};
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().map(String::as_str).unwrap_or(SERVICE),
    );
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now.into();
    params.not_after = (now + CERT_LIFETIME).into();
    let cert = params.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// `data` with what `plan` says made.
fn carry_out(
    plan: &Plan,
    mut data: BTreeMap<String, ByteString>,
    names: &[String],
    now: SystemTime,
) -> anyhow::Result<BTreeMap<String, ByteString>> {
    let mut put = |k: &str, v: String| {
        data.insert(k.to_string(), ByteString(v.into_bytes()));
    };
    let text = |d: &BTreeMap<String, ByteString>, k: &str| {
        d.get(k)
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default()
    };
    let (ca, ca_key) = match plan {
        Plan::Keep => return Ok(data),
        Plan::Create => {
            let (ca, key) = new_ca(now)?;
            put("ca.crt", ca.clone());
            put("ca.key", key.clone());
            (ca, key)
        }
        Plan::Renew => (text(&data, "ca.crt"), text(&data, "ca.key")),
    };
    let (cert, key) = issue(&ca, &ca_key, names, now)?;
    data.insert("tls.crt".into(), ByteString(cert.into_bytes()));
    data.insert("tls.key".into(), ByteString(key.into_bytes()));
    Ok(data)
}

/// The serving pair of `dir` (`tls.crt`, `tls.key`).
pub fn from_dir(dir: &Path) -> anyhow::Result<Serving> {
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    let chain = CertificateDer::pem_file_iter(&crt)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            anyhow!(
                "cannot read the gateway's certificate {}: {e}",
                crt.display()
            )
        })?;
    if chain.is_empty() {
        return Err(anyhow!("{} holds no PEM certificate", crt.display()));
    }
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| anyhow!("cannot read the gateway's key {}: {e}", key.display()))?;
    Ok(Serving { chain, key })
}

/// The self-kept pair: reads the Secret of `namespace`, makes or renews what [`plan`] says
/// (a replica that loses the race to write it reads the winner's), writes the CA to the
/// APIService's `caBundle` when it differs, and returns the pair to serve.
pub async fn self_kept(client: &kube::Client, namespace: &str) -> anyhow::Result<Serving> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let names = dns_names(namespace);
    let mut attempts = 0;
    let data = loop {
        attempts += 1;
        let found = secrets
            .get_opt(SECRET)
            .await
            .with_context(|| format!("reading Secret {namespace}/{SECRET}"))?;
        let now = SystemTime::now();
        let held = found
            .as_ref()
            .and_then(|s| s.data.clone())
            .unwrap_or_default();
        let plan = plan(&held, &names, now);
        if plan == Plan::Keep {
            break held;
        }
        let data = carry_out(&plan, held, &names, now)?;
        let written = match found {
            None => {
                let secret = Secret {
                    metadata: kube::api::ObjectMeta {
                        name: Some(SECRET.into()),
                        labels: Some(BTreeMap::from([(
                            "app.kubernetes.io/part-of".to_string(),
                            "kruntimes".to_string(),
                        )])),
                        ..Default::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    data: Some(data.clone()),
                    ..Default::default()
                };
                secrets.create(&PostParams::default(), &secret).await
            }
            Some(mut secret) => {
                // Replaced at the version read: another replica's write in between is a 409.
                secret.data = Some(data.clone());
                secrets
                    .replace(SECRET, &PostParams::default(), &secret)
                    .await
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(
                    secret = SECRET,
                    ?plan,
                    "the gateway's serving certificate was written"
                );
                break data;
            }
            Err(kube::Error::Api(s)) if (s.code == 409) && attempts < 5 => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("writing Secret {namespace}/{SECRET}"));
            }
        }
    };
    let pem = |k: &str| data.get(k).map(|b| b.0.clone()).unwrap_or_default();
    inject_ca_bundle(client, &pem("ca.crt")).await?;
    let chain = CertificateDer::pem_slice_iter(&pem("tls.crt"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("Secret {SECRET}'s tls.crt: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(&pem("tls.key"))
        .map_err(|e| anyhow!("Secret {SECRET}'s tls.key: {e}"))?;
    Ok(Serving { chain, key })
}

/// Writes `ca` to the APIService's `caBundle` if it holds something else. A missing APIService
/// is said once in the log: the gateway serves, and the API server does not route to it.
async fn inject_ca_bundle(client: &kube::Client, ca: &[u8]) -> anyhow::Result<()> {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    let services: Api<APIService> = Api::all(client.clone());
    let Some(service) = services
        .get_opt(APISERVICE)
        .await
        .with_context(|| format!("reading APIService {APISERVICE}"))?
    else {
        tracing::warn!(
            "APIService {APISERVICE} does not exist: the API server does not route to the gateway (kubectl kruntimes install, or kubectl apply -k deploy/)"
        );
        return Ok(());
    };
    let held = service.spec.and_then(|s| s.ca_bundle).map(|b| b.0);
    if held.as_deref() == Some(ca) {
        return Ok(());
    }
    let patch = serde_json::json!({"spec": {"caBundle": ByteString(ca.to_vec())}});
    services
        .patch(APISERVICE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("writing the caBundle of APIService {APISERVICE}"))?;
    tracing::info!("wrote the gateway's CA to APIService {APISERVICE}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[test]
    fn made_once_kept_renewed_at_two_thirds_and_made_anew_when_the_ca_ages() {
        let names = dns_names("kubectl-kruntimes");
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let empty = BTreeMap::new();
        assert_eq!(plan(&empty, &names, t0), Plan::Create);
        let made = carry_out(&Plan::Create, empty, &names, t0).unwrap();
        assert_eq!(plan(&made, &names, t0), Plan::Keep);
        assert_eq!(plan(&made, &names, t0 + 200 * DAY), Plan::Keep);
        // A third of the certificate's life left: renewed, from the same CA.
        let late = t0 + 250 * DAY;
        assert_eq!(plan(&made, &names, late), Plan::Renew);
        let renewed = carry_out(&Plan::Renew, made.clone(), &names, late).unwrap();
        assert_eq!(renewed["ca.crt"], made["ca.crt"], "the caBundle stays");
        assert_ne!(renewed["tls.crt"], made["tls.crt"]);
        assert_eq!(plan(&renewed, &names, late), Plan::Keep);
        // Another namespace's names: renewed for them.
        assert_eq!(plan(&renewed, &dns_names("elsewhere"), late), Plan::Renew);
        // The CA near its end, or unreadable: all anew.
        assert_eq!(plan(&renewed, &names, t0 + 2500 * DAY), Plan::Create);
        let mut broken = renewed.clone();
        broken.insert("ca.crt".into(), ByteString(b"junk".to_vec()));
        assert_eq!(plan(&broken, &names, late), Plan::Create);
        // What it made serves.
        let chain = CertificateDer::pem_slice_iter(&renewed["tls.crt"].0)
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(&renewed["tls.key"].0).unwrap();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
    }
}
