use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use super::*;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name: &str| map.get(name).cloned()
}

/// 2026-12-01T00:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_796_083_200)
}

#[test]
fn sha256_matches_the_published_test_vectors_and_is_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abc.bin");
    std::fs::write(&path, b"abc").unwrap();
    let d = digest_file(&path);
    assert_eq!(
        d.sha256.as_deref(),
        Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(d.bytes, Some(3));
    // A file larger than the read buffer streams through it.
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![b'a'; DIGEST_BUFFER * 2 + 17]).unwrap();
    let first = digest_file(&big);
    assert_eq!(first.bytes, Some(DIGEST_BUFFER as u64 * 2 + 17));
    // A changed file (another size) is hashed again, not taken from the memo.
    std::fs::write(&path, b"").unwrap();
    assert_eq!(
        digest_file(&path).sha256.as_deref(),
        Some("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    );
}

#[test]
fn a_missing_file_gives_an_error_not_a_digest() {
    let d = digest_file(Path::new("/nonexistent/model.litertlm"));
    assert!(d.sha256.is_none());
    assert!(d.error.is_some());
}

#[test]
fn the_command_line_wins_over_the_environment() {
    let env = env_of(&[
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_RUN_ID", "4242"),
        ("LEAKLOOP_BUILD_DATE", "2026-11-30"),
    ]);
    let (build, ci) = resolve_build(
        Some("nightly-7"),
        Some("2026-12-01T03:04:05+01:00"),
        &env,
        now(),
    )
    .unwrap();
    assert_eq!(build.id.as_deref(), Some("nightly-7"));
    assert_eq!(build.id_source, "command line");
    assert_eq!(build.date.as_deref(), Some("2026-12-01T02:04:05Z"));
    assert_eq!(ci.unwrap().run_id.as_deref(), Some("4242"));
}

#[rstest::rstest]
#[case::github(
    &[("GITHUB_ACTIONS", "true"), ("GITHUB_RUN_ID", "99"), ("GITHUB_RUN_ATTEMPT", "2"),
      ("GITHUB_SHA", "abc123"), ("GITHUB_REF_NAME", "main"),
      ("GITHUB_SERVER_URL", "https://github.com"), ("GITHUB_REPOSITORY", "o/r")],
    "github-actions", "99.2", Some("https://github.com/o/r/actions/runs/99"), "2026-12-01T00:00:00Z"
)]
#[case::gitlab(
    &[("GITLAB_CI", "true"), ("CI_PIPELINE_ID", "7"), ("CI_COMMIT_SHA", "abc123"),
      ("CI_COMMIT_REF_NAME", "main"), ("CI_PIPELINE_URL", "https://gl/p/7"),
      ("CI_PIPELINE_CREATED_AT", "2026-11-30T22:00:00Z")],
    "gitlab-ci", "7", Some("https://gl/p/7"), "2026-11-30T22:00:00Z"
)]
#[case::jenkins(
    &[("JENKINS_URL", "https://j/"), ("BUILD_TAG", "jenkins-nightly-12"), ("GIT_COMMIT", "abc123"),
      ("GIT_BRANCH", "main"), ("BUILD_URL", "https://j/job/12/")],
    "jenkins", "jenkins-nightly-12", Some("https://j/job/12/"), "2026-12-01T00:00:00Z"
)]
#[case::buildkite(
    &[("BUILDKITE", "true"), ("BUILDKITE_BUILD_NUMBER", "31"), ("BUILDKITE_COMMIT", "abc123"),
      ("BUILDKITE_BRANCH", "main"), ("BUILDKITE_BUILD_URL", "https://bk/31")],
    "buildkite", "31", Some("https://bk/31"), "2026-12-01T00:00:00Z"
)]
fn ci_systems_give_the_build_id_and_commit(
    #[case] vars: &[(&str, &str)],
    #[case] system: &str,
    #[case] id: &str,
    #[case] url: Option<&str>,
    #[case] date: &str,
) {
    let env = env_of(vars);
    let (build, ci) = resolve_build(None, None, &env, now()).unwrap();
    let ci = ci.expect("recognised");
    assert_eq!(ci.system, system);
    assert_eq!(ci.commit.as_deref(), Some("abc123"));
    assert_eq!(ci.branch.as_deref(), Some("main"));
    assert_eq!(ci.url.as_deref(), url);
    assert_eq!(build.id.as_deref(), Some(id));
    assert_eq!(build.date.as_deref(), Some(date));
}

