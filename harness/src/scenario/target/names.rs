//! What a target may put on the `ssh` and `adb` command lines: host names, user names, adb
//! serials and ssh options, each checked against a positive rule (what it may be) rather than a
//! list of bad characters, so that no scenario value can become an option of `ssh` or `adb`, and
//! no ssh option can run a local command, read another configuration or connect elsewhere.
//!
//! Each check returns the value as it goes on the command line, or why it is refused; the
//! caller locates the refusal at the scenario's key.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The ssh options a target may set (`options:`), in ssh_config's spelling. Each only tunes the
/// one connection leakloop opens: where and as whom to log in, which keys and host keys to trust,
/// timeouts, keep-alives, algorithms and logging. Options outside this list are refused.
pub(crate) const SSH_OPTIONS: &[&str] = &[
    "AddressFamily",
    "BatchMode",
    "BindAddress",
    "CertificateFile",
    "CheckHostIP",
    "Ciphers",
    "Compression",
    "ConnectionAttempts",
    "ConnectTimeout",
    "GlobalKnownHostsFile",
    "HashKnownHosts",
    "HostKeyAlgorithms",
    "HostKeyAlias",
    "IdentitiesOnly",
    "IdentityFile",
    "IPQoS",
    "KexAlgorithms",
    "LogLevel",
    "MACs",
    "NumberOfPasswordPrompts",
    "PasswordAuthentication",
    "Port",
    "PreferredAuthentications",
    "PubkeyAcceptedAlgorithms",
    "PubkeyAuthentication",
    "RekeyLimit",
    "ServerAliveCountMax",
    "ServerAliveInterval",
    "StrictHostKeyChecking",
    "TCPKeepAlive",
    "UpdateHostKeys",
    "User",
    "UserKnownHostsFile",
    "VerifyHostKeyDNS",
];

/// Options that are refused for a reason worth saying (lower case, as ssh compares keywords).
const DANGEROUS: &[(&str, &str)] = &[
    ("proxycommand", "it runs a local command"),
    ("localcommand", "it runs a local command"),
    (
        "permitlocalcommand",
        "it lets `LocalCommand` run a local command",
    ),
    ("knownhostscommand", "it runs a local command"),
    ("match", "`Match exec` runs a local command"),
    ("proxyjump", "it connects through another host"),
    ("include", "it reads another configuration file"),
    ("remotecommand", "it replaces the worker's command"),
    ("pkcs11provider", "it loads a local library into ssh"),
    ("securitykeyprovider", "it loads a local library into ssh"),
    (
        "controlmaster",
        "it leaves a master connection running after leakloop",
    ),
    (
        "controlpath",
        "it shares a connection leakloop did not open",
    ),
    (
        "controlpersist",
        "it leaves a master connection running after leakloop",
    ),
    (
        "hostname",
        "it changes the host the scenario names (write it in `host`)",
    ),
    ("localforward", "it opens a forwarded port"),
    ("remoteforward", "it opens a forwarded port"),
    ("dynamicforward", "it opens a forwarded port"),
    ("forwardagent", "it hands the local ssh agent to the target"),
    ("forwardx11", "it hands the local display to the target"),
    ("requesttty", "a terminal would garble the worker protocol"),
];

