//! A control plane's state directory ([`Layout`]) and what it keeps there that must stay
//! private: the CA, the serving certificate and service-account keys (generated once), the
//! static token file, and files only their owner can read.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use super::{Result, io};

/// Where a control plane keeps its state under one directory.
#[derive(Debug, Clone)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }
    pub fn etcd_data(&self) -> PathBuf {
        self.root.join("etcd")
    }
    pub fn pki(&self) -> PathBuf {
        self.root.join("pki")
    }
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    pub fn ca_cert(&self) -> PathBuf {
        self.pki().join("ca.crt")
    }
    pub fn tokens(&self) -> PathBuf {
        self.pki().join("tokens.csv")
    }
    pub fn ports(&self) -> PathBuf {
        self.root.join("ports.json")
    }
}

/// An identity of the static token file (`--token-auth-file`).
#[derive(Debug, Clone)]
pub struct TokenUser {
    pub token: String,
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
}

/// Creates the CA, the kube-apiserver serving certificate (signed by the CA, with the SANs
/// `localhost` and `127.0.0.1`, so rustls verifies it) and the service-account key pair,
/// unless they already exist: a control plane restarted on the same directory keeps its
/// identity, and kubeconfigs and service-account tokens issued earlier stay valid.
pub fn ensure_pki(layout: &Layout) -> Result<()> {
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};
    let dir = layout.pki();
    let files = ["ca.crt", "serving.crt", "serving.key", "sa.key", "sa.pub"];
    if files.iter().all(|f| dir.join(f).exists()) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let ca = new_ca("kruntimes-local-ca")?;

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_string()])?;
    serving
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving_cert = serving.signed_by(&serving_key, &ca)?;
    let sa_key = KeyPair::generate()?;

    write_private(&dir.join("serving.key"), &serving_key.serialize_pem())?;
    write_private(&dir.join("sa.key"), &sa_key.serialize_pem())?;
    write_private(&dir.join("sa.pub"), &sa_key.public_key_pem())?;
    write_private(&dir.join("serving.crt"), &serving_cert.pem())?;
    // Last: its presence marks the set complete.
    write_private(&dir.join("ca.crt"), &ca.pem())
}

/// Creates the front-proxy CA and the client certificate kube-apiserver presents to aggregated
/// API servers (CN [`FRONT_PROXY_CLIENT`], signed by that CA), unless they exist. Apart from
/// [`ensure_pki`] so that a state directory made before keeps its CA and its kubeconfigs.
pub fn ensure_front_proxy(layout: &Layout) -> Result<()> {
    use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
    let dir = layout.pki();
    let files = [
        "front-proxy-ca.crt",
        "front-proxy-client.crt",
        "front-proxy-client.key",
    ];
    if files.iter().all(|f| dir.join(f).exists()) {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    let ca = new_ca("kruntimes-local-front-proxy-ca")?;
    let key = KeyPair::generate()?;
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client
        .distinguished_name
        .push(DnType::CommonName, FRONT_PROXY_CLIENT);
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = client.signed_by(&key, &ca)?;
    write_private(&dir.join("front-proxy-client.key"), &key.serialize_pem())?;
    write_private(&dir.join("front-proxy-client.crt"), &cert.pem())?;
    // Last: its presence marks the set complete.
    write_private(&dir.join("front-proxy-ca.crt"), &ca.pem())
}

/// The common name of kube-apiserver's front-proxy client certificate, the one name aggregated
/// API servers accept (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// A new self-signed certificate authority named `common_name`, with its key.
fn new_ca(common_name: &str) -> Result<rcgen::CertifiedIssuer<'static, rcgen::KeyPair>> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// Writes the static token file for kube-apiserver.
pub fn write_tokens(layout: &Layout, users: &[TokenUser]) -> Result<()> {
    let body: String = users
        .iter()
        .map(|u| {
            let mut line = format!("{},{},{}", u.token, u.name, u.uid);
            if !u.groups.is_empty() {
                line.push_str(&format!(",\"{}\"", u.groups.join(",")));
            }
            line + "\n"
        })
        .collect();
    write_private(&layout.tokens(), &body)
}

/// A random token: 32 hex digits from the operating system's generator.
pub fn random_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io("cannot read /dev/urandom"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes a file readable only by its owner (keys, tokens, kubeconfigs).
pub fn write_private(path: &Path, body: &str) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(format!("cannot write {}", path.display())))?;
    file.write_all(body.as_bytes())
        .map_err(io(format!("cannot write {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pki_is_generated_once_and_reused() {
        let dir = std::env::temp_dir().join(format!("kruntimes-pki-{}", std::process::id()));
        let layout = Layout::new(&dir);
        ensure_pki(&layout).unwrap();
        let first = std::fs::read_to_string(layout.ca_cert()).unwrap();
        ensure_pki(&layout).unwrap();
        assert_eq!(std::fs::read_to_string(layout.ca_cert()).unwrap(), first);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(layout.pki().join("serving.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn token_file_lines_carry_groups_quoted() {
        let dir = std::env::temp_dir().join(format!("kruntimes-tokens-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pki")).unwrap();
        let layout = Layout::new(&dir);
        write_tokens(
            &layout,
            &[
                TokenUser {
                    token: "t1".into(),
                    name: "admin".into(),
                    uid: "u1".into(),
                    groups: vec!["system:masters".into()],
                },
                TokenUser {
                    token: "t2".into(),
                    name: "nobody".into(),
                    uid: "u2".into(),
                    groups: vec![],
                },
            ],
        )
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(layout.tokens()).unwrap(),
            "t1,admin,u1,\"system:masters\"\nt2,nobody,u2\n"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
