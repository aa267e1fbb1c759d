//! `target:`: where the measured process lives. This machine (the default), a machine reached
//! over ssh, or an Android device over adb (a native worker process, or an app by package or
//! pid). The raw form mirrors the YAML; [`validate_target`] checks every value that ends up on a
//! remote command line, so nothing the scenario says can become an option of `ssh` or `adb`
//! (the rules for hosts, users, serials and ssh options are in `names`).

mod names;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::scenario::error::ScenarioError;
use crate::scenario::model::EngineSpec;
use crate::scenario::validate::Context;

/// Where the engine's process lives and how leakloop reaches it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// This machine: the engine runs in this process or in a local worker.
    #[default]
    Local,
    /// Another machine: the worker runs there, started with `ssh [options] HOST COMMAND`.
    Ssh(SshTarget),
    /// An Android device reached with `adb [-s SERIAL] shell COMMAND`.
    Adb(AdbTarget),
}

impl Target {
    /// Whether this is the default (this machine); the report leaves such a target out.
    pub fn is_local(&self) -> bool {
        matches!(self, Target::Local)
    }

    /// The remote worker this target starts, if the engine runs on the target.
    pub fn remote_worker(&self) -> Option<&RemoteWorker> {
        match self {
            Target::Local => None,
            Target::Ssh(ssh) => Some(&ssh.worker),
            Target::Adb(adb) => match &adb.process {
                AdbProcess::Native(worker) => Some(worker),
                AdbProcess::Package(_) | AdbProcess::Pid(_) => None,
            },
        }
    }
}

/// `target: {ssh: {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshTarget {
    /// The host name or address.
    pub host: String,
    /// The port (`ssh -p`); ssh's default when absent.
    pub port: Option<u16>,
    /// The user (`ssh -l`); ssh's default when absent.
    pub user: Option<String>,
    /// A private key file (`ssh -i`), resolved against the scenario's folder.
    pub identity: Option<PathBuf>,
    /// Extra `ssh -o Key=Value` options, in order, each one of the allowed options (see
    /// docs/device-farm.md), the key spelled as ssh documents it.
    pub options: Vec<String>,
    /// How the worker is put on the machine and started.
    pub worker: RemoteWorker,
}

/// `target: {adb: {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdbTarget {
    /// The device's serial (`adb -s`); adb's own choice (the only device) when absent.
    pub serial: Option<String>,
    /// Which process on the device is measured.
    pub process: AdbProcess,
}

/// The process measured on an Android device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdbProcess {
    /// leakloop's worker runs on the device (an Android build of leakloop); sampled from /proc.
    Native(RemoteWorker),
    /// An app, sampled with `dumpsys meminfo PACKAGE`; the engine's driver runs on this machine.
    Package(String),
    /// A process by id, sampled with `dumpsys meminfo PID`; the driver runs on this machine.
    Pid(u32),
}

/// What the remote worker needs: the leakloop binary, a folder, files to copy, environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RemoteWorker {
    /// A leakloop binary already on the target; when absent, this binary is copied there.
    pub leakloop: Option<String>,
    /// The folder on the target for copied files and the worker's working directory; when
    /// absent, a fresh folder is made and removed at the end.
    pub dir: Option<String>,
    /// Engine files copied to the target before the worker starts (their paths in the scenario
    /// are then rewritten); files not copied are used at the paths the scenario gives.
    pub push: Vec<PushItem>,
    /// Environment of the remote worker.
    pub env: BTreeMap<String, String>,
}

/// An engine file copied to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(test, schemars(rename = "push_item"))]
pub enum PushItem {
    /// `engine.model`.
    Model,
    /// `engine.lib`.
    Lib,
}

/// `target:` as written: `local`, or a map with one key, `ssh` or `adb`.
#[derive(Debug)]
pub(crate) enum RawTarget {
    Local,
    Ssh(RawSsh),
    Adb(RawAdb),
}

/// The kinds of target, as written.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TargetName {
    Local,
    Ssh,
    Adb,
}

impl<'de> Deserialize<'de> for RawTarget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawTarget;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`local`, or a map with one key, `ssh` or `adb` (for example `ssh: {host: box}`)")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<RawTarget, E> {
                match value {
                    "local" => Ok(RawTarget::Local),
                    other => Err(de::Error::unknown_variant(other, &["local", "ssh", "adb"])),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawTarget, A::Error> {
                let Some(name) = map.next_key::<TargetName>()? else {
                    return Err(de::Error::custom(
                        "empty target: write `local`, `ssh: {...}` or `adb: {...}`",
                    ));
                };
                let target = match name {
                    TargetName::Local => {
                        map.next_value::<de::IgnoredAny>()?;
                        RawTarget::Local
                    }
                    TargetName::Ssh => RawTarget::Ssh(map.next_value()?),
                    TargetName::Adb => RawTarget::Adb(map.next_value()?),
                };
                if let Some(extra) = map.next_key::<String>()? {
                    return Err(de::Error::custom(format!(
                        "a target has exactly one key, but this one also has `{extra}`"
                    )));
                }
                Ok(target)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A machine reached with `ssh [options] HOST COMMAND`; the worker runs there.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "target_ssh"))]
