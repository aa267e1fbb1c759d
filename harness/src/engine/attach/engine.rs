//! [`AttachEngine`]: the attached process as an [`Engine`] with [`TurnMarks`].
//!
//! "Load" starts the process (or checks the pid) and the marker source, "unload" stops what
//! leakloop started; a snapshot reports the ledger counts from ledger markers and fails once
//! the process is gone. The turn steps of a driven engine are never called: the runner's
//! marker clock waits on [`TurnMarks`] instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::engine::attach::board::{Board, BoardState, Patterns};
use crate::engine::attach::process::{check_pid, Started};
use crate::engine::attach::source::{read_pipe, FileFollower};
use crate::engine::{
    BackendInfo, Engine, EngineError, EngineErrorKind, EngineSnapshot, GenerateOutcome,
    GenerateRequest, Prompt, Ready, SessionId, TurnMarks,
};
use crate::process::describe_exit;
use crate::process::pid_alive;
use crate::scenario::{AttachProcess, AttachSpec, MarkerSource, Scenario, SessionOptions};

/// How long a wait sleeps between checks that the process and the marker source are alive.
const LIVENESS_POLL: Duration = Duration::from_millis(50);

/// How long the marker pipe has, once the process ended, to deliver its last lines.
const DRAIN: Duration = Duration::from_millis(300);

/// A process judged from outside, its turns told by marker lines.
#[derive(Debug)]
pub struct AttachEngine {
    spec: AttachSpec,
    /// The scenario's folder: commands run there.
    cwd: PathBuf,
    patterns: Patterns,
    board: Board,
    /// Environment added to the program's (an attribution source's preload).
    program_env: Vec<(String, String)>,
    /// The process, when leakloop started it.
    process: Option<Started>,
    /// The measured process, once attached.
    pid: Option<u32>,
    /// The marker command (`markers.command`), once started.
    marker_command: Option<Started>,
    follower: Option<FileFollower>,
    /// How the started process ended, once stopped.
    stopped: Option<String>,
    /// Markers a sample stood for.
    sampled: u64,
    /// The time per turn of the turn [`TurnMarks::take_latest_turn`] last returned.
    taken_turn_nanos: Option<u64>,
    /// The key of the turn `take_latest_turn` last returned.
    taken_turn_key: Option<String>,
    /// Where the process became ready (the baseline), in words, once it did.
    ready_at: Option<String>,
}