/// `Key=Value` or `Key Value` (ssh's two spellings, the key in any case) checked against
/// [`SSH_OPTIONS`]; the option as it is passed (`ssh -o Key=Value`, the key spelled as ssh's
/// documentation spells it).
pub(crate) fn ssh_option(option: &str) -> Result<String, String> {
    let key_len = option
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(option.len());
    let (key, rest) = option.split_at(key_len);
    let rest = rest.trim_start_matches([' ', '\t']);
    let value = rest
        .strip_prefix('=')
        .map(|v| v.trim_start_matches([' ', '\t']))
        .or((rest.len() < option.len() - key_len).then_some(rest));
    let (Some(value), false) = (value, key.is_empty()) else {
        return Err("write `Key=Value` or `Key Value` (passed as `ssh -o Key=Value`)".into());
    };
    let lower = key.to_ascii_lowercase();
    if let Some((_, why)) = DANGEROUS.iter().find(|(k, _)| *k == lower) {
        return Err(format!("`{key}` is refused: {why}"));
    }
    let Some(known) = SSH_OPTIONS.iter().find(|k| k.eq_ignore_ascii_case(key)) else {
        return Err(format!(
            "`{key}` is not among the ssh options a target may set ({})",
            SSH_OPTIONS.join(", ")
        ));
    };
    if value.trim().is_empty() {
        return Err(format!("`{known}` has no value"));
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "the value of `{known}` holds a control character (a newline would start another \
             option)"
        ));
    }
    match *known {
        // leakloop never lets ssh stop to ask (no terminal to answer on).
        "BatchMode" if !value.eq_ignore_ascii_case("yes") => {
            return Err("`BatchMode` can only be `yes`: ssh must never stop to ask".into())
        }
        "User" => user(value)?,
        "Port" if !value.parse::<u16>().is_ok_and(|p| p > 0) => {
            return Err(format!("`Port` must be 1 to 65535, got `{value}`"))
        }
        _ => {}
    }
    Ok(format!("{known}={value}"))
}

/// An ssh host: a DNS name (or a `Host` alias of the user's ssh configuration, spelled the
/// same way), an IPv4 or IPv6 address, or `user@` and one of those.
pub(crate) fn ssh_host(host: &str) -> Result<(), String> {
    let name = match host.rsplit_once('@') {
        Some((login, name)) => {
            user(login)?;
            name
        }
        None => host,
    };
    if name.parse::<Ipv4Addr>().is_ok() || ipv6(name) || dns_name(name) {
        Ok(())
    } else {
        Err(
            "it is not a host name (letters, digits, `-`, `_` and `.`, not starting with `-`), \
             an IPv4 or IPv6 address, or `user@` and one of those"
                .into(),
        )
    }
}

