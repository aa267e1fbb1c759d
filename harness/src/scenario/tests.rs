//! The scenario loader against the files under `fixtures/`: every malformed file in
//! `fixtures/bad/` is rejected with the expected kind and key path, and its rendered error is
//! snapshotted under `golden/scenario-errors/`; every file in `fixtures/scenarios/` loads.

use std::path::{Path, PathBuf};

use rstest::rstest;

use crate::scenario::{load_scenario, ScenarioErrorKind as Kind};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness sits in the workspace")
        .to_owned()
}

/// Replaces the machine-dependent workspace path so snapshots are stable.
fn redact(text: &str) -> String {
    text.replace(&workspace().display().to_string(), "[workspace]")
}

#[rstest]
#[case::unknown_key("unknown-key", Kind::Shape, Some("turnz"))]
#[case::unknown_nested_key(
    "unknown-nested-key",
    Kind::Shape,
    Some("expect.native_heap.max_growth_per_trun")
)]
#[case::unknown_key_in_step("unknown-key-in-step", Kind::Shape, Some("turn[0].open.temprature"))]
#[case::wrong_type_turns("wrong-type-turns", Kind::Shape, Some("turns"))]
#[case::wrong_type_engine("wrong-type-engine", Kind::Shape, Some("engine"))]
#[case::zero_turns("zero-turns", Kind::Invalid, Some("turns"))]
#[case::negative_warmup("negative-warmup", Kind::Invalid, Some("warmup_turns"))]
#[case::negative_reload_every("negative-reload-every", Kind::Invalid, Some("reload_every"))]
#[case::too_many_turns("too-many-turns", Kind::Invalid, Some("turns"))]
#[case::too_many_turns_with_warmup(
    "too-many-turns-with-warmup",
    Kind::Invalid,
    Some("warmup_turns")
)]
#[case::unknown_size_unit(
    "unknown-size-unit",
    Kind::Invalid,
    Some("expect.native_heap.max_growth_per_turn")
)]
#[case::inline_profile_unit(
    "inline-profile-unit",
    Kind::Invalid,
    Some("profiles.mine.leak_per_generation")
)]
#[case::unknown_duration_unit("unknown-duration-unit", Kind::Invalid, Some("turn[4].idle"))]
#[case::negative_tolerance("negative-tolerance", Kind::Invalid, Some("expect.rss.tolerance"))]
#[case::unknown_backend("unknown-backend", Kind::Shape, Some("engine.backend"))]
#[case::unknown_profile("unknown-profile", Kind::Invalid, Some("engine.profile"))]
#[case::unknown_opencl_profile("unknown-opencl-profile", Kind::Invalid, Some("engine.profile"))]
#[case::missing_profile("missing-profile", Kind::Invalid, Some("engine.profile"))]
#[case::missing_model("missing-model", Kind::Invalid, Some("engine.model"))]
#[case::zero_threads("zero-threads", Kind::Invalid, Some("engine.threads"))]
#[case::exec_without_command("exec-without-command", Kind::Invalid, Some("engine.command"))]
#[case::exec_command_on_sim("exec-command-on-sim", Kind::Invalid, Some("engine.command"))]
#[case::missing_turns("missing-turns", Kind::Shape, Some("turns"))]
#[case::unknown_step("unknown-step", Kind::Shape, Some("turn[0]"))]
#[case::two_keys_in_step("two-keys-in-step", Kind::Shape, Some("turn[0]"))]
#[case::unknown_metric("unknown-metric", Kind::Invalid, Some("expect.native_heep"))]
#[case::unknown_watch_metric("unknown-watch-metric", Kind::Invalid, Some("watch[1]"))]
#[case::send_before_open("send-before-open", Kind::Invalid, Some("turn[0].send"))]
#[case::open_not_closed("open-not-closed", Kind::Invalid, Some("turn[0].open"))]
#[case::open_twice("open-twice", Kind::Invalid, Some("turn[1].open"))]
#[case::empty_turn("empty-turn", Kind::Invalid, Some("turn"))]
#[case::cancel_after_limit(
    "cancel-after-limit",
    Kind::Invalid,
    Some("turn[2].cancel.after_tokens")
)]
#[case::send_two_prompts("send-two-prompts", Kind::Invalid, Some("turn[1].send"))]
#[case::zero_prompt_tokens("zero-prompt-tokens", Kind::Invalid, Some("turn[1].send.tokens[1]"))]
#[case::prompt_longer_than_context(
    "prompt-longer-than-context",
    Kind::Invalid,
    Some("turn[1].send.tokens")
)]
#[case::generated_prompt_too_long(
    "generated-prompt-too-long",
    Kind::Invalid,
    Some("turn[1].send.tokens[1]")
)]
#[case::fault_after_last_turn("fault-after-last-turn", Kind::Invalid, Some("faults[0].at_turn"))]
#[case::crash_in_process("crash-in-process", Kind::Invalid, Some("faults[0].kind"))]
#[case::generate_error_real_engine(
    "generate-error-real-engine",
    Kind::Invalid,
    Some("faults[0].kind")
)]
#[case::expectation_without_limit("expectation-without-limit", Kind::Invalid, Some("expect.gpu"))]
#[case::expect_without_close_sample(
    "expect-without-close-sample",
    Kind::Invalid,
    Some("sample.after")
)]
#[case::bad_name("bad-name", Kind::Invalid, Some("name"))]
#[case::unknown_stop("unknown-stop", Kind::Shape, Some("stop"))]
#[case::zero_baseline_samples("zero-baseline-samples", Kind::Invalid, Some("sample.baseline"))]
#[case::empty("empty", Kind::Empty, None)]
#[case::comments_only("comments-only", Kind::Empty, None)]
#[case::not_a_mapping("not-a-mapping", Kind::Shape, None)]
#[case::scalar_document("scalar-document", Kind::Shape, None)]
#[case::binary_garbage("binary-garbage", Kind::Encoding, None)]
#[case::latin1_text("latin1-text", Kind::Encoding, None)]
#[case::alias_bomb("alias-bomb", Kind::TooComplex, Some("f"))]
#[case::deep_nesting("deep-nesting", Kind::TooComplex, Some("description"))]
#[case::duplicate_key("duplicate-key", Kind::DuplicateKey, Some("turns"))]
#[case::duplicate_nested_key(
    "duplicate-nested-key",
    Kind::DuplicateKey,
    Some("expect.rss.tolerance")
)]
#[case::syntax_error("syntax-error", Kind::Syntax, None)]
#[case::nul_in_comment("nul-in-comment", Kind::Encoding, None)]
#[case::next_line_in_comment("next-line-in-comment", Kind::Encoding, None)]
#[case::step_value_wrong_type(
    "step-value-wrong-type",
    Kind::Shape,
    Some("turn[1].generate.max_output_tokens")
)]
#[case::profile_size_not_a_size(
    "profile-size-not-a-size",
    Kind::Invalid,
    Some("profiles.my-phone.weights")
)]
#[case::profile_size_negative(
    "profile-size-negative",
    Kind::Invalid,
    Some("profiles.my-phone.weights")
)]
#[case::profile_size_tagged("profile-size-tagged", Kind::Shape, Some("profiles.my-phone.weights"))]
#[case::profile_place_mapping(
    "profile-place-mapping",
    Kind::Shape,
    Some("profiles.my-phone.context_on")
)]
#[case::crash_without_generation("crash-without-generation", Kind::Invalid, Some("faults[0].kind"))]
#[case::huge_name("huge-name", Kind::Invalid, Some("name"))]
#[case::two_documents("two-documents", Kind::Syntax, None)]
#[case::target_ssh_host_option("target-ssh-host-option", Kind::Invalid, Some("target.ssh.host"))]
#[case::target_ssh_bad_option(
    "target-ssh-bad-option",
    Kind::Invalid,
    Some("target.ssh.options[1]")
)]
#[case::target_ssh_proxy_command(
    "target-ssh-proxy-command",
    Kind::Invalid,
    Some("target.ssh.options[1]")
)]
#[case::target_ssh_local_command(
    "target-ssh-local-command",
    Kind::Invalid,
    Some("target.ssh.options[0]")
)]
#[case::target_ssh_known_hosts_command(
    "target-ssh-known-hosts-command",
    Kind::Invalid,
    Some("target.ssh.options[0]")
)]
#[case::target_ssh_match_exec(
    "target-ssh-match-exec",
    Kind::Invalid,
    Some("target.ssh.options[0]")
)]
#[case::target_ssh_proxy_jump(
    "target-ssh-proxy-jump",
    Kind::Invalid,
    Some("target.ssh.options[1]")
)]
#[case::target_ssh_include("target-ssh-include", Kind::Invalid, Some("target.ssh.options[0]"))]
#[case::target_ssh_option_newline(
    "target-ssh-option-newline",
    Kind::Invalid,
    Some("target.ssh.options[0]")
)]
#[case::target_ssh_host_substitution(
    "target-ssh-host-substitution",
    Kind::Invalid,
    Some("target.ssh.host")
)]
#[case::target_ssh_host_space("target-ssh-host-space", Kind::Invalid, Some("target.ssh.host"))]
#[case::target_ssh_host_quote("target-ssh-host-quote", Kind::Invalid, Some("target.ssh.host"))]
#[case::target_ssh_user_at_option(
    "target-ssh-user-at-option",
    Kind::Invalid,
    Some("target.ssh.host")
)]
#[case::target_ssh_user_twice("target-ssh-user-twice", Kind::Invalid, Some("target.ssh.user"))]
#[case::target_adb_serial_substitution(
    "target-adb-serial-substitution",
    Kind::Invalid,
    Some("target.adb.serial")
)]
#[case::target_adb_two_processes("target-adb-two-processes", Kind::Invalid, Some("target.adb"))]
#[case::target_push_without_model(
    "target-push-without-model",
    Kind::Invalid,
    Some("target.ssh.push[0]")
)]
#[case::target_remote_in_process("target-remote-in-process", Kind::Invalid, Some("engine.isolate"))]
#[case::target_unknown_kind("target-unknown-kind", Kind::Shape, Some("target"))]
#[case::target_remote_exec("target-remote-exec", Kind::Invalid, Some("target"))]
#[case::attach_without_process("attach-without-process", Kind::Invalid, Some("engine.backend"))]
#[case::attach_app_with_command("attach-app-with-command", Kind::Invalid, Some("engine.command"))]
#[case::attach_app_with_pid("attach-app-with-pid", Kind::Invalid, Some("engine.pid"))]
#[case::attach_target_ssh("attach-target-ssh", Kind::Invalid, Some("target"))]
#[case::attach_pid_reads_stdout(
    "attach-pid-reads-stdout",
    Kind::Invalid,
    Some("engine.markers.stream")
)]
#[case::attach_pattern_without_turn(
    "attach-pattern-without-turn",
    Kind::Invalid,
    Some("engine.markers.pattern")
)]
#[case::attach_bad_regex("attach-bad-regex", Kind::Invalid, Some("engine.markers.pattern"))]
#[case::attach_with_turn("attach-with-turn", Kind::Invalid, Some("turn"))]
#[case::attach_two_marker_sources(
    "attach-two-marker-sources",
    Kind::Invalid,
    Some("engine.markers.file")
)]
#[case::attach_sample_after_generate(
    "attach-sample-after-generate",
    Kind::Invalid,
    Some("sample.after[1]")
)]
#[case::command_without_attach("command-without-attach", Kind::Invalid, Some("engine.command"))]
#[case::missing_turn("missing-turn", Kind::Invalid, Some("turn"))]
fn bad_scenario_is_rejected(
    #[case] file: &str,
    #[case] kind: Kind,
    #[case] key_path: Option<&str>,
) {
    let path = workspace()
        .join("fixtures/bad")
        .join(format!("{file}.yaml"));
    let err = load_scenario(&path).expect_err("a bad scenario must not load");
    assert_eq!(err.kind(), kind, "{err}");
    assert_eq!(err.key_path(), key_path, "{err}");
    assert_eq!(err.file(), path);
    if kind != Kind::Empty {
        assert!(err.location().is_some(), "no line/column: {err}");
    }
    insta::with_settings!({
        snapshot_path => workspace().join("golden/scenario-errors"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(file, redact(&err.to_string()));
    });
}

#[test]
fn missing_file_is_a_read_error() {
    let path = workspace().join("fixtures/bad/no-such-scenario.yaml");
    let err = load_scenario(&path).unwrap_err();
    assert_eq!(err.kind(), Kind::Read);
    insta::with_settings!({
        snapshot_path => workspace().join("golden/scenario-errors"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!("missing-file", redact(&err.to_string()));
    });
}

#[test]
fn directory_is_a_read_error() {
    let err = load_scenario(&workspace().join("fixtures")).unwrap_err();
    assert_eq!(err.kind(), Kind::Read, "{err}");
}

/// Every file in `fixtures/bad/` is rejected, including ones added without a case above.
#[rstest]
fn every_bad_fixture_is_rejected(#[files("../fixtures/bad/*.yaml")] path: PathBuf) {
    let err = load_scenario(&path).expect_err("a bad scenario must not load");
    assert!(
        err.location().is_some() || matches!(err.kind(), Kind::Empty),
        "no line/column: {err}"
    );
}

/// Every file in `fixtures/scenarios/` loads.
#[rstest]
fn every_example_scenario_loads(#[files("../fixtures/scenarios/*.yaml")] path: PathBuf) {
    if let Err(err) = load_scenario(&path) {
        panic!("{err}");
    }
}

/// The example at the top of the DSL reference (docs/scenario.md) and the one in the README's
/// tour are valid scenarios.
#[test]
fn readme_example_is_valid() {
    for (page, opening) in [
        ("docs/scenario.md", "# Scenario DSL reference"),
        ("README.md", "## A five-minute tour"),
    ] {
        let text = std::fs::read_to_string(workspace().join(page)).unwrap();
        let section = text
            .split(opening)
            .nth(1)
            .unwrap_or_else(|| panic!("{page} has `{opening}`"));
        let example = section
            .split("```yaml\n")
            .nth(1)
            .and_then(|rest| rest.split("\n```").next())
            .unwrap_or_else(|| panic!("{page} shows a yaml example after `{opening}`"));
        if let Err(err) = crate::scenario::parse_scenario(example, Path::new(page)) {
            panic!("{err}");
        }
    }
}
