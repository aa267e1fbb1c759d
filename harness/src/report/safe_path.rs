//! Names read from data, made into file names: the one gate between a file's content (a suite
//! index's `folder` entries, scenario names, build labels) and a path leakloop writes, reads or
//! removes.
//!
//! Two policies, chosen by what the name is:
//!
//! - **Refused** ([`check_name`], [`contained`]): names that are structure, such as the `folder`
//!   of a suite index entry. A name must be one plain path component: not empty, not `.` or `..`,
//!   not starting with `.` (hidden names are the lock file's and the atomic writes' temporaries),
//!   without `/` or `\` (so never an absolute path), without NUL or any other control character,
//!   and at most [`MAX_NAME_BYTES`] bytes. A refusal is an error that names the file and the
//!   entry ([`UnsafeName`]); the caller never guesses what the name meant.
//! - **Mapped** ([`slug`], [`unique_slugs`]): display names used as file names (a scenario's
//!   name for its trend plot, a build label for its folder). Every character other than ASCII
//!   letters, digits, `.`, `_` and `-` becomes `_`, a leading `.` becomes `_`, and a long name is
//!   cut (with a hash of the whole name, so two long names stay apart). Two different names whose
//!   slugs would be the same file (also when only their case differs, for case-insensitive file
//!   systems), or a slug that is one of the caller's reserved names, each get `-` and 8 hex
//!   digits of their own name's hash: two names never share a file silently.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// The longest name accepted or produced, in bytes (under every file system's 255, leaving room
/// for an extension and a hash suffix).
pub const MAX_NAME_BYTES: usize = 200;

/// Why a name read from data cannot be a file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameProblem {
    /// The name is empty.
    Empty,
    /// `.`, `..`, or another name starting with `.` (hidden names are leakloop's own).
    Dot,
    /// It has `/` or `\`: a path, not a name (an absolute path included).
    Separator,
    /// It has NUL or another control character.
    Control,
    /// It is longer than [`MAX_NAME_BYTES`].
    TooLong,
    /// Another entry of the same file already names this file (compared without case).
    Taken,
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameProblem::Empty => "it is empty",
            NameProblem::Dot => "it starts with `.` (`.`, `..` and hidden names are refused)",
            NameProblem::Separator => {
                "it holds a path separator (a name must be one folder or file inside its root, \
                 never a path or an absolute path)"
            }
            NameProblem::Control => "it holds a NUL or control character",
            NameProblem::TooLong => "it is longer than 200 bytes",
            NameProblem::Taken => {
                "another entry already names it (compared without case): two entries cannot \
                 share one file"
            }
        })
    }
}

/// A name in a data file that was refused as a file name: the file, the entry and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{}: {entry} is `{}`, which cannot be a file name inside its folder: {problem}",
    file.display(),
    crate::input::printable(name)
)]
pub struct UnsafeName {
    /// The data file the name was read from.
    pub file: PathBuf,
    /// Which entry of it (e.g. `scenarios[2].folder`).
    pub entry: String,
    /// The name as read.
    pub name: String,
    /// Why it was refused.
    pub problem: NameProblem,
}

/// Checks that `name` is one plain file name (see the module doc for what is refused).
pub fn check_name(name: &str) -> Result<(), NameProblem> {
    if name.is_empty() {
        Err(NameProblem::Empty)
    } else if name.starts_with('.') {
        Err(NameProblem::Dot)
    } else if name.contains(['/', '\\']) {
        Err(NameProblem::Separator)
    } else if name.chars().any(char::is_control) {
        Err(NameProblem::Control)
    } else if name.len() > MAX_NAME_BYTES {
        Err(NameProblem::TooLong)
    } else {
        Ok(())
    }
}

/// `root/name` for a `name` read from `file`'s `entry`, or the refusal that names them.
pub fn contained(root: &Path, name: &str, file: &Path, entry: &str) -> Result<PathBuf, UnsafeName> {
    check_name(name).map_err(|problem| UnsafeName {
        file: file.to_owned(),
        entry: entry.to_owned(),
        name: name.to_owned(),
        problem,
    })?;
    Ok(root.join(name))
}

/// FNV-1a, 64 bits: a fixed, documented hash (Rust's own `Hasher`s may change between releases),
/// so that a name maps to the same file on every machine.
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// 8 hex digits of `name`'s hash.
fn short_hash(name: &str) -> String {
    format!("{:08x}", fnv1a64(name.as_bytes()) & 0xffff_ffff)
}

/// Maps one character to itself when it is safe in a file name everywhere, else to `_`.
pub(crate) fn slug_char(c: char) -> char {
    if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
        c
    } else {
        '_'
    }
}

/// `name` as a safe file name (see the module doc); never refused, always passes [`check_name`].
/// Not unique on its own: use [`unique_slugs`] for a set of names.
pub fn slug(name: &str) -> String {
    let mut out: String = name.chars().map(slug_char).collect();
    if out.is_empty() {
        out.push('_');
    }
    if out.starts_with('.') {
        out.replace_range(..1, "_");
    }
    // A cut name keeps the hash of the whole one: two long names sharing a start stay apart.
    let room = MAX_NAME_BYTES - 9 - 16;
    if out.len() > room {
        out.truncate(room);
        out = format!("{out}-{}", short_hash(name));
    }
    out
}