/// A login name: letters, digits, `.`, `_` and `-`, not starting with `-`, at most 64.
pub(crate) fn user(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{}` is not a user name (letters, digits, `.`, `_` and `-`, not starting with `-`)",
            crate::input::shorten(&crate::input::printable(name), 80)
        ))
    }
}

/// An adb serial: what `adb devices` lists (`emulator-5554`, `R58M12ABC`, `192.168.1.5:5555`,
/// `[::1]:5555`, an mDNS name such as `adb-XYZ._adb-tls-connect._tcp`, `usb:1-2`).
pub(crate) fn adb_serial(serial: &str) -> Result<(), String> {
    let valid = !serial.is_empty()
        && serial.len() <= 255
        && !serial.starts_with('-')
        && serial
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '[' | ']'));
    if valid {
        Ok(())
    } else {
        Err(
            "it is not an adb serial (letters, digits, `.`, `_`, `-`, `:`, `[` and `]`, not \
             starting with `-`, as `adb devices` lists them)"
                .into(),
        )
    }
}

/// An IPv6 address, with an optional zone (`fe80::1%eth0`).
fn ipv6(text: &str) -> bool {
    let (address, zone) = text.split_once('%').unwrap_or((text, "a"));
    address.parse::<Ipv6Addr>().is_ok()
        && !zone.is_empty()
        && zone
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
}

/// A DNS name (one trailing dot allowed): labels of letters, digits, `-` and `_` (found in ssh
/// `Host` aliases), 1 to 63 long, not starting with `-`; at most 253 in all.
fn dns_name(text: &str) -> bool {
    let name = text.strip_suffix('.').unwrap_or(text);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::equals("StrictHostKeyChecking=no", "StrictHostKeyChecking=no")]
    #[case::space("ConnectTimeout 5", "ConnectTimeout=5")]
    #[case::any_case("userknownhostsfile=/dev/null", "UserKnownHostsFile=/dev/null")]
    #[case::spaced_equals("LogLevel = ERROR", "LogLevel=ERROR")]
    #[case::tab("Port\t2222", "Port=2222")]
    #[case::identity("IdentityFile ~/.ssh/id_ed25519", "IdentityFile=~/.ssh/id_ed25519")]
    #[case::batch_mode("batchmode=YES", "BatchMode=YES")]
    fn allowed_options_in_any_spelling_are_passed_as_key_equals_value(
        #[case] option: &str,
        #[case] passed: &str,
    ) {
        assert_eq!(ssh_option(option).as_deref(), Ok(passed));
    }

    #[rstest]
    #[case::proxy_command("ProxyCommand=sh -c 'touch /tmp/x'", "runs a local command")]
    #[case::proxy_command_lower("proxycommand nc %h %p", "runs a local command")]
    #[case::local_command("LocalCommand=id", "runs a local command")]
    #[case::permit_local_command("PermitLocalCommand=yes", "`LocalCommand`")]
    #[case::known_hosts_command("KnownHostsCommand /bin/echo", "runs a local command")]
    #[case::match_exec("Match exec \"touch /tmp/x\"", "`Match exec`")]
    #[case::proxy_jump("ProxyJump=evil", "another host")]
    #[case::include("Include /etc/passwd", "another configuration")]
    #[case::pkcs11("PKCS11Provider=/tmp/x.so", "local library")]
    #[case::hostname("HostName=elsewhere", "changes the host")]
    #[case::config_file("-F /dev/null", "write `Key=Value`")]
    #[case::dash_o("-oProxyCommand=x", "write `Key=Value`")]
    #[case::no_value("ConnectTimeout", "write `Key=Value`")]
    #[case::empty_value("ConnectTimeout=", "has no value")]
    #[case::newline("LogLevel=ERROR\nProxyCommand=sh", "control character")]
    #[case::unknown("SendEnv=LANG", "not among the ssh options")]
    #[case::batch_mode_no("BatchMode=no", "can only be `yes`")]
    #[case::bad_port("Port=0", "1 to 65535")]
    #[case::bad_user("User=-oProxyCommand=x", "not a user name")]
    fn other_options_are_refused_saying_why(#[case] option: &str, #[case] says: &str) {
        let why = ssh_option(option).unwrap_err();
        assert!(why.contains(says), "{option}: {why}");
    }

    #[rstest]
    #[case::name("build-box")]
    #[case::fqdn("ci.example.org.")]
    #[case::alias("build_box")]
    #[case::ipv4("192.168.1.20")]
    #[case::ipv6("::1")]
    #[case::ipv6_zone("fe80::1%eth0")]
    #[case::user_at("ci@build-box")]
    #[case::user_at_ipv6("ci@2001:db8::2")]
    fn hosts_that_are_names_or_addresses_pass(#[case] host: &str) {
        assert_eq!(ssh_host(host), Ok(()), "{host}");
    }

    #[rstest]
    #[case::option("-oProxyCommand=sh")]
    #[case::substitution("$(touch /tmp/x)")]
    #[case::backticks("`id`")]
    #[case::space("build box")]
    #[case::quote("box'")]
    #[case::double_quote("\"box\"")]
    #[case::semicolon("box;id")]
    #[case::newline("box\n-oProxyCommand=x")]
    #[case::empty("")]
    #[case::label_dash("box.-x")]
    #[case::empty_label("a..b")]
    #[case::user_dash("-l@box")]
    #[case::empty_user("@box")]
    #[case::two_ats("a@b@box")]
    #[case::zone_injection("fe80::1%$(id)")]
    fn hosts_that_could_be_options_or_shell_are_refused(#[case] host: &str) {
        assert!(ssh_host(host).is_err(), "{host:?} passed");
    }

    #[rstest]
    #[case::emulator("emulator-5554", true)]
    #[case::usb("R58M12ABC", true)]
    #[case::tcp("192.168.1.5:5555", true)]
    #[case::tcp_v6("[::1]:5555", true)]
    #[case::mdns("adb-R58M-x._adb-tls-connect._tcp", true)]
    #[case::usb_path("usb:1-2", true)]
    #[case::option("-d", false)]
    #[case::substitution("$(id)", false)]
    #[case::space("a b", false)]
    #[case::quote("a'b", false)]
    #[case::empty("", false)]
    fn serials_are_what_adb_devices_lists(#[case] serial: &str, #[case] valid: bool) {
        assert_eq!(adb_serial(serial).is_ok(), valid, "{serial}");
    }
}
