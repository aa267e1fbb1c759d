//! adb's failures, read from its messages (adb 1.0.41 as Debian ships it; the same texts as the
//! Android SDK's platform-tools): which device state stopped a command, and what that means for
//! the exit code.

use crate::engine::transport::command::{last_line, shown, Transport};
use crate::engine::transport::error::{TargetError, TargetErrorKind};

/// The device states adb reports, in its own words, and what each means here.
const STATES: &[(&str, TargetErrorKind, &str)] = &[
    (
        "' not found",
        TargetErrorKind::BadTarget,
        "no attached device has this serial (`adb devices` lists them)",
    ),
    (
        "more than one device",
        TargetErrorKind::BadTarget,
        "several devices are attached: name one with `serial`",
    ),
    (
        "no devices/emulators found",
        TargetErrorKind::Unreachable,
        "no device is attached (`adb devices` lists none)",
    ),
    (
        "unauthorized",
        TargetErrorKind::Unreachable,
        "the device has not authorised this computer: accept the USB debugging prompt on it",
    ),
    (
        "offline",
        TargetErrorKind::Unreachable,
        "the device is offline: reconnect it or restart adb (`adb kill-server`)",
    ),
    (
        "cannot connect to daemon",
        TargetErrorKind::Unreachable,
        "the adb server cannot be reached",
    ),
    (
        "device is bootloader",
        TargetErrorKind::Unreachable,
        "the device is in its bootloader, not running Android",
    ),
    (
        "device is recovery",
        TargetErrorKind::Unreachable,
        "the device is in recovery, not running Android",
    ),
];

/// The error a failed adb command's stderr shows. `what` is the command (for one that ran on
/// the device and failed there); a device that was there and is gone is [`TargetErrorKind::Lost`].
pub(crate) fn classify_adb(transport: &Transport, stderr: &str, what: Option<&str>) -> TargetError {
    let lower = stderr.to_ascii_lowercase();
    for (needle, kind, meaning) in STATES {
        if lower.contains(needle) {
            return TargetError::new(
                *kind,
                transport.name(),
                format!("{meaning}{}", last_line(stderr)),
            );
        }
    }
    // adb's words for a device that went away while a command ran on it.
    if ["device disconnected", "protocol fault", "closed"]
        .iter()
        .any(|n| lower.contains(n))
    {
        return TargetError::new(
            TargetErrorKind::Lost,
            transport.name(),
            format!("the device went away{}", last_line(stderr)),
        );
    }
    TargetError::new(
        TargetErrorKind::Command,
        transport.name(),
        match what {
            Some(what) => format!("`{}` failed{}", shown(what), last_line(stderr)),
            None => format!("adb failed{}", last_line(stderr)),
        },
    )
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::scenario::{AdbProcess, AdbTarget};

    fn adb() -> Transport {
        Transport::Adb(AdbTarget {
            serial: Some("R58M".into()),
            process: AdbProcess::Package("com.example".into()),
        })
    }

    // The texts are adb's own: the first two as Debian's adb 1.0.41 printed them here, the rest
    // as platform-tools prints them (adb/client/commandline.cpp's messages).
    #[rstest]
    #[case::unknown_serial("error: device 'R58M' not found", TargetErrorKind::BadTarget)]
    #[case::no_device("error: no devices/emulators found", TargetErrorKind::Unreachable)]
    #[case::unauthorized(
        "error: device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set",
        TargetErrorKind::Unreachable
    )]
    #[case::offline("error: device offline", TargetErrorKind::Unreachable)]
    #[case::several("error: more than one device/emulator", TargetErrorKind::BadTarget)]
    #[case::vanished("error: closed", TargetErrorKind::Lost)]
    #[case::failed_command(
        "/system/bin/sh: dumpsys: inaccessible or not found",
        TargetErrorKind::Command
    )]
    fn adb_messages_map_to_kinds(#[case] stderr: &str, #[case] kind: TargetErrorKind) {
        let err = classify_adb(&adb(), stderr, Some("dumpsys meminfo com.example"));
        assert_eq!(err.kind, kind, "{err}");
        assert!(err.to_string().contains("adb -s R58M"), "{err}");
    }
}
