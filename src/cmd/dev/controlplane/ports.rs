//! The loopback ports of a control plane, reused across restarts while they are free.

use std::net::{Ipv4Addr, TcpListener};

use serde::{Deserialize, Serialize};

use super::{Layout, Result, io};

/// The loopback ports of one control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Ports {
    pub apiserver: u16,
    pub etcd_client: u16,
    pub etcd_peer: u16,
}

impl Ports {
    /// Three distinct free loopback ports.
    pub fn pick() -> Result<Self> {
        let listeners = (0..3)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(io("cannot find a free loopback port"))?;
        let port = |i: usize| -> Result<u16> {
            Ok(listeners[i]
                .local_addr()
                .map_err(io("cannot find a free loopback port"))?
                .port())
        };
        Ok(Ports {
            apiserver: port(0)?,
            etcd_client: port(1)?,
            etcd_peer: port(2)?,
        })
    }

    /// The ports used last time in this layout when they are all still free (so the server
    /// address in kubeconfigs handed out earlier keeps working), else new free ones.
    pub fn reuse_or_pick(layout: &Layout) -> Result<Self> {
        let previous: Option<Ports> = std::fs::read_to_string(layout.ports())
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok());
        if let Some(p) = previous {
            let all = [p.apiserver, p.etcd_client, p.etcd_peer];
            let bound: Vec<_> = all
                .iter()
                .map_while(|port| TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).ok())
                .collect();
            if bound.len() == all.len() {
                return Ok(p);
            }
        }
        Self::pick()
    }

    /// Records the ports in the layout for [`Ports::reuse_or_pick`].
    pub fn save(&self, layout: &Layout) -> Result<()> {
        let body = serde_json::to_string_pretty(self).expect("ports serialize");
        std::fs::write(layout.ports(), body + "\n")
            .map_err(io(format!("cannot write {}", layout.ports().display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn picked_ports_are_distinct_and_reused_when_free() {
        let dir = std::env::temp_dir().join(format!("kruntimes-ports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let layout = Layout::new(&dir);
        let ports = Ports::pick().unwrap();
        let all = [ports.apiserver, ports.etcd_client, ports.etcd_peer];
        assert!(all[0] != all[1] && all[1] != all[2] && all[0] != all[2]);
        ports.save(&layout).unwrap();
        assert_eq!(Ports::reuse_or_pick(&layout).unwrap(), ports);
        let _busy = TcpListener::bind((Ipv4Addr::LOCALHOST, ports.apiserver)).unwrap();
        assert_ne!(
            Ports::reuse_or_pick(&layout).unwrap().apiserver,
            ports.apiserver
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