pub(crate) struct RawSsh {
    /// A DNS name (or a `Host` alias of your ssh config), an IPv4 or IPv6 address, or `user@`
    /// and one of those.
    host: String,
    /// The port (`ssh -p`); ssh's default when absent.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 65_535)))]
    port: Option<i64>,
    /// The user (`ssh -l`); ssh's default when absent.
    #[serde(default)]
    user: Option<String>,
    /// A private key file (`ssh -i`), relative to the scenario's folder.
    #[serde(default)]
    identity: Option<String>,
    /// Extra `ssh -o Key=Value` options, in order, as `Key=Value` or `Key Value` (for example
    /// `StrictHostKeyChecking=accept-new`); only the keys docs/device-farm.md lists (any case)
    /// pass `leakloop check`: ProxyCommand, LocalCommand, Match and the like are refused.
    #[serde(default)]
    options: Option<Vec<String>>,
    /// A leakloop binary already on the target (a path, or a name on its PATH); when absent
    /// this binary (or LEAKLOOP_TARGET_BIN) is copied there.
    #[serde(default)]
    leakloop: Option<String>,
    /// An absolute folder on the target for copied files and the worker's working directory;
    /// when absent a fresh one is made under /tmp and removed at the end.
    #[serde(default)]
    dir: Option<String>,
    /// Engine files copied to the target before the worker starts; the others are used at the
    /// paths the scenario gives, on the target.
    #[serde(default)]
    push: Option<Vec<PushItem>>,
    /// Environment of the remote worker (for example LITERT_LM_LIB).
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
}

/// An Android device reached with `adb [-s SERIAL] shell COMMAND`.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "target_adb"))]
pub(crate) struct RawAdb {
    /// The device's serial (`adb -s`) as `adb devices` lists it; adb's own choice (the only
    /// device) when absent.
    #[serde(default)]
    serial: Option<String>,
    /// An app, sampled with `dumpsys meminfo PACKAGE` at every sample; the engine's driver runs
    /// on this machine.
    #[serde(default)]
    package: Option<String>,
    /// A process by id, sampled with `dumpsys meminfo PID`; the driver runs on this machine.
    #[serde(default)]
    #[cfg_attr(test, schemars(range(min = 1, max = 2_147_483_647)))]
    pid: Option<i64>,
    /// leakloop's worker runs on the device (an Android build of leakloop), sampled from its
    /// own /proc.
    #[serde(default)]
    native: Option<RawNative>,
}

/// leakloop's worker on an Android device.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(test, schemars(rename = "target_native"))]
pub(crate) struct RawNative {
    /// A leakloop binary already on the device; when absent LEAKLOOP_TARGET_BIN (or this
    /// binary) is pushed.
    #[serde(default)]
    leakloop: Option<String>,
    /// An absolute folder on the device; when absent a fresh one is made under /data/local/tmp
    /// and removed at the end.
    #[serde(default)]
    dir: Option<String>,
    /// Engine files pushed to the device before the worker starts.
    #[serde(default)]
    push: Option<Vec<PushItem>>,
    /// Environment of the worker on the device.
    #[serde(default)]
    env: Option<BTreeMap<String, String>>,
}

