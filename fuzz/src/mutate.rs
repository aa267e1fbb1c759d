//! A deterministic mutator: the same seed gives the same inputs, so a finding is repeated by
//! running again with the seed and target it was found with.

use crate::Target;

/// The longest input made (bytes); the readers' own size limits are tested elsewhere.
pub(crate) const MAX_INPUT: usize = 256 * 1024;

/// Fragments that often matter to a reader, per target: structure, limits, odd characters.
fn dictionary(target: Target) -> Vec<&'static [u8]> {
    const COMMON: &[&[u8]] = &[
        b"\n",
        b"\r\n",
        b"\0",
        b"\t",
        b" ",
        b"\xef\xbb\xbf",
        b"\xc2\x85",
        b"\xe2\x80\xa8",
        b"\x1b[31m",
        b"\xff",
        b"-1",
        b"0",
        b"-0",
        b"4294967295",
        b"4294967296",
        b"18446744073709551615",
        b"18446744073709551616",
        b"1e309",
        b"NaN",
        b"inf",
        b"-inf",
        b"0.5",
        b"1e-400",
    ];
    const SCENARIO: &[&[u8]] = &[
        b": ",
        b"- ",
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b"&a ",
        b"*a",
        b"!!str ",
        b"!!binary ",
        b"? ",
        b"|\n",
        b">\n",
        b"'",
        b"\"",
        b"#",
        b"---\n",
        b"...\n",
        b"~",
        b"null",
        b"true",
        b"5Mib",
        b"0.5B",
        b"5m",
        b"1h",
        b"900us",
        b"2%",
        b"-2%",
        b"tokens: 4294967295",
        b"turns: 100000",
        b"open: {}",
        b"close: {}",
        b"send: {tokens: [1, 2]}",
        b"generate: {max_output_tokens: 1}",
        b"cancel: {after_tokens: 1, max_output_tokens: 2}",
        b"idle: 1ms",
        b"profiles:\n  p: {}\n",
        b"backend: litert-lm",
        b"backend: opencl",
        b"isolate: true",
        b"faults: [{at_turn: 1, kind: crash}]",
        b"stop: decided",
        b"stop: turns",
        b"sample: {baseline: 100}",
        b"baseline: 101",
    ];
    const TRACE: &[&[u8]] = &[
        b",",
        b"\"",
        b"\"\"",
        b"#",
        b"turn",
        b"turn,rss",
        b"rss",
        b"1,",
        b",,",
        b"1e3",
        b"-5",
        b"{",
        b"\"format_version\": 1",
        b"\"record\": {}",
    ];
    const REPORT: &[&[u8]] = &[
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"",
        b":",
        b",",
        b"null",
        b"true",
        b"{}",
        b"[]",
        b"\"\"",
        b"\"format_version\": 1",
        b"\"format_version\": 2",
        b"\"format_version\": \"1\"",
        b"\"record\": null",
        b"\\u0000",
        b"\\ud800",
        b"1e999",
        b"-0.0",
    ];
    const DUMPSYS: &[&[u8]] = &[
        b"App Summary",
        b"Pss(KB)",
        b"Rss(KB)",
        b"TOTAL PSS:",
        b"TOTAL RSS:",
        b"TOTAL SWAP PSS:",
        b"TOTAL SWAP (KB):",
        b"TOTAL:",
        b"** MEMINFO in pid 1 [a] **",
        b"                   Pss  Private\n                 Total    Dirty\n",
        b"  Native Heap",
        b"18446744073709551615",
        b"  ------",
        b":",
    ];
    const SUITE: &[&[u8]] = &[
        b"\"kind\": \"leakloop-suite\"",
        b"\"folder\": \"../victim\"",
        b"\"folder\": \"/\"",
        b"\"path\": \"a/../../b.yaml\"",
        b"\"partition\": {\"index\": 4294967295, \"count\": 0}",
        b"\"exit_code\": 255",
        b"\"suite_format_version\": 1",
        b"18446744073709551615",
        b"\"duration_s\": 1e308",
    ];
    const MARKERS: &[&[u8]] = &[
        b"TURN 1 CLOSED\n",
        b"TURN 18446744073709551615 CLOSED\n",
        b"TURN 18446744073709551616 CLOSED\n",
        b"LEDGER conversation created=18446744073709551615 deleted=0\n",
        b"LEDGER conversation created=0 deleted=18446744073709551615\n",
        b"LEDGER x created=1 deleted=2\n",
        b"\r\n",
        b"\x1b[2J",
    ];
    const REPLIES: &[&[u8]] = &[
        b"{\"reply\":\"hello\",\"version\":2,\"pid\":4242,",
        b"\"pid\":4294967296",
        b"\"pid\":-1",
        b"{\"reply\":\"error\",\"kind\":\"protocol\",\"message\":\"x\"}",
        b"\"counts\":{\"conversation\":{\"created\":18446744073709551615,\"deleted\":0}}",
        b"\"clock_ms\":1e308",
        b"\"clock_ms\":NaN",
        b"{\"reply\":\"done\"}\n",
    ];
    let own = match target {
        Target::Scenario => SCENARIO,
        Target::Trace => TRACE,
        Target::Report => REPORT,
        Target::Dumpsys => DUMPSYS,
        Target::Suite => SUITE,
        Target::Markers => MARKERS,
        Target::Replies => REPLIES,
    };
    [COMMON, own].concat()
}

