//! The one registry of the metrics leakloop measures.
//!
//! Every metric has one row in [`REGISTRY`]: its name, unit, what it measures, which probe
//! provides it on which platform (cheapest first), and whether its value depends on the machine
//! (for the snapshot redactor). The scenario DSL (`watch`, `expect`), the JSON schema (kept equal
//! by a test), the report, the redactor, the simulator, the OpenCL engine and the probes read this
//! table; nothing else lists metric names.
//!
//! It lives in its own small crate because the simulator (`sim-backend`) sits below the harness
//! and both must name the same metrics.
//!
//! Adding a metric is adding one row here (and, if no existing probe provides it, a probe: see
//! "Adding a probe" in docs/metrics.md).
#![warn(missing_docs)]

/// The unit a metric's values are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes (every probe's KB, pages or KiB are converted once, where they are read).
    Bytes,
    /// Nanoseconds of wall time (or of the simulator's virtual clock), as whole numbers.
    Nanoseconds,
}

impl Unit {
    /// The unit's name as documented.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Bytes => "bytes",
            Unit::Nanoseconds => "nanoseconds",
        }
    }
}

/// The operating system a measured process runs on (where a probe can read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// Linux (desktop, server, a host reached over ssh).
    Linux,
    /// Android (a device over adb: a native process or an app package).
    Android,
    /// macOS.
    MacOs,
    /// Any other system (only what `sysinfo` offers).
    Other,
}

impl Platform {
    /// The platform this program was built for.
    pub const fn current() -> Platform {
        if cfg!(target_os = "android") {
            Platform::Android
        } else if cfg!(target_os = "linux") {
            Platform::Linux
        } else if cfg!(target_os = "macos") {
            Platform::MacOs
        } else {
            Platform::Other
        }
    }

    /// The platform's name in messages and docs.
    pub const fn name(self) -> &'static str {
        match self {
            Platform::Linux => "Linux",
            Platform::Android => "Android",
            Platform::MacOs => "macOS",
            Platform::Other => "other systems",
        }
    }
}

/// A source of metric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    /// `/proc/<pid>/statm` (RSS, anonymous RSS), `/proc/<pid>/status` when swap is wanted, and
    /// `/proc/<pid>/smaps_rollup` only when PSS is: read by the runner from outside the process.
    Proc,
    /// macOS `task_info(TASK_VM_INFO)` (the process itself) or `proc_pid_rusage` (another
    /// process of the same user): the physical footprint Xcode and Instruments show, and RSS.
    TaskInfo,
    /// The resident size through the `sysinfo` crate, where nothing better exists.
    Sysinfo,
    /// Android `dumpsys meminfo <package|pid>` (App Summary and detailed table; KB as printed).
    Dumpsys,
    /// The C heap in use (glibc's `mallinfo2`), reported by the engine's own process.
    EngineHeap,
    /// The OpenCL call interposer's live `cl_mem` bytes, reported by the worker it is loaded in.
    Interposer,
    /// The reference OpenCL engine's own count of the buffers it holds.
    OpenClEngine,
    /// The simulator's model.
    Simulator,
    /// The runner's clock around each engine call (the simulator's virtual clock when the
    /// engine has one), or the time between an attached process's turn markers.
    Clock,
}

impl ProbeKind {
    /// Whether the runner reads this source itself (from outside the engine's process, chosen by
    /// target), rather than the engine reporting it with its snapshot.
    pub const fn sampled_by_runner(self) -> bool {
        matches!(
            self,
            ProbeKind::Proc | ProbeKind::TaskInfo | ProbeKind::Sysinfo | ProbeKind::Dumpsys
        )
    }

    /// The source's name in messages and docs.
    pub const fn name(self) -> &'static str {
        match self {
            ProbeKind::Proc => "/proc",
            ProbeKind::TaskInfo => "task_info",
            ProbeKind::Sysinfo => "sysinfo",
            ProbeKind::Dumpsys => "dumpsys meminfo",
            ProbeKind::EngineHeap => "engine heap (mallinfo2)",
            ProbeKind::Interposer => "OpenCL interposer",
            ProbeKind::OpenClEngine => "OpenCL engine",
            ProbeKind::Simulator => "simulator",
            ProbeKind::Clock => "runner's clock",
        }
    }
}

/// One way to get a metric: a probe, on the platforms where it works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provider {
    /// The source.
    pub probe: ProbeKind,
    /// Where it works; empty means wherever the engine runs (the engine reports it).
    pub platforms: &'static [Platform],
}

/// Whether a metric's values differ between machines (snapshots redact them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MachineDependence {
    /// Always: the operating system measures a real process.
    Always,
    /// On real engines only: the simulator models it exactly from its seed.
    RealEngineOnly,
}

