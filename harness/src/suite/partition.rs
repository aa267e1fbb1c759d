//! `--partition K/N`: which share of a suite a machine runs. A scenario belongs to the share
//! given by a hash of its path relative to the suite root (with `/` between folders), so the
//! split is the same on every machine and OS, whatever order the files are listed in, and adding
//! a scenario never moves the others.

use std::fmt;
use std::str::FromStr;

/// One share of a suite: `index` of `count`, from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Partition {
    /// Which share, 1..=count.
    pub index: u32,
    /// How many shares.
    pub count: u32,
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || format!("`{text}` is not K/N (e.g. 2/4: the second of four shares)");
        let (k, n) = text.split_once('/').ok_or_else(usage)?;
        let index: u32 = k.trim().parse().map_err(|_| usage())?;
        let count: u32 = n.trim().parse().map_err(|_| usage())?;
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "`{text}`: K must be between 1 and N, and N at least 1"
            ));
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Partition {
    /// Whether the scenario at `relative_path` (from the suite root) belongs to this share.
    pub fn holds(&self, relative_path: &str) -> bool {
        share_of(relative_path, self.count) == self.index
    }
}

/// The share (1..=count) that the scenario at `relative_path` belongs to.
pub(crate) fn share_of(relative_path: &str, count: u32) -> u32 {
    (fnv1a64(relative_path.as_bytes()) % u64::from(count.max(1))) as u32 + 1
}

/// The hash that also keeps file names apart (one definition: a change to it shows in both).
pub(crate) use crate::report::safe_path::fnv1a64;

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[test]
    fn fnv1a_matches_its_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// Fixed assignments: a change to the hash or to how paths are written would move
    /// scenarios between CI machines mid-history, and must show here.
    #[rstest]
    #[case::top_level("leak.yaml", 3, 3)]
    #[case::nested("nightly/litert/cpu-chat.yaml", 3, 2)]
    #[case::nested_other("nightly/litert/gpu-chat.yaml", 3, 2)]
    #[case::first_share("sim/flat-0002.yaml", 3, 1)]
    #[case::four_shares("sim/flat-0001.yaml", 4, 4)]
    #[case::one_share("anything.yaml", 1, 1)]
    fn a_path_always_lands_in_the_same_share(
        #[case] path: &str,
        #[case] count: u32,
        #[case] share: u32,
    ) {
        assert_eq!(share_of(path, count), share);
    }

    #[test]
    fn every_path_belongs_to_exactly_one_share() {
        for i in 0..200 {
            let path = format!("suite/s{i:03}.yaml");
            let holders = (1..=5)
                .filter(|k| {
                    Partition {
                        index: *k,
                        count: 5,
                    }
                    .holds(&path)
                })
                .count();
            assert_eq!(holders, 1, "{path}");
        }
    }

    #[rstest]
    #[case::ok("2/4", Ok((2, 4)))]
    #[case::spaces(" 1 / 1 ", Ok((1, 1)))]
    #[case::zero_index("0/4", Err("between 1 and N"))]
    #[case::index_past_count("5/4", Err("between 1 and N"))]
    #[case::zero_count("1/0", Err("between 1 and N"))]
    #[case::no_slash("2", Err("is not K/N"))]
    #[case::words("a/b", Err("is not K/N"))]
    fn parses_k_of_n(#[case] text: &str, #[case] expected: Result<(u32, u32), &str>) {
        match (text.parse::<Partition>(), expected) {
            (Ok(p), Ok((k, n))) => assert_eq!((p.index, p.count), (k, n)),
            (Err(e), Err(part)) => assert!(e.contains(part), "{e}"),
            (got, want) => panic!("{text}: got {got:?}, want {want:?}"),
        }
    }
}