impl AttachEngine {
    /// The attach engine for `scenario` (whose `engine.attach` must be set).
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, EngineError> {
        let spec = scenario.engine.attach.clone().ok_or_else(|| {
            EngineError::new(
                EngineErrorKind::Unavailable,
                "the attach backend needs `command` or `pid`",
            )
        })?;
        let patterns = Patterns::new(
            &spec.markers.pattern,
            &spec.markers.ledger,
            &spec.markers.ready,
        )
        .map_err(|e| EngineError::new(EngineErrorKind::Unavailable, e.to_string()))?;
        let cwd = scenario
            .source
            .as_deref()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_owned);
        Ok(Self {
            spec,
            cwd,
            patterns,
            board: Board::default(),
            program_env: Vec::new(),
            process: None,
            pid: None,
            marker_command: None,
            follower: None,
            stopped: None,
            sampled: 0,
            taken_turn_nanos: None,
            taken_turn_key: None,
            ready_at: None,
        })
    }

    /// Starts the program (with `command:`) with `env` added to its environment; a pid or a
    /// device's app is not started here, so nothing can reach it.
    pub fn with_program_env(mut self, env: &[(String, String)]) -> Self {
        self.program_env = env.to_vec();
        self
    }

    fn unavailable(message: String) -> EngineError {
        EngineError::new(EngineErrorKind::Unavailable, message)
    }

    /// Starts the process (or checks the pid) and the marker source.
    fn attach(&mut self) -> Result<(), EngineError> {
        let markers = &self.spec.markers.source;
        // The file is followed from its end as it is now, so before the program starts: a
        // program quicker to write its first marker than leakloop to open the file would
        // otherwise lose that marker.
        if let MarkerSource::File(path) = markers {
            let follower = FileFollower::start(path, self.board.clone(), self.patterns.clone())
                .map_err(|e| Self::unavailable(format!("cannot follow {}: {e}", path.display())))?;
            self.follower = Some(follower);
        }
        match &self.spec.process {
            AttachProcess::Command(argv) => {
                let mut started = Started::spawn(argv, &self.cwd, &self.program_env, "program")?;
                let patterns = |wanted| (*markers == wanted).then(|| self.patterns.clone());
                let (out, err) = (
                    patterns(MarkerSource::Stdout),
                    patterns(MarkerSource::Stderr),
                );
                read_outputs(&mut started, &self.board, out, err, "the program")?;
                self.pid = Some(started.id());
                self.process = Some(started);
            }
            AttachProcess::Pid(pid) => {
                check_pid(*pid)?;
                self.pid = Some(*pid);
            }
            // The app on the device: the target's probe samples it and finds it gone.
            AttachProcess::OnTarget => {}
        }
        match markers {
            MarkerSource::Stdout | MarkerSource::Stderr => {}
            // Followed from before the program started (below).
            MarkerSource::File(_) => {}
            MarkerSource::Command(argv) => {
                let mut started = Started::spawn(argv, &self.cwd, &[], "marker command")?;
                let patterns = Some(self.patterns.clone());
                read_outputs(
                    &mut started,
                    &self.board,
                    patterns,
                    None,
                    "the marker command",
                )?;
                self.marker_command = Some(started);
            }
        }
        Ok(())
    }

    /// Why waiting cannot go on, when the process or (with `source`) the marker command has
    /// ended.
    fn ended(&mut self, waiting_for: &str, source: bool) -> Option<EngineError> {
        let gone = match (&mut self.process, self.pid) {
            (Some(started), _) => started.exited().map(|status| {
                (
                    format!("the program exited ({})", describe_exit(status)),
                    describe_exit(status),
                )
            }),
            (None, Some(pid)) if !pid_alive(pid) => {
                Some((format!("process {pid} is gone"), "gone".to_owned()))
            }
            _ => None,
        };
        if let Some((what, how)) = gone {
            return Some(EngineError::new(
                EngineErrorKind::Crashed { how },
                format!("{what} {waiting_for}{}", self.last_output()),
            ));
        }
        let command = self.marker_command.as_mut().filter(|_| source)?;
        let status = command.exited()?;
        Some(Self::unavailable(format!(
            "the marker command ended ({}) {waiting_for}{}",
            describe_exit(status),
            self.last_output()
        )))
    }

    /// `; last output: ...` from the lines that were not markers, or nothing.
    fn last_output(&self) -> String {
        let state = self.board.lock();
        if state.tail.is_empty() {
            return String::new();
        }
        let streams: Vec<String> = state
            .tail
            .iter()
            .map(|(stream, lines)| {
                let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
                format!("{stream}: {}", lines.join(" | "))
            })
            .collect();
        format!("; last output: {}", streams.join("; "))
    }

    fn not_driven() -> EngineError {
        EngineError::new(
            EngineErrorKind::Protocol,
            "an attached process runs its own turns; leakloop drives no step of it",
        )
    }
}

/// Reads `started`'s stdout and stderr in threads: markers from those given `patterns`, the
/// other lines kept for messages under `who`'s name.
fn read_outputs(
    started: &mut Started,
    board: &Board,
    stdout: Option<Patterns>,
    stderr: Option<Patterns>,
    who: &str,
) -> Result<(), EngineError> {
    let (out, err) = started.take_outputs();
    let io = |e: std::io::Error| {
        AttachEngine::unavailable(format!("cannot read the output of {who}: {e}"))
    };
    if let Some(out) = out {
        read_pipe(out, board.clone(), stdout, format!("{who}'s stdout")).map_err(io)?;
    }
    if let Some(err) = err {
        read_pipe(err, board.clone(), stderr, format!("{who}'s stderr")).map_err(io)?;
    }
    Ok(())
}

/// Whether the board holds a turn marked after `after`.
fn newer(state: &BoardState, after: Option<u64>) -> bool {
    match (state.latest, after) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(mark), Some(after)) => mark.turn > after,
    }
}