/// One metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The name used in scenarios (`watch`, `expect`), reports and traces.
    pub name: &'static str,
    /// The unit of its values.
    pub unit: Unit,
    /// What it measures, in one sentence fragment (no final period).
    pub meaning: &'static str,
    /// Who provides it, cheapest first.
    pub providers: &'static [Provider],
    /// Whether its values depend on the machine.
    pub machine: MachineDependence,
}

impl Metric {
    /// The first provider the runner can read on `platform` among `available`, cheapest first.
    pub fn runner_probe(
        &self,
        platform: Platform,
        available: impl Fn(ProbeKind) -> bool,
    ) -> Option<ProbeKind> {
        self.providers
            .iter()
            .filter(|p| p.probe.sampled_by_runner() && p.platforms.contains(&platform))
            .map(|p| p.probe)
            .find(|&p| available(p))
    }

    /// Whether `probe` provides this metric (on any platform).
    pub fn provided_by(&self, probe: ProbeKind) -> bool {
        self.providers.iter().any(|p| p.probe == probe)
    }

    /// Whether values of this metric differ between machines for an engine that is (or is not)
    /// the simulator.
    pub fn is_machine_dependent(&self, simulated: bool) -> bool {
        match self.machine {
            MachineDependence::Always => true,
            MachineDependence::RealEngineOnly => !simulated,
        }
    }
}

const PROC_PLATFORMS: &[Platform] = &[Platform::Linux, Platform::Android];
const ANYWHERE: &[Platform] = &[];

const fn on(probe: ProbeKind, platforms: &'static [Platform]) -> Provider {
    Provider { probe, platforms }
}

const fn bytes(
    name: &'static str,
    meaning: &'static str,
    providers: &'static [Provider],
    machine: MachineDependence,
) -> Metric {
    Metric {
        name,
        unit: Unit::Bytes,
        meaning,
        providers,
        machine,
    }
}

const fn time(name: &'static str, meaning: &'static str) -> Metric {
    Metric {
        name,
        unit: Unit::Nanoseconds,
        meaning,
        providers: &[CLOCK],
        // The simulator's calls take exact virtual time; real calls take what they take.
        machine: MachineDependence::RealEngineOnly,
    }
}

const CLOCK: Provider = on(ProbeKind::Clock, ANYWHERE);
const PROC: Provider = on(ProbeKind::Proc, PROC_PLATFORMS);
const TASK_INFO: Provider = on(ProbeKind::TaskInfo, &[Platform::MacOs]);
const DUMPSYS: Provider = on(ProbeKind::Dumpsys, &[Platform::Android]);
const SIMULATOR: Provider = on(ProbeKind::Simulator, ANYWHERE);
use MachineDependence::{Always, RealEngineOnly};

/// Every metric, in the order the DSL lists them.
pub const REGISTRY: &[Metric] = &[
    bytes(
        "rss",
        "resident set size of the engine's process",
        &[
            PROC,
            TASK_INFO,
            on(ProbeKind::Sysinfo, &[Platform::Other]),
            DUMPSYS,
            SIMULATOR,
        ],
        Always,
    ),
    bytes(
        "pss",
        "proportional set size of the engine's process",
        &[PROC, DUMPSYS, SIMULATOR],
        Always,
    ),
    bytes(
        "anon_rss",
        "anonymous resident memory of the engine's process",
        &[PROC],
        Always,
    ),
    bytes(
        "swap",
        "swapped-out memory of the engine's process",
        &[PROC],
        Always,
    ),
    bytes(
        "native_heap",
        "the C heap in the engine's process",
        &[on(ProbeKind::EngineHeap, ANYWHERE), DUMPSYS, SIMULATOR],
        RealEngineOnly,
    ),
    bytes(
        "gpu",
        "graphics/GPU memory",
        &[DUMPSYS, SIMULATOR],
        RealEngineOnly,
    ),
    bytes(
        "pool_allocated",
        "bytes a caching allocator has handed out",
        &[SIMULATOR],
        RealEngineOnly,
    ),
    bytes(
        "pool_reserved",
        "bytes a caching allocator keeps reserved",
        &[SIMULATOR],
        RealEngineOnly,
    ),
    bytes(
        "cl_mem_bytes",
        "live OpenCL buffer bytes, as the call interposer counts them",
        &[on(ProbeKind::Interposer, ANYWHERE)],
        RealEngineOnly,
    ),
    bytes(
        "opencl_buffer_bytes",
        "OpenCL buffer bytes the reference OpenCL engine holds, by its own count",
        &[on(ProbeKind::OpenClEngine, ANYWHERE)],
        RealEngineOnly,
    ),
    bytes(
        "phys_footprint",
        "physical footprint of the engine's process (what Xcode and Instruments show)",
        &[TASK_INFO],
        Always,
    ),
    bytes(
        "java_heap",
        "the Java/ART heap of an Android app (App Summary `Java Heap`)",
        &[DUMPSYS],
        Always,
    ),
    bytes(
        "code",
        "mapped code of an Android app (App Summary `Code`)",
        &[DUMPSYS],
        Always,
    ),
    bytes(
        "stack",
        "thread stacks of an Android app (App Summary `Stack`)",
        &[DUMPSYS],
        Always,
    ),
    bytes(
        "private_other",
        "other private memory of an Android app (App Summary `Private Other`)",
        &[DUMPSYS],
        Always,
    ),
    bytes(
        "system",
        "shared system memory charged to an Android app (App Summary `System`)",
        &[DUMPSYS],
        Always,
    ),
    bytes(
        "swap_pss",
        "swapped-out memory of an Android app, proportionally shared (`TOTAL SWAP PSS`)",
        &[DUMPSYS],
        Always,
    ),
    time(
        "turn_time",
        "wall time of a turn: its engine calls, or from one turn marker to the next",
    ),
    time("open_time", "wall time of a turn's `open` call"),
    time("send_time", "wall time of a turn's `send` calls"),
    time("generate_time", "wall time of a turn's `generate` calls"),
    time("cancel_time", "wall time of a turn's cancelled generations"),
    time("close_time", "wall time of a turn's `close` call"),
];

