use super::*;
use filesystem::Filesystem;

const LIMITS: Limits = Limits {
    max_artifact_bytes: 1000,
    max_total_bytes: 1500,
};

fn store(root: &Path) -> Filesystem {
    Filesystem {
        root: root.to_path_buf(),
        volume_claim: "artifacts".into(),
    }
}

fn run(uid: &str) -> RunKey {
    RunKey {
        namespace: "ns".into(),
        name: "r".into(),
        uid: uid.into(),
    }
}

#[test]
fn names_are_single_path_segments() {
    for ok in ["report.txt", "model", "a b"] {
        assert_eq!(check_name(ok), Ok(()));
    }
    for bad in ["", ".", "..", "a/b", "a\\b", &"x".repeat(256)] {
        assert!(check_name(bad).is_err(), "{bad}");
    }
}

#[test]
fn files_and_directories_are_stored_with_size_digest_and_type() {
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("staging");
    std::fs::create_dir_all(staging.join("model/layers")).unwrap();
    std::fs::write(staging.join("report.json"), "{}").unwrap();
    std::fs::write(staging.join("model/layers/1"), "weights").unwrap();
    let s = store(&tmp.path().join("store"));
    let refs = s.collect(&staging, &run("u1"), LIMITS).unwrap();
    assert_eq!(refs.len(), 2);
    let (model, report) = (&refs[0], &refs[1]);
    assert_eq!(report["name"], "report.json");
    assert_eq!(report["type"], "file");
    assert_eq!(report["sizeBytes"], 2);
    assert_eq!(report["contentType"], "application/json");
    assert_eq!(
        report["digest"],
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    assert_eq!(
        report["location"]["filesystem"]["path"],
        "namespaces/ns/runs/u1/report.json"
    );
    assert_eq!(
        std::fs::read_to_string(s.root.join("namespaces/ns/runs/u1/report.json")).unwrap(),
        "{}"
    );
    assert_eq!(model["type"], "directory");
    assert_eq!(model["contentType"], DIRECTORY_CONTENT_TYPE);
    // The archive holds the tree, and the same tree gives the same archive.
    let bytes = std::fs::read(s.root.join("namespaces/ns/runs/u1/model")).unwrap();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
    let paths: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert_eq!(paths, ["layers", "layers/1"]);
    let again = s.collect(&staging, &run("u2"), LIMITS).unwrap();
    assert_eq!(again[0]["digest"], model["digest"]);
}

#[test]
fn breaking_a_bound_is_invalid_and_leaves_nothing_stored() {
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let s = store(&tmp.path().join("store"));
    std::fs::write(staging.join("a"), vec![0u8; 800]).unwrap();
    std::fs::write(staging.join("b"), vec![0u8; 800]).unwrap();
    let err = s.collect(&staging, &run("u1"), LIMITS).unwrap_err();
    assert!(
        matches!(&err, ArtifactError::Invalid(m) if m.contains("\"b\" is larger than 700 bytes")),
        "{err}"
    );
    assert!(!s.root.join("namespaces/ns/runs/u1").exists());
    std::fs::remove_file(staging.join("b")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", staging.join("link")).unwrap();
    let err = s.collect(&staging, &run("u1"), LIMITS).unwrap_err();
    assert!(
        matches!(&err, ArtifactError::Invalid(m) if m.contains("symbolic")),
        "{err}"
    );
    std::fs::remove_file(staging.join("link")).unwrap();
    for i in 0..MAX_REFS {
        std::fs::write(staging.join(format!("f{i}")), "").unwrap();
    }
    let err = s.collect(&staging, &run("u1"), LIMITS).unwrap_err();
    assert!(
        matches!(&err, ArtifactError::Invalid(m) if m.contains("33 artifacts")),
        "{err}"
    );
}

#[test]
fn garbage_is_the_artifacts_of_runs_that_no_longer_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let s = store(tmp.path());
    for uid in ["kept", "gone"] {
        std::fs::create_dir_all(tmp.path().join(run_path("ns", uid))).unwrap();
    }
    let stored = s.stored_runs("ns");
    assert_eq!(stored, ["gone", "kept"]);
    let existing = HashSet::from(["kept".to_string()]);
    let gone = garbage(&stored, &existing);
    assert_eq!(gone, ["gone"]);
    assert_eq!(s.remove_run("ns", &gone[0]), Ok(true));
    assert_eq!(s.remove_run("ns", &gone[0]), Ok(false));
    assert_eq!(s.stored_runs("ns"), ["kept"]);
}
