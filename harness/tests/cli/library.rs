//! Where `leakloop run` takes the LiteRT-LM library from when no `--lib`, `engine.lib` or
//! `LITERT_LM_LIB` names one: only folders the binary owns, never the working directory's.

use std::path::Path;

use leakloop::report::read_report;

use crate::common::leakloop_command;

/// Regression: a `liblitert-lm.so` planted in `target/litert-lm/<version>/` of a folder above the
/// working directory (`/tmp/target/...` for anyone working under /tmp) was loaded before the
/// project's own and reported as `fetched`.
#[test]
fn a_library_planted_above_the_working_directory_is_not_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let planted_dir = tmp.path().join("target/litert-lm/99.0.0");
    std::fs::create_dir_all(&planted_dir).unwrap();
    let planted = planted_dir.join("liblitert-lm.so");
    std::fs::write(&planted, b"planted, not a library").unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/models/tiny-qwen2-q8.litertlm")
        .canonicalize()
        .unwrap();
    std::fs::write(
        work.join("scenario.yaml"),
        format!(
            "name: planted-library\n\
             engine: {{backend: litert-lm, model: '{}', device: cpu}}\n\
             turns: 1\n\
             turn:\n  - open: {{}}\n  - send: {{prompt: 'Hi.'}}\n  \
             - generate: {{max_output_tokens: 2}}\n  - close: {{}}\n",
            model.display()
        ),
    )
    .unwrap();

    let out = leakloop_command()
        .args(["run", "scenario.yaml", "--quiet", "--out", "out"])
        .current_dir(&work)
        .env_remove("LITERT_LM_LIB")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("99.0.0"),
        "the planted library was used:\n{text}"
    );

    // With this build's own library fetched, the run uses it and says where it came from;
    // without one, it fails saying none was found (and still not naming the planted one).
    match read_report(&work.join("out/report.json")) {
        Ok(report) if out.status.success() => {
            let details = &report.record.backend.details;
            assert_ne!(details["library"], planted.display().to_string(), "{text}");
            assert!(
                ["workspace", "executable"].contains(&details["library_source"].as_str()),
                "{details:?}"
            );
        }
        _ => assert!(text.contains("LiteRT-LM library not found"), "{text}"),
    }
}
