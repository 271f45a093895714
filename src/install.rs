//! `kubectl kruntimes install`: applies the Runtime and Run CRDs and waits for them.
//!
//! Owns the CRD rendering (from the Rust types) and their server-side apply. It never touches
//! anything but CustomResourceDefinitions.

use std::io::{IsTerminal, Write};

use anyhow::{Context, anyhow};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResourceExt, ResourceExt};

use crate::api::{FIELD_MANAGER, Run, Runtime};
use crate::cli::{GlobalArgs, InstallArgs};
use crate::kubeclient::{self, Target};

/// The two CRDs, generated from the Rust types, Runtime first.
pub fn crds() -> [CustomResourceDefinition; 2] {
    [Runtime::crd(), Run::crd()]
}

/// Both CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd).context("cannot render a CRD as YAML")?);
    }
    Ok(out)
}

/// What the apply did to one CRD, in kubectl's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    Configured,
    Unchanged,
}

impl Applied {
    fn as_str(self) -> &'static str {
        match self {
            Applied::Created => "created",
            Applied::Configured => "configured",
            Applied::Unchanged => "unchanged",
        }
    }
}

pub async fn exec(global: &GlobalArgs, args: &InstallArgs) -> anyhow::Result<()> {
    if args.print {
        print!("{}", crds_yaml()?);
        return Ok(());
    }
    let target = kubeclient::connect(global).await?;
    if !args.dry_run && !args.yes {
        confirm(&target)?;
    }
    let results = apply(&target, args.dry_run).await?;
    let mut stdout = std::io::stdout().lock();
    let suffix = if args.dry_run {
        " (server dry run)"
    } else {
        ""
    };
    for (name, applied) in &results {
        writeln!(
            stdout,
            "customresourcedefinition.apiextensions.k8s.io/{name} {}{suffix}",
            applied.as_str()
        )?;
    }
    if args.dry_run {
        return Ok(());
    }
    wait_established(&target, args.timeout).await?;
    writeln!(
        stdout,
        "kruntimes CRDs are established in {}",
        target.describe()
    )?;
    Ok(())
}

fn confirm(target: &Target) -> anyhow::Result<()> {
    let question = format!(
        "Install the kruntimes CRDs (runtimes.kruntimes.io, runs.kruntimes.io) into {}?",
        target.describe()
    );
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Err(anyhow!(
            "refusing to install into {} without confirmation: not running on a terminal; pass --yes to confirm",
            target.describe()
        ));
    }
    let yes = dialoguer::Confirm::new()
        .with_prompt(question)
        .default(false)
        .interact()
        .context("cannot read the confirmation")?;
    if yes {
        Ok(())
    } else {
        Err(anyhow!("install cancelled; nothing was changed"))
    }
}

/// Server-side applies both CRDs (or dry-runs them) and reports what changed.
pub async fn apply(target: &Target, dry_run: bool) -> anyhow::Result<Vec<(String, Applied)>> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    let mut params = PatchParams::apply(FIELD_MANAGER).force();
    params.dry_run = dry_run;
    let mut results = Vec::new();
    for crd in crds() {
        let name = crd.name_any();
        let before = api
            .get_opt(&name)
            .await
            .map_err(|e| target.explain_error(e, &format!("cannot read CRD {name}")))?;
        let after = api
            .patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|e| target.explain_error(e, &format!("cannot apply CRD {name}")))?;
        let applied = match before {
            None => Applied::Created,
            Some(before) if before.resource_version() == after.resource_version() => {
                Applied::Unchanged
            }
            Some(_) => Applied::Configured,
        };
        results.push((name, applied));
    }
    Ok(results)
}

/// Waits until both CRDs report `Established`.
pub async fn wait_established(target: &Target, timeout: std::time::Duration) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(target.client.clone());
    for crd in crds() {
        let name = crd.name_any();
        let wait = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(anyhow!(
                    "waiting for CRD {name} to become Established failed: {e}"
                ));
            }
            Err(_) => {
                return Err(anyhow!(
                    "CRD {name} was applied but is not Established after {}s; check `kubectl describe crd {name}` or raise --timeout",
                    timeout.as_secs()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_yaml_holds_exactly_the_two_crds() {
        let yaml = crds_yaml().unwrap();
        let docs: Vec<CustomResourceDefinition> = serde_yaml::Deserializer::from_str(&yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let names: Vec<_> = docs.iter().map(|c| c.name_any()).collect();
        assert_eq!(names, ["runtimes.kruntimes.io", "runs.kruntimes.io"]);
    }
}
