//! Running kruntimes on one machine: [`controlplane`] builds and starts etcd and
//! kube-apiserver, for the integration tests and (next) for `kubectl kruntimes dev`.

pub mod controlplane;