/// Every metric's name, in registry order, as an array (for constants and `&[&str]` APIs).
pub const NAMES: [&str; REGISTRY.len()] = {
    let mut out = [""; REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        out[i] = REGISTRY[i].name;
        i += 1;
    }
    out
};

/// The registry as a Markdown table (name, unit, meaning, probes by platform, machine dependence),
/// as docs/metrics.md shows it between its `registry-table` markers.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| metric | unit | what it measures | provided by | machine-dependent |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for m in REGISTRY {
        let providers: Vec<String> = m
            .providers
            .iter()
            .map(|p| {
                if p.probe == ProbeKind::Clock {
                    format!("{} (every backend)", p.probe.name())
                } else if p.platforms.is_empty() {
                    format!("{} (reported by the engine)", p.probe.name())
                } else {
                    let on: Vec<&str> = p.platforms.iter().map(|p| p.name()).collect();
                    format!("{} ({})", p.probe.name(), on.join(", "))
                }
            })
            .collect();
        let machine = match m.machine {
            MachineDependence::Always => "always",
            MachineDependence::RealEngineOnly => "on real engines",
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            m.name,
            m.unit.name(),
            m.meaning.replace('|', "\\|"),
            providers.join("; "),
            machine
        ));
    }
    out
}

/// The metric called `name`.
pub fn metric(name: &str) -> Option<&'static Metric> {
    REGISTRY.iter().find(|m| m.name == name)
}

/// Every metric's name, in registry order.
pub fn names() -> impl Iterator<Item = &'static str> + Clone {
    REGISTRY.iter().map(|m| m.name)
}

/// The metrics `probe` provides, in registry order.
pub fn provided_by(probe: ProbeKind) -> impl Iterator<Item = &'static Metric> {
    REGISTRY.iter().filter(move |m| m.provided_by(probe))
}

