//! `kubectl-kruntimes copy-binary PATH`: the init container of a Runtime Pod (see
//! [`crate::runtime::pod`]) copies the running executable into the Pod's binary volume. The
//! kruntimes image is `FROM scratch`, so the init container has no `cp`. Owns that file write
//! and nothing else.

use std::os::unix::fs::PermissionsExt as _;

use anyhow::Context as _;

use crate::cmd::cli::CopyBinaryArgs;

/// Copies the running executable to `args.to` (mode 0755), through a temporary file so a
/// half-written binary is never executed.
pub fn exec(args: &CopyBinaryArgs) -> anyhow::Result<()> {
    let to = &args.to;
    let me = std::env::current_exe().context("cannot find this executable")?;
    let tmp = to.with_extension("tmp");
    std::fs::copy(&me, &tmp)
        .with_context(|| format!("cannot copy {} to {}", me.display(), tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", tmp.display()))?;
    std::fs::rename(&tmp, to)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), to.display()))?;
    Ok(())
}
