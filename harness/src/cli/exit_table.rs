//! What each exit code means for each command: the columns of docs/exit-codes.md, whose rows
//! are [`Exit`](super::error::Exit)'s codes (see [`super::reference`]). A new command needs a
//! column here (a test compares the columns with the visible commands); `-` is a code the
//! command never ends with.

/// One column per visible command, in `leakloop --help`'s order; each holds one cell per code
/// of [`Exit::ALL`](super::error::Exit::ALL), in its order.
pub(crate) const BY_COMMAND: &[(&str, [&str; 8])] = &[
    (
        "check",
        [
            "every file is valid (with `--lib`: and that library can run every step)",
            "-",
            "a file is invalid (a target's refused ssh option, host or serial included), or the library (`--lib`, `engine.lib`, ...) cannot run one of its steps",
            "`--lib` names no file, or one that is no LiteRT-LM library",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        "run",
        [
            "every expectation held",
            "an expectation failed (with `--baseline`: also a significant rise over the baseline)",
            "the scenario (with its overrides) is invalid, its library cannot run one of its steps, its target cannot be used as written (a refused ssh option or host, an ssh host that does not resolve, a refused key, an unknown adb serial), another run holds the `--out` folder, a bad `--build-id`/`--build-date`, or `--baseline` holds no completed report of the scenario",
            "the engine failed or cannot be built, or its remote machine or device is unreachable or lost",
            "the `--out` folder cannot be created or claimed, or every expectation held but `--record` could not record the run (its folder is written)",
            "no expectation failed, but one could not be decided by the last turn allowed (`max_turns`) and `--on-inconclusive fail` (the default); with `--on-inconclusive pass` such a run exits 0",
            "stopped; the partial report is written, marked `interrupted`",
            "stopped; the partial report is written, marked `interrupted`",
        ],
    ),
    (
        "merge",
        [
            "every scenario of every share passed",
            "a scenario failed an expectation (the suite's worst code)",
            "the shares overlap, one is missing or comes from another suite, a share's entry is refused (a symlink, FIFO or device, an unsafe name), or a scenario's own code is 2",
            "a scenario's engine failed",
            "the `--out` folder cannot be created or claimed, or a file in it cannot be written, or every scenario passed but `--record` could not record them all",
            "a scenario was inconclusive (the suite's worst code)",
            "-",
            "-",
        ],
    ),
    (
        "analyze",
        [
            "no metric is `growth` that matters",
            "a metric is `growth` that matters (beyond `--max-growth-per-turn`, else its lower bound over `--horizon` turns beyond the tolerance)",
            "the trace is malformed (turns out of order, no samples, a saturated value) or `--warmup-turns` is beyond it",
            "-",
            "-",
            "no metric fails, but one is `inconclusive`, with `--on-inconclusive fail` (the default is `pass`)",
            "-",
            "-",
        ],
    ),
    (
        "report",
        [
            "the run passed",
            "the run failed",
            "DIR holds no readable report, or one whose stored verdict does not follow from its expectations",
            "the run's engine failed, or the run did not finish: killed, interrupted, or still running (only samples.parquet)",
            "-",
            "the run was inconclusive and exited 5 (`--on-inconclusive` is not stored: read back, inconclusive exits 5)",
            "-",
            "-",
        ],
    ),
    (
        "bench",
        [
            "done",
            "-",
            "a bad flag",
            "the runner benchmark's engine failed",
            "stdout could not be written",
            "-",
            "-",
            "-",
        ],
    ),
    (
        "compare",
        [
            "both sides passed",
            "a side failed, none crashed",
            "the scenario is invalid or not `litert-lm`, not two `--lib`, a library cannot run one of its steps, or an `--out` folder is busy",
            "a side's engine failed, or a `--lib` is missing",
            "an `--out` folder cannot be created or claimed",
            "a side was inconclusive, none failed or crashed",
            "-",
            "-",
        ],
    ),
    (
        "bisect",
        [
            "the table is printed (whatever the builds' verdicts)",
            "-",
            "the scenario (with `--turns`, `--max-tokens`) or `--min-change` is invalid, `--versions` names no build or an unknown one, a fetched build cannot run one of its steps, or the `--out` folder is busy",
            "no build measured the figure (the table says why each failed)",
            "the `--out` folder (or a run folder in it) cannot be created or claimed, `trend.svg` or `bisect.txt` cannot be written, or stdout could not be written",
            "-",
            "-",
            "-",
        ],
    ),
    (
        "driver-check",
        [
            "the driver conforms",
            "the driver broke the protocol (each violation listed)",
            "no COMMAND, a bad flag",
            "the driver cannot be started (no such program) or its engine is unavailable or fails a call",
            "-",
            "-",
            "-",
            "-",
        ],
    ),
    (
        "history",
        [
            "no rise beyond the builds' spread",
            "a regression: growth per turn or a plateau rose beyond the builds' spread",
            "fewer than two folders (or builds in `--db`), a folder without a report, an unreadable report or results database, a bad flag",
            "-",
            "`--out` cannot be created",
            "-",
            "-",
            "-",
        ],
    ),
    (
        "init",
        [
            "the starter is written",
            "-",
            "FILE exists (without `--force`), a COMMAND for `sim` or `litert-lm`, none for `exec`, `--model` for another backend, a bad flag",
            "-",
            "FILE cannot be created or written",
            "-",
            "-",
            "-",
        ],
    ),
];

/// The rules under the table: suites, late output failures, closed pipes, the hidden worker.
pub(crate) const NOTES: &str = "\
A suite (`run` with several scenarios, `merge`, `report` on a suite folder) exits with the worst\n\
of its scenarios' codes, in this order: 0 < 5 < 1 < 2 < 3 < 4 < 130 < 143 (an inconclusive run\n\
is worse than a pass and better than a leak shown; a leak and a crash: 3); each scenario's own\n\
code is in the suite's report.json.\n\
\n\
Once a verdict is known it decides the code: a report file that cannot be written or a full\n\
standard output afterwards (`> /dev/full`) is a warning on stderr next to it, so a FAIL stays 1.\n\
A closed pipe on standard output (`leakloop check ... | head -1`) ends the output quietly with the\n\
same code. The hidden `worker` command (started by `run`) exits 0 when its runner hangs up, 2 for\n\
a bad scenario or protocol line and 3 when its engine cannot be built.\n\
`harness/tests/cli/exit_codes.rs` walks every command through each code above.\n\
";
