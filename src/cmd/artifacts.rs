//! `kubectl kruntimes artifacts run/NAME [--download DIR] [-o json|yaml]`: a Run's stored
//! artifacts as its `status.artifactRefs` lists them, and, with `--download`, their bytes as
//! runtimed serves them (`runtimed::artifact_server`), read through the gateway's aggregated
//! API (`runs/artifacts/NAME` in `subresources.kruntimes.io`), which asks the Run's Runtime Pod
//! or, when that one is gone, any Ready Pod the Runtime controller made for its Runtime (they
//! share the store). [`table`] is pure; the rest is an edge.

use std::path::Path;

use anyhow::{Context as _, anyhow, bail};
use futures::AsyncReadExt as _;
use kube::ResourceExt as _;

use crate::api::Run;
use crate::cmd::cli::{ArtifactsArgs, GlobalArgs};
use crate::cmd::explain::parse_target;
use crate::kubeclient::Target;
use crate::output::{Palette, Table};

/// Runs the command.
pub async fn exec(global: &GlobalArgs, args: &ArtifactsArgs) -> anyhow::Result<()> {
    let name = parse_target(&args.target, args.name.as_deref())
        .map_err(|e| anyhow!(e.said_by("artifacts")))?;
    let target = crate::kubeclient::connect(global).await?;
    let run = target.get_run(&name).await?;
    let refs = run
        .status
        .as_ref()
        .map(|s| s.artifact_refs.clone())
        .unwrap_or_default();
    if let Some(dir) = &args.download {
        return download(&target, &run, &refs, dir).await;
    }
    let printed = crate::output::Printed {
        value: &refs,
        names: refs
            .iter()
            .filter_map(|r| r.get("name").and_then(serde_json::Value::as_str))
            .map(str::to_string)
            .collect(),
        rows: "",
    };
    let text = match crate::output::render(&args.output, &printed)? {
        Some(text) => text,
        None if refs.is_empty() => {
            format!("run/{name} has no stored artifacts ({})\n", why_none(&run))
        }
        None => table(&refs, args.output.is_wide()).render(&Palette::plain()),
    };
    crate::output::write_stdout(&text).context("writing to stdout")
}

/// Why a Run lists no artifact.
fn why_none(run: &Run) -> &'static str {
    match run.phase() {
        p if !p.is_terminal() => "it has not ended; artifacts are stored when it succeeds",
        crate::api::RunPhase::Succeeded => {
            "it left none in $KRUNTIME_ARTIFACTS_DIR, or its Runtime has no spec.artifactStore"
        }
        _ => "only a Succeeded Run's artifacts are stored",
    }
}

/// NAME, TYPE, SIZE, CREATED (and DIGEST, PATH with `wide`).
pub fn table(refs: &[serde_json::Value], wide: bool) -> Table {
    let mut header = vec!["NAME", "TYPE", "SIZE", "CREATED"];
    if wide {
        header.extend(["DIGEST", "PATH"]);
    }
    let mut table = Table::new(header.into_iter().map(String::from).collect());
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_string();
    for r in refs {
        let mut row = vec![
            text(&r["name"]),
            text(&r["type"]),
            r["sizeBytes"]
                .as_u64()
                .map(|n| n.to_string())
                .unwrap_or_else(|| "-".into()),
            text(&r["createdAt"]),
        ];
        if wide {
            row.push(text(&r["digest"]));
            row.push(location(&r["location"]));
        }
        table.row(row);
    }
    table
}

/// Where a ref's bytes are: the path in the filesystem store, or the S3 object's URL.
fn location(location: &serde_json::Value) -> String {
    let s3 = &location["s3"];
    match (
        location["filesystem"]["path"].as_str(),
        s3["bucket"].as_str(),
        s3["key"].as_str(),
    ) {
        (Some(path), _, _) => path.to_string(),
        (None, Some(bucket), Some(key)) => format!("s3://{bucket}/{key}"),
        _ => "-".into(),
    }
}

/// Writes every artifact of `run` into `dir` (a directory artifact as its `.tar.gz`), checking
/// each one's size and digest.
async fn download(
    target: &Target,
    run: &Run,
    refs: &[serde_json::Value],
    dir: &Path,
) -> anyhow::Result<()> {
    let name = run.name_any();
    if refs.is_empty() {
        bail!("run/{name} has no stored artifacts ({})", why_none(run));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for r in refs {
        let artifact = r["name"].as_str().unwrap_or_default();
        crate::runtimed::artifacts::check_name(artifact)
            .map_err(|e| anyhow!("run/{name}: status.artifactRefs: {e}"))?;
        let bytes = fetch(target, &name, artifact)
            .await
            .with_context(|| format!("run/{name}: downloading artifact {artifact:?}"))?;
        let digest = crate::util::digest::sha256(&bytes);
        if r["digest"].as_str().is_some_and(|d| d != digest) {
            bail!(
                "run/{name}: artifact {artifact:?} read back with digest {digest}, not its ref's {}",
                r["digest"]
            );
        }
        let file = match r["type"].as_str() {
            Some("directory") => dir.join(format!("{artifact}.tar.gz")),
            _ => dir.join(artifact),
        };
        std::fs::write(&file, &bytes)
            .with_context(|| format!("cannot write {}", file.display()))?;
        eprintln!("{} ({} bytes)", file.display(), bytes.len());
    }
    Ok(())
}

/// The artifact's bytes, through the gateway.
async fn fetch(target: &Target, run: &str, artifact: &str) -> anyhow::Result<Vec<u8>> {
    let encoded =
        percent_encoding::utf8_percent_encode(artifact, percent_encoding::NON_ALPHANUMERIC);
    let mut body = target
        .subresource_stream(run, &format!("artifacts/{encoded}"), "the gateway")
        .await?;
    let mut bytes = Vec::new();
    body.read_to_end(&mut bytes)
        .await
        .context("reading it from the gateway")?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_lists_each_ref_and_wide_adds_digest_and_path() {
        let refs = vec![serde_json::json!({
            "name": "model", "type": "directory", "sizeBytes": 120,
            "createdAt": "2026-12-05T04:00:00Z", "digest": "sha256:ab",
            "location": {"filesystem": {"path": "namespaces/n/runs/u/model"}},
        })];
        let plain = table(&refs, false).render(&Palette::plain());
        assert_eq!(
            plain,
            "NAME    TYPE        SIZE   CREATED\nmodel   directory   120    2026-12-05T04:00:00Z\n"
        );
        let wide = table(&refs, true).render(&Palette::plain());
        assert!(
            wide.contains("sha256:ab   namespaces/n/runs/u/model"),
            "{wide}"
        );
        let s3 =
            serde_json::json!({"s3": {"bucket": "arts", "key": "p/namespaces/n/runs/u/model"}});
        assert_eq!(location(&s3), "s3://arts/p/namespaces/n/runs/u/model");
    }
}
