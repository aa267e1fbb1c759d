//! `engine: {backend: attach, ...}`: judging a process that runs its own turn loop.
//!
//! leakloop either starts the process (`command`) or attaches to one already running (`pid`),
//! and learns where each turn ends from marker lines the process writes: on its stdout or
//! stderr, appended to a file, or printed by another command (`adb logcat -s TAG:I`). This
//! module holds the DSL side: the raw `markers:` mirror, the validated [`AttachSpec`], and the
//! checks that place every mistake at its key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::scenario::raw::{RawEngine, UnitText};
use crate::scenario::target::{AdbProcess, AdbTarget, Target};
use crate::scenario::validate::Context;
use crate::scenario::ScenarioError;

/// The default turn marker: `TURN 7 CLOSED`, written once after each closed turn, optionally
/// followed by ` key=K`: the session id or shape the turn used (a turn's key).
pub const DEFAULT_MARKER_PATTERN: &str = r"^TURN (?P<turn>\d+) CLOSED(?: key=(?P<key>\S+))?";

/// The default ledger marker: `LEDGER conversation created=7 deleted=6`, cumulative counts of
/// one resource kind since the process started.
pub const DEFAULT_LEDGER_PATTERN: &str =
    r"^LEDGER (?P<kind>[A-Za-z0-9_./-]+) created=(?P<created>\d+) deleted=(?P<deleted>\d+)";

/// The default ready line: `READY`, written once when the process has loaded what it keeps
/// (its model, its caches) and before its first turn. The baseline is sampled there; without
/// it, at the first turn marker.
pub const DEFAULT_READY_PATTERN: &str = r"^READY\b";

/// How long the runner waits for the next turn marker unless `markers.timeout` says otherwise.
pub const DEFAULT_MARKER_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a started process has to exit after SIGTERM before it is killed, by default.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);

/// The longest line, in bytes, that can be a marker; longer lines are counted and skipped.
pub const MAX_MARKER_LINE: usize = 4096;

/// A process judged from outside, and where its turn markers come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachSpec {
    /// The process: started by leakloop, or already running.
    pub process: AttachProcess,
    /// Where turn (and ledger) markers are read, and how they look.
    pub markers: MarkerSpec,
    /// For a started process: how long it has after SIGTERM before SIGKILL at the end.
    pub stop_grace: Duration,
}

/// Which process is measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachProcess {
    /// leakloop starts this program (argv) in the scenario's folder and stops it at the end.
    Command(Vec<String>),
    /// A process already running; leakloop neither starts nor stops it.
    Pid(u32),
    /// The process the scenario's target names (`target: {adb: {package | pid}}`: an app on an
    /// Android device), sampled there by the target's probe; leakloop neither starts nor stops
    /// it.
    OnTarget,
}

/// Marker lines: where they are read and the patterns that recognise them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkerSpec {
    /// Where the lines come from.
    pub source: MarkerSource,
    /// The turn marker's regex; its named group `turn` holds the turn number, its optional
    /// group `key` the turn's key (a session id, a shape).
    pub pattern: String,
    /// The ledger marker's regex; named groups `kind`, `created`, `deleted` (cumulative counts).
    pub ledger: String,
    /// The ready line's regex: where the baseline is sampled when it comes before the first
    /// turn marker.
    pub ready: String,
    /// The longest wait for the next turn marker (the first one included).
    pub timeout: Duration,
}

/// Where marker lines are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerSource {
    /// The started process's standard output.
    Stdout,
    /// The started process's standard error.
    Stderr,
    /// Lines appended to this file after leakloop attaches.
    File(PathBuf),
    /// The standard output of this command (e.g. `adb logcat -s TAG:I`), started by leakloop.
    Command(Vec<String>),
}