/// The registered metric named `name`, as a `&'static str` (for code that must name a metric
/// in a constant: it panics at compile time when the name is not registered).
pub const fn name(name: &'static str) -> &'static str {
    let mut i = 0;
    while i < REGISTRY.len() {
        if eq(REGISTRY[i].name, name) {
            return REGISTRY[i].name;
        }
        i += 1;
    }
    panic!("not a registered metric name")
}

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Named metrics, for code that writes or reads one specific metric (checked against the
/// registry at compile time).
pub mod names {
    use super::name;
    /// See [`super::REGISTRY`].
    pub const RSS: &str = name("rss");
    /// See [`super::REGISTRY`].
    pub const PSS: &str = name("pss");
    /// See [`super::REGISTRY`].
    pub const ANON_RSS: &str = name("anon_rss");
    /// See [`super::REGISTRY`].
    pub const SWAP: &str = name("swap");
    /// See [`super::REGISTRY`].
    pub const NATIVE_HEAP: &str = name("native_heap");
    /// See [`super::REGISTRY`].
    pub const GPU: &str = name("gpu");
    /// See [`super::REGISTRY`].
    pub const POOL_ALLOCATED: &str = name("pool_allocated");
    /// See [`super::REGISTRY`].
    pub const POOL_RESERVED: &str = name("pool_reserved");
    /// See [`super::REGISTRY`].
    pub const CL_MEM_BYTES: &str = name("cl_mem_bytes");
    /// See [`super::REGISTRY`].
    pub const OPENCL_BUFFER_BYTES: &str = name("opencl_buffer_bytes");
    /// See [`super::REGISTRY`].
    pub const PHYS_FOOTPRINT: &str = name("phys_footprint");
    /// See [`super::REGISTRY`].
    pub const JAVA_HEAP: &str = name("java_heap");
    /// See [`super::REGISTRY`].
    pub const CODE: &str = name("code");
    /// See [`super::REGISTRY`].
    pub const STACK: &str = name("stack");
    /// See [`super::REGISTRY`].
    pub const PRIVATE_OTHER: &str = name("private_other");
    /// See [`super::REGISTRY`].
    pub const SYSTEM: &str = name("system");
    /// See [`super::REGISTRY`].
    pub const SWAP_PSS: &str = name("swap_pss");
    /// See [`super::REGISTRY`].
    pub const TURN_TIME: &str = name("turn_time");
    /// See [`super::REGISTRY`].
    pub const OPEN_TIME: &str = name("open_time");
    /// See [`super::REGISTRY`].
    pub const SEND_TIME: &str = name("send_time");
    /// See [`super::REGISTRY`].
    pub const GENERATE_TIME: &str = name("generate_time");
    /// See [`super::REGISTRY`].
    pub const CANCEL_TIME: &str = name("cancel_time");
    /// See [`super::REGISTRY`].
    pub const CLOSE_TIME: &str = name("close_time");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_identifiers() {
        let mut seen = std::collections::BTreeSet::new();
        for m in REGISTRY {
            assert!(seen.insert(m.name), "{} is registered twice", m.name);
            assert!(
                m.name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                m.name
            );
            assert!(!m.providers.is_empty(), "{} has no provider", m.name);
            assert!(!m.meaning.ends_with('.'), "{}", m.name);
        }
    }

    #[test]
    fn runner_probes_are_chosen_by_platform_cheapest_first() {
        let rss = metric("rss").unwrap();
        let all = |_| true;
        assert_eq!(
            rss.runner_probe(Platform::Linux, all),
            Some(ProbeKind::Proc)
        );
        assert_eq!(
            rss.runner_probe(Platform::MacOs, all),
            Some(ProbeKind::TaskInfo)
        );
        // An Android app target has no /proc access to the app: dumpsys is next.
        assert_eq!(
            rss.runner_probe(Platform::Android, |p| p != ProbeKind::Proc),
            Some(ProbeKind::Dumpsys)
        );
        // Engine-reported metrics are never read by the runner.
        let heap = metric("native_heap").unwrap();
        assert_eq!(heap.runner_probe(Platform::Linux, all), None);
        assert_eq!(
            metric("phys_footprint")
                .unwrap()
                .runner_probe(Platform::Linux, all),
            None
        );
    }

    #[test]
    fn simulated_metrics_are_machine_independent_unless_measured_by_the_os() {
        assert!(metric("rss").unwrap().is_machine_dependent(true));
        assert!(!metric("gpu").unwrap().is_machine_dependent(true));
        assert!(metric("gpu").unwrap().is_machine_dependent(false));
    }

    /// docs/metrics.md shows the registry as it is.
    #[test]
    fn the_docs_table_is_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let docs = std::fs::read_to_string(path).expect("docs/metrics.md exists");
        let start = "<!-- registry-table: start -->\n";
        let end = "<!-- registry-table: end -->";
        let from = docs.find(start).expect("start marker") + start.len();
        let to = docs.find(end).expect("end marker");
        assert_eq!(
            &docs[from..to],
            markdown_table(),
            "docs/metrics.md is out of date: paste markdown_table() between the markers"
        );
    }

    #[test]
    fn time_metrics_are_in_nanoseconds_from_the_clock() {
        let times: Vec<&str> = provided_by(ProbeKind::Clock).map(|m| m.name).collect();
        assert_eq!(
            times,
            [
                names::TURN_TIME,
                names::OPEN_TIME,
                names::SEND_TIME,
                names::GENERATE_TIME,
                names::CANCEL_TIME,
                names::CLOSE_TIME
            ]
        );
        for name in times {
            let m = metric(name).unwrap();
            assert_eq!(m.unit, Unit::Nanoseconds);
            assert!(!m.is_machine_dependent(true) && m.is_machine_dependent(false));
        }
    }

    #[test]
    fn named_constants_are_registered() {
        assert_eq!(names::CL_MEM_BYTES, "cl_mem_bytes");
        assert_eq!(provided_by(ProbeKind::TaskInfo).count(), 2);
    }
}