/// Makes inputs from seeds with random edits: byte flips, inserts, deletions, duplications,
/// dictionary fragments, splices with another seed and cuts.
#[derive(Debug)]
pub struct Mutator {
    state: u64,
    dictionary: Vec<&'static [u8]>,
}

impl Mutator {
    /// A mutator for `target` whose choices follow from `seed`.
    pub fn new(target: Target, seed: u64) -> Self {
        Mutator {
            state: seed ^ 0x9e37_79b9_7f4a_7c15,
            dictionary: dictionary(target),
        }
    }

    /// The next pseudo-random number (SplitMix64).
    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A dictionary fragment.
    fn word(&mut self) -> &'static [u8] {
        let i = self.below(self.dictionary.len());
        self.dictionary[i]
    }

    /// Picks one of `seeds` and applies one to eight edits to it.
    pub fn mutate(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut input = seeds[self.below(seeds.len())].clone();
        let edits = 1 + self.below(8);
        for _ in 0..edits {
            self.edit(&mut input, seeds);
        }
        input.truncate(MAX_INPUT);
        input
    }

    fn edit(&mut self, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
        let at = |m: &mut Self, len: usize| m.below(len + 1);
        match self.below(9) {
            0 if !input.is_empty() => {
                let i = self.below(input.len());
                input[i] ^= 1 << self.below(8);
            }
            1 => {
                let i = at(self, input.len());
                let byte = self.next() as u8;
                input.insert(i, byte);
            }
            2 if !input.is_empty() => {
                let i = self.below(input.len());
                let n = 1 + self.below(16.min(input.len() - i));
                input.drain(i..i + n);
            }
            3 if !input.is_empty() => {
                let i = self.below(input.len());
                let n = 1 + self.below(64.min(input.len() - i));
                let copy = input[i..i + n].to_vec();
                let j = at(self, input.len());
                let times = 1 + self.below(4);
                for _ in 0..times {
                    input.splice(j..j, copy.iter().copied());
                }
            }
            4 | 5 => {
                let word = self.word();
                let i = at(self, input.len());
                input.splice(i..i, word.iter().copied());
            }
            6 if !input.is_empty() => {
                // Overwrite a run of digits with a boundary value.
                let i = self.below(input.len());
                if let Some(start) = input[i..].iter().position(u8::is_ascii_digit) {
                    let start = i + start;
                    let end = input[start..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .map_or(input.len(), |e| start + e);
                    let word = self.word();
                    input.splice(start..end, word.iter().copied());
                }
            }
            7 => {
                let other = &seeds[self.below(seeds.len())];
                if !other.is_empty() {
                    let from = self.below(other.len());
                    let to = from + self.below(other.len() - from) + 1;
                    let i = at(self, input.len());
                    input.splice(i..i, other[from..to].iter().copied());
                }
            }
            _ if !input.is_empty() => {
                let cut = self.below(input.len());
                input.truncate(cut);
            }
            _ => {}
        }
    }
}