#[test]
fn without_ci_or_flags_the_date_is_the_run_start_and_there_is_no_id() {
    let env = env_of(&[]);
    let (build, ci) = resolve_build(None, None, &env, now()).unwrap();
    assert!(ci.is_none());
    assert_eq!(build.id, None);
    assert_eq!(build.id_source, "none");
    assert_eq!(build.date.as_deref(), Some("2026-12-01T00:00:00Z"));
    assert_eq!(build.date_source, "run start");
}

#[rstest::rstest]
#[case::empty_id(Some(""), None, "--build-id: a build id cannot be empty")]
#[case::escape_in_id(
    Some("a\u{1b}[31m"),
    None,
    "--build-id: a build id cannot hold control characters (found \\u{1b})"
)]
#[case::bad_date(None, Some("yesterday"), "--build-date: `yesterday` is not a date: expected RFC 3339 such as 2026-12-01T02:00:00Z, or 2026-12-01")]
fn bad_flags_are_named(
    #[case] id: Option<&str>,
    #[case] date: Option<&str>,
    #[case] message: &str,
) {
    let env = env_of(&[]);
    assert_eq!(resolve_build(id, date, &env, now()).unwrap_err(), message);
}

#[test]
fn a_long_build_id_is_refused_and_a_long_env_value_shortened() {
    let long = "x".repeat(MAX_BUILD_ID_CHARS + 1);
    assert!(check_build_id(&long).is_err());
    let env = env_of(&[(BUILD_ID_VAR, long.as_str())]);
    let (build, _) = resolve_build(None, None, &env, now()).unwrap();
    assert!(build.id.unwrap().chars().count() <= MAX_BUILD_ID_CHARS);
}

#[test]
fn collect_hashes_the_scenario_file_and_describes_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.yaml");
    std::fs::write(&path, b"abc").unwrap();
    let (mut record, _) = crate::report::examples::clean_run();
    record.scenario.source = Some(path);
    let p = collect(
        &record.scenario,
        &record.backend,
        &BuildStamp::default(),
        None,
    );
    assert_eq!(p.leakloop_version, LEAKLOOP_VERSION);
    assert_eq!(
        p.scenario.unwrap().sha256.as_deref(),
        Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    );
    assert_eq!(p.engine.backend, record.backend.backend);
    assert!(!p.host.arch.is_empty());
    assert!(!p.host.os.is_empty());
}

#[test]
fn a_driver_is_named_by_its_command_and_its_free_form_details_are_not_hashed() {
    let (mut record, _) = crate::report::examples::clean_run();
    record.scenario.engine = crate::scenario::EngineSpec::exec(crate::scenario::ExecSpec::new([
        "python3",
        "drivers/my_driver.py",
    ]));
    record.backend.backend = "my-driver".into();
    record.backend.details = BTreeMap::from([
        ("model".to_owned(), "tiny model, 2 layers".to_owned()),
        ("library".to_owned(), "ai-edge-litert".to_owned()),
    ]);
    let p = collect(
        &record.scenario,
        &record.backend,
        &BuildStamp::default(),
        None,
    );
    assert_eq!(p.model, None);
    assert_eq!(p.engine.library, None);
    assert_eq!(
        p.engine.driver.as_deref(),
        Some("python3 drivers/my_driver.py")
    );
    let engine = describe(&p)
        .into_iter()
        .find(|(label, _)| *label == "engine")
        .unwrap()
        .1;
    assert!(
        engine.ends_with(", exec: python3 drivers/my_driver.py"),
        "{engine}"
    );
    assert!(!engine.contains("built in"), "{engine}");
    // The scenario's own model is the one recorded.
    record.scenario.engine.model = Some("/nonexistent/tiny.bin".into());
    let p = collect(
        &record.scenario,
        &record.backend,
        &BuildStamp::default(),
        None,
    );
    assert_eq!(p.model.unwrap().path, "/nonexistent/tiny.bin");
}