/// Marker lines of an attached process: one source (`stream`, `file` or `command`; default the
/// program's stdout) and the two patterns.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "markers"))]
pub(crate) struct RawMarkers {
    /// Read markers from the started program's `stdout` (the default) or `stderr`.
    #[serde(default)]
    pub stream: Option<RawStream>,
    /// Read markers appended to this file after leakloop attaches (from its start if it appears
    /// later); a relative path resolves against the scenario file's folder.
    #[serde(default)]
    pub file: Option<String>,
    /// Read markers from this command's stdout, e.g. `[adb, -s, SERIAL, logcat, -s,
    /// 'LeakLoop:I']`; started in the scenario file's folder and stopped at the end. Its ending
    /// is an engine failure.
    #[serde(default)]
    #[cfg_attr(test, schemars(length(min = 1)))]
    pub command: Option<Vec<String>>,
    /// Regular expression (Rust `regex` syntax) of the turn marker, searched in each line; the
    /// named group `turn` holds the turn number, which must rise by at least 1 from marker to
    /// marker; an optional named group `key` holds the turn's key (the session id or shape the
    /// request used), so that the report can tell a cache filling from growth per request.
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = DEFAULT_MARKER_PATTERN)))]
    pub pattern: Option<String>,
    /// Regular expression of the ledger marker; named groups `kind`, `created`, `deleted`
    /// (cumulative counts of one resource kind).
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = DEFAULT_LEDGER_PATTERN)))]
    pub ledger: Option<String>,
    /// Regular expression of the ready line, searched in each line before the first turn
    /// marker: the process has loaded what it keeps and its turns start now. The baseline is
    /// sampled there; without such a line, at the first turn marker (which then counts as no
    /// turn).
    #[serde(default)]
    #[cfg_attr(test, schemars(extend("default" = DEFAULT_READY_PATTERN)))]
    pub ready: Option<String>,
    /// The longest wait for the next turn marker (the first one included); more than 0. Past
    /// it the run ends as an engine failure (a hang).
    #[serde(default)]
    #[cfg_attr(
        test,
        schemars(schema_with = "leakloop_units::schema::positive_duration")
    )]
    #[cfg_attr(test, schemars(extend("default" = "60s")))]
    pub timeout: Option<UnitText>,
}

/// Which output stream of the started program carries the markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "marker_stream"))]
pub(crate) enum RawStream {
    /// Its standard output.
    Stdout,
    /// Its standard error.
    Stderr,
}