impl AttachEngine {
    /// Waits until `arrived` holds on the board; fails when the markers break their order, the
    /// process or the marker source ends, or `markers.timeout` passes (`waiting_for` says
    /// what was awaited).
    fn wait_board(
        &mut self,
        waiting_for: &str,
        arrived: impl Fn(&BoardState) -> bool,
    ) -> Result<(), EngineError> {
        let timeout = self.spec.markers.timeout;
        let started = Instant::now();
        loop {
            {
                let state = self
                    .board
                    .wait_for(LIVENESS_POLL, |s| s.violation.is_some() || arrived(s));
                if let Some(violation) = &state.violation {
                    return Err(EngineError::new(
                        EngineErrorKind::Protocol,
                        violation.clone(),
                    ));
                }
                if arrived(&state) {
                    return Ok(());
                }
            }
            if let Some(error) = self.ended(waiting_for, true) {
                // The last lines may still be in the pipe: a marker written just before the
                // end still counts (its sample then finds the process gone).
                let state = self.board.wait_for(DRAIN, &arrived);
                if arrived(&state) {
                    return Ok(());
                }
                drop(state);
                return Err(error);
            }
            let waited = started.elapsed();
            if waited >= timeout {
                let (lines, last) = {
                    let s = self.board.lock();
                    (s.lines, s.latest)
                };
                let last = match last {
                    Some(m) => format!("the last was turn {} (line {})", m.turn, m.line),
                    None => "none came yet".to_owned(),
                };
                return Err(EngineError::new(
                    EngineErrorKind::Hung {
                        waited_ms: waited.as_millis().try_into().unwrap_or(u64::MAX),
                    },
                    format!(
                        "no turn marker for {} (markers.timeout) {waiting_for}: {last}, {lines} \
                         lines read from {}{}",
                        humantime::format_duration(timeout),
                        source_name(&self.spec.markers.source),
                        self.last_output()
                    ),
                ));
            }
        }
    }
}

impl TurnMarks for AttachEngine {
    fn wait_ready(&mut self) -> Result<Ready, EngineError> {
        self.wait_board("before its ready line or first turn marker", |s| {
            s.ready.is_some() || s.latest.is_some()
        })?;
        let (ready, latest) = {
            let state = self.board.lock();
            (state.ready, state.latest)
        };
        let (ready, at) = match (ready, latest) {
            (None, Some(mark)) => (
                Ready::Turn(mark.turn),
                format!("turn marker {} (line {})", mark.turn, mark.line),
            ),
            (line, _) => (
                Ready::Line,
                format!("ready line (line {})", line.unwrap_or(0)),
            ),
        };
        self.ready_at = Some(at);
        Ok(ready)
    }

    fn wait_turn_closed(&mut self, after: Option<u64>) -> Result<u64, EngineError> {
        let waiting_for = match after {
            Some(turn) => format!("after turn {turn}'s marker, before the next one"),
            None => "before its first turn marker".to_owned(),
        };
        self.wait_board(&waiting_for, |s| newer(s, after))?;
        Ok(self.board.lock().latest.map_or(0, |m| m.turn))
    }

    fn take_latest_turn(&mut self) -> Option<u64> {
        let (latest, nanos, key) = {
            let state = self.board.lock();
            (
                state.latest.map(|m| m.turn),
                state.latest_turn_nanos,
                state.latest_key.clone(),
            )
        };
        // Taken under the same lock as the turn, so that the time and key are that turn's even
        // when the next marker arrives right after.
        self.taken_turn_nanos = nanos;
        self.taken_turn_key = key;
        if latest.is_some() {
            self.sampled += 1;
        }
        latest
    }

    fn taken_turn_nanos(&self) -> Option<u64> {
        self.taken_turn_nanos
    }

    fn taken_turn_key(&self) -> Option<String> {
        self.taken_turn_key.clone()
    }

    fn first_turn(&self) -> Option<u64> {
        self.board.lock().first.map(|m| m.turn)
    }

    fn marked_before_baseline(&mut self) -> Option<u64> {
        let (latest, ready) = {
            let state = self.board.lock();
            (state.latest?, state.ready)
        };
        // The report says what the baseline stands for: that turn, not the ready line.
        self.ready_at = Some(format!(
            "turn marker {} (line {}), which came after the ready line (line {}) before the \
             baseline was sampled",
            latest.turn,
            latest.line,
            ready.unwrap_or(0)
        ));
        Some(latest.turn)
    }
}

