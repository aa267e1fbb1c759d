//! `leakloop bench history-scale`: history at nightly scale. It synthesizes the outcomes of
//! BUILDS builds x SCENARIOS scenarios (365 x 200: a year of nightlies; no simulator runs, the
//! figures are drawn: a noisy growth per turn, a step at build 300 in every 20th scenario),
//! writes them both as run folders (report.json each, without samples) and into a SQLite
//! results database, then runs `leakloop history` over each in a child process of its own and
//! prints its time and peak resident memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::report::provenance::{collect, resolve_build};
use crate::report::{render_report_json, REPORT_JSON};
use crate::results_db::{open, RunRow, RunSource};

/// One way of reading the history.
#[derive(Debug, Clone)]
pub(crate) struct HistoryScaleRow {
    /// `folders` or `SQLite`.
    pub source: &'static str,
    /// Runs read.
    pub runs: usize,
    /// How long `leakloop history` took, start to exit.
    pub seconds: f64,
    /// Its peak resident memory, bytes.
    pub peak_rss: Option<u64>,
    /// Its exit code.
    pub exit_code: Option<i32>,
}

/// What could stop the benchmark.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryScaleError {
    /// A file or a child process.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The synthetic report.
    #[error(transparent)]
    Report(#[from] crate::report::ReportError),
    /// The database.
    #[error(transparent)]
    Db(#[from] crate::results_db::DbError),
    /// The build stamp.
    #[error("{0}")]
    Build(String),
}

/// Synthesizes the runs under `root` (`root/builds/bNNN/sNNN/report.json` and
/// `root/results.sqlite`), then times history over both; `note` hears the progress.
pub(crate) fn run_history_scale(
    root: &Path,
    builds: usize,
    scenarios: usize,
    note: &mut dyn FnMut(&str),
) -> Result<Vec<HistoryScaleRow>, HistoryScaleError> {
    let started = Instant::now();
    let (dirs, db) = synthesize(root, builds, scenarios)?;
    note(&format!(
        "{builds} builds x {scenarios} scenarios written as folders and into SQLite in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let exe = std::env::current_exe()?;
    let mut from_folders = Command::new(&exe);
    from_folders.arg("history").args(&dirs);
    let mut from_db = Command::new(&exe);
    from_db.args(["history", "--db"]).arg(&db);
    let mut rows = Vec::new();
    for (source, mut command) in [("SQLite", from_db), ("folders", from_folders)] {
        let (elapsed, peak_rss, exit_code) = measure(&mut command)?;
        rows.push(HistoryScaleRow {
            source,
            runs: builds * scenarios,
            seconds: elapsed.as_secs_f64(),
            peak_rss,
            exit_code,
        });
        note(&format!(
            "history from {source}: {:.2} s",
            elapsed.as_secs_f64()
        ));
    }
    Ok(rows)
}

/// The table of the rows.
pub(crate) fn render_history_scale(rows: &[HistoryScaleRow]) -> String {
    let mut text = String::from(
        "| history from | runs | time | peak RSS | exit |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        text.push_str(&format!(
            "| {} | {} | {:.2} s | {} | {} |\n",
            r.source,
            r.runs,
            r.seconds,
            r.peak_rss
                .map_or_else(|| "n/a".to_owned(), leakloop_units::format_bytes),
            r.exit_code
                .map_or_else(|| "signal".to_owned(), |c| c.to_string()),
        ));
    }
    text
}

/// Writes every run as a folder and as a database row; the build folders, oldest first, and
/// the database.
fn synthesize(
    root: &Path,
    builds: usize,
    scenarios: usize,
) -> Result<(Vec<PathBuf>, String), HistoryScaleError> {
    let db = root.join("results.sqlite").display().to_string();
    let mut store = open(&db)?;
    let (mut record, mut verdict) = crate::report::examples::clean_run();
    // Figures only: history reads no samples.
    record.samples.clear();
    let (stamp, _) = resolve_build(
        Some("b000"),
        Some("2025-01-01"),
        &|_: &str| None,
        std::time::SystemTime::UNIX_EPOCH,
    )
    .map_err(HistoryScaleError::Build)?;
    let template = collect(&record.scenario, &record.backend, &stamp, None);
    let metric = verdict
        .metrics
        .keys()
        .next()
        .cloned()
        .unwrap_or_else(|| "native_heap".to_owned());
    let mut rng = ChaCha8Rng::seed_from_u64(365);
    let mut dirs = Vec::with_capacity(builds);
    let day = Duration::from_secs(86_400);
    let start = humantime::parse_rfc3339("2025-01-01T00:00:00Z").unwrap_or(std::time::UNIX_EPOCH);
    for b in 0..builds {
        let build_dir = root.join("builds").join(format!("b{b:03}"));
        let mut provenance = template.clone();
        provenance.build.id = Some(format!("b{b:03}"));
        provenance.build.date = Some(crate::results_db::timestamp(start + day * b as u32));
        let mut rows = Vec::with_capacity(scenarios);
        for s in 0..scenarios {
            let step = if s % 20 == 0 && b >= 300 { 4096.0 } else { 0.0 };
            let growth = 100.0 + step + rng.random_range(-400.0..400.0);
            record.scenario.name = format!("scenario-{s:03}");
            record.provenance = Some(provenance.clone());
            if let Some(m) = verdict.metrics.get_mut(&metric) {
                m.slope_bytes_per_turn = growth;
            }
            let dir = build_dir.join(format!("s{s:03}"));
            std::fs::create_dir_all(&dir)?;
            std::fs::write(
                dir.join(REPORT_JSON),
                render_report_json(&record, &verdict)?,
            )?;
            rows.push(RunRow::of(
                RunSource::Suite,
                &record,
                &verdict,
                Some(&dir),
                0,
                None,
            ));
        }
        store.insert(&rows)?;
        dirs.push(build_dir);
    }
    Ok((dirs, db))
}

/// Runs `command` (its output discarded) and returns how long it took, its peak resident
/// memory (the kernel's count for the child alone, `wait4`) and its exit code.
fn measure(
    command: &mut Command,
) -> Result<(Duration, Option<u64>, Option<i32>), HistoryScaleError> {
    let start = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for (std's `Child` is dropped unwaited);
    // both pointers are to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = start.elapsed();
    drop(child);
    if waited != pid {
        return Err(std::io::Error::last_os_error().into());
    }
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    // Linux counts ru_maxrss in KiB.
    let peak = u64::try_from(usage.ru_maxrss).ok().map(|kib| kib * 1024);
    Ok((elapsed, peak, exit_code))
}