/// The keys only an attached engine takes, as `(name, present)`. `command` is shared with
/// `backend: exec`, whose own check (`validate/exec.rs`) refuses it on the other backends.
fn attach_keys(raw: &RawEngine) -> [(&'static str, bool); 3] {
    [
        ("pid", raw.pid.is_some()),
        ("markers", raw.markers.is_some()),
        ("stop_grace", raw.stop_grace.is_some()),
    ]
}

/// Keys of other backends that mean nothing to a process leakloop does not drive.
fn driven_keys(raw: &RawEngine) -> [(&'static str, bool); 7] {
    [
        ("profile", raw.profile.is_some()),
        ("model", raw.model.is_some()),
        ("lib", raw.lib.is_some()),
        ("device", raw.device.is_some()),
        ("max_tokens", raw.max_tokens.is_some()),
        ("threads", raw.threads.is_some()),
        ("isolate", raw.isolate.is_some()),
    ]
}

/// Checks the attach keys of `engine:`: absent for other backends, complete and consistent for
/// `attach`. `folder` is the scenario's folder, against which a marker file resolves.
pub(crate) fn validate_attach(
    raw: &mut RawEngine,
    attach: bool,
    folder: &Path,
    cx: &Context<'_>,
) -> Result<Option<AttachSpec>, ScenarioError> {
    if !attach {
        if let Some((key, _)) = attach_keys(raw).into_iter().find(|(_, on)| *on) {
            return Err(cx.invalid_key(
                &format!("engine.{key}"),
                format!(
                    "`{key}` belongs to `backend: attach`; the {} backend does not take it",
                    raw.backend.as_str()
                ),
            ));
        }
        return Ok(None);
    }
    if let Some((key, _)) = driven_keys(raw).into_iter().find(|(_, on)| *on) {
        return Err(cx.invalid_key(
            &format!("engine.{key}"),
            format!(
                "`{key}` is for engines leakloop drives; an attached process loads and runs \
                 its own engine"
            ),
        ));
    }
    let process = match (raw.command.take(), raw.pid) {
        (Some(_), Some(_)) => {
            return Err(cx.invalid_key(
                "engine.pid",
                "give either `command` (leakloop starts the process) or `pid` (it runs already), not both",
            ))
        }
        // The app on the target's device; [`check_attach_target`] refuses any other target.
        (None, None) => AttachProcess::OnTarget,
        (Some(argv), None) => AttachProcess::Command(argv_of("engine.command", argv, cx)?),
        (None, Some(pid)) => {
            if !(1..=i64::from(i32::MAX)).contains(&pid) {
                return Err(cx.invalid("engine.pid", format!("`pid` must be a process id from 1 to {}, got {pid}", i32::MAX)));
            }
            AttachProcess::Pid(pid as u32)
        }
    };
    let markers = validate_markers(raw.markers.take().unwrap_or_default(), &process, folder, cx)?;
    let stop_grace = match &raw.stop_grace {
        Some(text) => cx.duration("engine.stop_grace", text)?,
        None => DEFAULT_STOP_GRACE,
    };
    Ok(Some(AttachSpec {
        process,
        markers,
        stop_grace,
    }))
}

/// A program and its arguments: not empty, the program named.
fn argv_of(path: &str, argv: Vec<String>, cx: &Context<'_>) -> Result<Vec<String>, ScenarioError> {
    match argv.first() {
        None => Err(cx.invalid(
            path,
            "the command is empty: name a program and its arguments",
        )),
        Some(program) if program.trim().is_empty() => {
            Err(cx.invalid(&format!("{path}[0]"), "the program name is empty"))
        }
        Some(_) => Ok(argv),
    }
}

fn validate_markers(
    raw: RawMarkers,
    process: &AttachProcess,
    folder: &Path,
    cx: &Context<'_>,
) -> Result<MarkerSpec, ScenarioError> {
    let given = [
        ("stream", raw.stream.is_some()),
        ("file", raw.file.is_some()),
        ("command", raw.command.is_some()),
    ];
    let mut present = given.iter().filter(|(_, on)| *on).map(|(k, _)| *k);
    if let (Some(_), Some(second)) = (present.next(), present.next()) {
        return Err(cx.invalid_key(
            &format!("engine.markers.{second}"),
            "markers come from one place: give one of `stream`, `file`, `command`",
        ));
    }
    let source = if let Some(stream) = raw.stream {
        if let AttachProcess::Pid(_) | AttachProcess::OnTarget = process {
            return Err(cx.invalid(
                "engine.markers.stream",
                "the output of a process leakloop did not start cannot be read: give `file` or `command`",
            ));
        }
        match stream {
            RawStream::Stdout => MarkerSource::Stdout,
            RawStream::Stderr => MarkerSource::Stderr,
        }
    } else if let Some(file) = raw.file {
        if file.is_empty() {
            return Err(cx.invalid("engine.markers.file", "`file` is empty"));
        }
        let file = Path::new(&file);
        MarkerSource::File(if file.is_absolute() {
            file.to_owned()
        } else {
            folder.join(file)
        })
    } else if let Some(command) = raw.command {
        MarkerSource::Command(argv_of("engine.markers.command", command, cx)?)
    } else {
        match process {
            AttachProcess::Command(_) => MarkerSource::Stdout,
            AttachProcess::Pid(_) => {
                return Err(cx.invalid_key(
                    "engine.pid",
                    "an attached pid needs `markers: {file: ...}` or `markers: {command: [...]}`: \
                     its output cannot be read",
                ))
            }
            AttachProcess::OnTarget => return Err(needs_a_process(cx)),
        }
    };
    let pattern = raw
        .pattern
        .unwrap_or_else(|| DEFAULT_MARKER_PATTERN.to_owned());
    check_regex("engine.markers.pattern", &pattern, &["turn"], cx)?;
    let ledger = raw
        .ledger
        .unwrap_or_else(|| DEFAULT_LEDGER_PATTERN.to_owned());
    check_regex(
        "engine.markers.ledger",
        &ledger,
        &["kind", "created", "deleted"],
        cx,
    )?;
    let ready = raw
        .ready
        .unwrap_or_else(|| DEFAULT_READY_PATTERN.to_owned());
    check_regex("engine.markers.ready", &ready, &[], cx)?;
    let timeout = cx.positive_duration(
        "engine.markers.timeout",
        raw.timeout.as_ref(),
        DEFAULT_MARKER_TIMEOUT,
    )?;
    Ok(MarkerSpec {
        source,
        pattern,
        ledger,
        ready,
        timeout,
    })
}

/// The error for an attach engine that names no process: with neither `command` nor `pid`, it
/// measures a device's app and must say where the app's markers come from.
fn needs_a_process(cx: &Context<'_>) -> ScenarioError {
    cx.invalid_key(
        "engine.backend",
        "the attach backend needs `command: [program, args...]` (leakloop starts it), `pid: N` \
         (a process already running), or, for an app on an Android device, \
         `target: {adb: {package: ...}}` with `markers: {command: [adb, -s, SERIAL, logcat, -v, \
         raw, -s, 'TAG:I']}`",
    )
}

/// Checks an attach engine against the scenario's target: a device's app (`target: {adb:
/// {package | pid}}`) is the measured process, so `command` and `pid` are refused beside it, and
/// an engine without them needs such a target. Other targets are refused by the caller.
pub(crate) fn check_attach_target(
    attach: &AttachSpec,
    target: &Target,
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    let app = matches!(
        target,
        Target::Adb(AdbTarget {
            process: AdbProcess::Package(_) | AdbProcess::Pid(_),
            ..
        })
    );
    match (&attach.process, app) {
        (AttachProcess::OnTarget, false) => Err(needs_a_process(cx)),
        (AttachProcess::Command(_), true) => Err(cx.invalid_key(
            "engine.command",
            "with `target: {adb: {package | pid}}` the measured process is the app on the device, \
             which leakloop neither starts nor stops: remove `command` (the app's markers come \
             from `markers.command`)",
        )),
        (AttachProcess::Pid(_), true) => Err(cx.invalid_key(
            "engine.pid",
            "with `target: {adb: {package | pid}}` the measured process is the app on the device: \
             remove `engine.pid` (a device pid goes in `target.adb.pid`)",
        )),
        _ => Ok(()),
    }
}

/// A regex that compiles and has every named group in `groups`.
fn check_regex(
    path: &str,
    pattern: &str,
    groups: &[&str],
    cx: &Context<'_>,
) -> Result<(), ScenarioError> {
    let regex = regex::Regex::new(pattern).map_err(|e| {
        // The regex crate draws a caret diagram over several lines; its last line says what
        // is wrong.
        let text = e.to_string();
        let why = text.lines().last().unwrap_or_default().trim().to_owned();
        cx.invalid(path, format!("not a valid regular expression: {why}"))
    })?;
    let names: Vec<&str> = regex.capture_names().flatten().collect();
    if let Some(missing) = groups.iter().find(|g| !names.contains(g)) {
        let all = groups
            .iter()
            .map(|g| format!("(?P<{g}>...)"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(cx.invalid(
            path,
            format!("the pattern has no named group `{missing}`; it needs {all}"),
        ));
    }
    Ok(())
}