/// The marker source in words, for messages and the report.
fn source_name(source: &MarkerSource) -> String {
    match source {
        MarkerSource::Stdout => "the program's stdout".to_owned(),
        MarkerSource::Stderr => "the program's stderr".to_owned(),
        MarkerSource::File(path) => format!("file {}", path.display()),
        MarkerSource::Command(argv) => format!("command `{}`", argv.join(" ")),
    }
}

impl Engine for AttachEngine {
    fn describe(&self) -> BackendInfo {
        let mut details = BTreeMap::new();
        let (version, process) = match &self.spec.process {
            AttachProcess::Command(argv) => ("started", argv.join(" ")),
            AttachProcess::Pid(pid) => ("pid", format!("pid {pid}")),
            AttachProcess::OnTarget => ("target", "the target's app".to_owned()),
        };
        details.insert(
            "process".to_owned(),
            crate::input::printable(&process).into_owned(),
        );
        details.insert(
            "markers_from".to_owned(),
            source_name(&self.spec.markers.source),
        );
        let state = self.board.lock();
        details.insert("turn_markers".to_owned(), state.markers.to_string());
        // Markers that came while a sample was being taken: their turns have no sample of
        // their own (the next sample stands for them).
        details.insert(
            "turns_without_sample".to_owned(),
            state.markers.saturating_sub(self.sampled).to_string(),
        );
        if state.too_long > 0 {
            details.insert("lines_too_long".to_owned(), state.too_long.to_string());
        }
        if state.ledger_lines_dropped > 0 {
            // Kinds past the cap (shared with drivers' snapshots) are counted, not kept.
            details.insert(
                "ledger_markers_dropped".to_owned(),
                state.ledger_lines_dropped.to_string(),
            );
        }
        if state.ledger.is_empty() {
            details.insert(
                "ledger".to_owned(),
                "no LEDGER marker: create/delete counts are unknown".to_owned(),
            );
        }
        if let Some(at) = &self.ready_at {
            // What the baseline stands for: the loaded process, not its start.
            details.insert("baseline_at".to_owned(), at.clone());
        }
        if let Some(how) = &self.stopped {
            details.insert("stopped".to_owned(), how.clone());
        }
        BackendInfo {
            backend: "attach".to_owned(),
            version: version.to_owned(),
            details,
        }
    }

    fn load(&mut self) -> Result<(), EngineError> {
        if self.pid.is_some() {
            return Err(Self::unavailable(
                "an attached process cannot be reloaded".to_owned(),
            ));
        }
        self.attach()
    }

    fn open_session(&mut self, _: u32, _: &SessionOptions) -> Result<SessionId, EngineError> {
        Err(Self::not_driven())
    }

    fn send(&mut self, _: SessionId, _: &Prompt) -> Result<(), EngineError> {
        Err(Self::not_driven())
    }

    fn generate(
        &mut self,
        _: SessionId,
        _: &GenerateRequest,
    ) -> Result<GenerateOutcome, EngineError> {
        Err(Self::not_driven())
    }

    fn close_session(&mut self, _: SessionId) -> Result<(), EngineError> {
        Err(Self::not_driven())
    }

    /// Stops what leakloop started: the marker command, the file follower, and (with
    /// `command:`) the program, by SIGTERM to its process group and SIGKILL after
    /// `stop_grace`. An attached pid is left running.
    fn unload(&mut self) -> Result<(), EngineError> {
        if let Some(mut command) = self.marker_command.take() {
            command.stop(Duration::from_secs(1));
        }
        self.follower = None;
        if let Some(mut process) = self.process.take() {
            self.stopped = Some(process.stop(self.spec.stop_grace));
        }
        Ok(())
    }

    fn snapshot(&mut self) -> Result<EngineSnapshot, EngineError> {
        if let Some(error) = self.ended("before it could be sampled", false) {
            return Err(error);
        }
        Ok(EngineSnapshot {
            ledger: self.board.lock().ledger.clone(),
            metrics: BTreeMap::new(),
            ..Default::default()
        })
    }

    fn process_id(&self) -> Option<u32> {
        self.pid
    }

    fn turn_marks(&mut self) -> Option<&mut dyn TurnMarks> {
        Some(self)
    }
}