/// One safe, distinct file name per distinct name, in the order given: each name's `base` (a
/// [`slug`], or a caller's own mapping that only yields safe names), with `-` and 8 hex digits of
/// the name's hash added where two different names' bases would be the same file (compared
/// without case) or a base is one of `reserved` (compared without case). The same name given
/// twice gets the same file name.
pub fn unique_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
    base: impl Fn(&str) -> String,
    reserved: &[&str],
) -> Vec<String> {
    let names: Vec<&str> = names.into_iter().collect();
    let bases: Vec<String> = names.iter().map(|n| base(n)).collect();
    let mut owners: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (name, b) in names.iter().zip(&bases) {
        owners.entry(b.to_lowercase()).or_default().insert(name);
    }
    for r in reserved {
        owners.entry(r.to_lowercase()).or_default().insert("");
    }
    let mut out = Vec::with_capacity(names.len());
    let mut taken: BTreeMap<String, &str> = BTreeMap::new();
    for (name, b) in names.iter().zip(bases) {
        let mut candidate = if owners[&b.to_lowercase()].len() > 1 {
            format!("{b}-{}", short_hash(name))
        } else {
            b
        };
        // A suffixed name that happens to equal another's: the full hash tells them apart.
        if taken
            .get(&candidate.to_lowercase())
            .is_some_and(|owner| owner != name)
        {
            candidate = format!("{candidate}-{:016x}", fnv1a64(name.as_bytes()));
        }
        taken.insert(candidate.to_lowercase(), name);
        out.push(candidate);
    }
    out
}

/// [`unique_names`] with [`slug`] as the base.
pub fn unique_slugs<'a>(
    names: impl IntoIterator<Item = &'a str>,
    reserved: &[&str],
) -> Vec<String> {
    unique_names(names, slug, reserved)
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case::empty("", NameProblem::Empty)]
    #[case::dot(".", NameProblem::Dot)]
    #[case::dot_dot("..", NameProblem::Dot)]
    #[case::hidden(".leakloop.lock", NameProblem::Dot)]
    #[case::parent_path("../victim", NameProblem::Dot)]
    #[case::nested("a/../../victim", NameProblem::Separator)]
    #[case::absolute("/etc", NameProblem::Separator)]
    #[case::backslash("a\\b", NameProblem::Separator)]
    #[case::nul("a\0b", NameProblem::Control)]
    #[case::escape("a\u{1b}[2Jb", NameProblem::Control)]
    #[case::newline("a\nb", NameProblem::Control)]
    #[case::too_long(&"x".repeat(201), NameProblem::TooLong)]
    fn structural_names_are_refused(#[case] name: &str, #[case] problem: NameProblem) {
        assert_eq!(check_name(name), Err(problem));
        let err = contained(
            Path::new("out"),
            name,
            Path::new("in/report.json"),
            "scenarios[0].folder",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("in/report.json: scenarios[0].folder is `"),
            "{text}"
        );
        assert!(!text.contains('\0') && !text.contains('\u{1b}'), "{text}");
    }

    #[rstest]
    #[case::plain("leak-01")]
    #[case::dots_inside("a..b")]
    #[case::longest(&"x".repeat(200))]
    fn plain_names_are_joined(#[case] name: &str) {
        assert_eq!(
            contained(Path::new("out"), name, Path::new("f"), "e").unwrap(),
            Path::new("out").join(name)
        );
    }

    #[rstest]
    #[case::escape("../../escaped", "_._.._escaped")]
    #[case::absolute("/etc/passwd", "_etc_passwd")]
    #[case::dot("..", "_.")]
    #[case::empty("", "_")]
    #[case::control("a\0\u{1b}b", "a__b")]
    #[case::unicode("chat ünïcode", "chat__n_code")]
    fn display_names_map_to_safe_slugs(#[case] name: &str, #[case] expected: &str) {
        assert_eq!(slug(name), expected);
        assert_eq!(check_name(&slug(name)), Ok(()));
    }

    #[test]
    fn long_names_are_cut_and_stay_apart() {
        let a = format!("{}a", "x".repeat(300));
        let b = format!("{}b", "x".repeat(300));
        assert!(slug(&a).len() <= MAX_NAME_BYTES);
        assert_ne!(slug(&a), slug(&b));
        assert_eq!(check_name(&slug(&a)), Ok(()));
    }

    #[test]
    fn names_that_would_share_a_file_each_get_their_hash() {
        let names = ["a/b", "a_b", "A_B", "c", "c", "summary.md"];
        let slugs = unique_slugs(names, &["summary.md"]);
        assert_eq!(slugs[3], "c");
        assert_eq!(slugs[4], "c", "the same name twice is the same file");
        let distinct: BTreeSet<String> = slugs.iter().map(|s| s.to_lowercase()).collect();
        assert_eq!(distinct.len(), 5, "{slugs:?}");
        for s in &slugs[..3] {
            assert!(s.to_lowercase().starts_with("a_b-"), "{slugs:?}");
        }
        assert!(slugs[5].starts_with("summary.md-"), "{slugs:?}");
    }
}