/// Validates `target:` against the engine it runs (files to push must be named there).
pub(crate) fn validate_target(
    raw: Option<RawTarget>,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<Target, ScenarioError> {
    match raw {
        None | Some(RawTarget::Local) => Ok(Target::Local),
        Some(RawTarget::Ssh(ssh)) => validate_ssh(ssh, engine, cx).map(Target::Ssh),
        Some(RawTarget::Adb(adb)) => validate_adb(adb, engine, cx).map(Target::Adb),
    }
}

fn validate_ssh(
    raw: RawSsh,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<SshTarget, ScenarioError> {
    let at = "target.ssh";
    let refuse = |path: String, value: &str, what: &str, why: String| {
        cx.invalid(
            &path,
            format!("`{}` is not a valid {what}: {why}", escape(value)),
        )
    };
    names::ssh_host(&raw.host)
        .map_err(|why| refuse(format!("{at}.host"), &raw.host, "host", why))?;
    let port = match raw.port {
        None => None,
        Some(p) => Some(u16::try_from(p).ok().filter(|p| *p > 0).ok_or_else(|| {
            cx.invalid(
                &format!("{at}.port"),
                format!("`port` must be 1 to 65535, got {p}"),
            )
        })?),
    };
    if let Some(user) = &raw.user {
        names::user(user).map_err(|why| refuse(format!("{at}.user"), user, "user", why))?;
        if raw.host.contains('@') {
            return Err(cx.invalid(
                &format!("{at}.user"),
                "the user is named twice: in `user` and as `user@` in `host`; keep one",
            ));
        }
    }
    let identity = match raw.identity.as_deref() {
        None => None,
        Some("") => return Err(cx.invalid(&format!("{at}.identity"), "`identity` is empty")),
        Some(p) if has_control(p) => {
            return Err(cx.invalid(
                &format!("{at}.identity"),
                "`identity` cannot hold control characters",
            ))
        }
        Some(p) => Some(resolve(cx.file, p)),
    };
    let options = raw
        .options
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, option)| {
            names::ssh_option(option)
                .map_err(|why| refuse(format!("{at}.options[{i}]"), option, "ssh option", why))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let worker = remote_worker(at, raw.leakloop, raw.dir, raw.push, raw.env, engine, cx)?;
    Ok(SshTarget {
        host: raw.host,
        port,
        user: raw.user,
        identity,
        options,
        worker,
    })
}

fn validate_adb(
    raw: RawAdb,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<AdbTarget, ScenarioError> {
    let at = "target.adb";
    if let Some(serial) = &raw.serial {
        names::adb_serial(serial).map_err(|why| {
            cx.invalid(
                &format!("{at}.serial"),
                format!("`{}` is not a valid serial: {why}", escape(serial)),
            )
        })?;
    }
    let given = [
        raw.package.is_some(),
        raw.pid.is_some(),
        raw.native.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(cx.invalid_key(
            at,
            "say which process is measured with exactly one of `package` (an app, sampled with \
             dumpsys meminfo), `pid` (a process by id, the same) or `native` (leakloop's worker \
             on the device, sampled from /proc)",
        ));
    }
    let process = if let Some(package) = raw.package {
        let valid = !package.is_empty()
            && !package.starts_with(['-', '.'])
            && package
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':'));
        if !valid {
            return Err(cx.invalid(
                &format!("{at}.package"),
                format!(
                    "`{}` is not an Android package or process name (letters, digits, `.`, `_`, `:`)",
                    escape(&package)
                ),
            ));
        }
        AdbProcess::Package(package)
    } else if let Some(pid) = raw.pid {
        AdbProcess::Pid(u32::try_from(pid).ok().filter(|p| *p > 0).ok_or_else(|| {
            cx.invalid(
                &format!("{at}.pid"),
                format!("`pid` must be a process id, got {pid}"),
            )
        })?)
    } else {
        let native = raw.native.unwrap_or_default();
        let at = format!("{at}.native");
        AdbProcess::Native(remote_worker(
            &at,
            native.leakloop,
            native.dir,
            native.push,
            native.env,
            engine,
            cx,
        )?)
    };
    Ok(AdbTarget {
        serial: raw.serial,
        process,
    })
}

fn remote_worker(
    at: &str,
    leakloop: Option<String>,
    dir: Option<String>,
    push: Option<Vec<PushItem>>,
    env: Option<BTreeMap<String, String>>,
    engine: &EngineSpec,
    cx: &Context<'_>,
) -> Result<RemoteWorker, ScenarioError> {
    if let Some(path) = &leakloop {
        if path.is_empty() || path.starts_with('-') || has_control(path) {
            return Err(cx.invalid(
                &format!("{at}.leakloop"),
                "`leakloop` must name a file on the target (a path, or a name on its PATH, not \
                 starting with `-`)",
            ));
        }
    }
    if let Some(path) = &dir {
        if !path.starts_with('/') || has_control(path) {
            return Err(cx.invalid(
                &format!("{at}.dir"),
                format!(
                    "`dir` must be an absolute path on the target, got `{}`",
                    escape(path)
                ),
            ));
        }
    }
    let push = push.unwrap_or_default();
    for (i, item) in push.iter().enumerate() {
        let (named, key) = match item {
            PushItem::Model => (engine.model.is_some(), "model"),
            PushItem::Lib => (engine.lib.is_some(), "lib"),
        };
        if !named {
            return Err(cx.invalid(
                &format!("{at}.push[{i}]"),
                format!("`{key}` is pushed, but the scenario names no `engine.{key}` to copy"),
            ));
        }
    }
    let env = env.unwrap_or_default();
    for (key, value) in &env {
        let valid = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(cx.invalid_key(
                &format!("{at}.env.{key}"),
                format!("`{}` is not an environment variable name", escape(key)),
            ));
        }
        if has_control(value) {
            return Err(cx.invalid(
                &format!("{at}.env.{key}"),
                "an environment value cannot hold control characters",
            ));
        }
    }
    Ok(RemoteWorker {
        leakloop,
        dir,
        push,
        env,
    })
}

fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// A value quoted in a message: control characters escaped, at most about 80 characters.
fn escape(text: &str) -> String {
    crate::input::shorten(&crate::input::printable(text), 80).into_owned()
}

fn resolve(file: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_owned()
    } else {
        file.parent().unwrap_or(Path::new("")).join(p)
    }
}
