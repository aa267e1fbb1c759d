//! Turns a scenario's prompt spec into the text sent at a given turn: literal text, a list cycled
//! per turn, or a generated prompt of N tokens (so that prompt-length mixes can be scripted).
//!
//! A generated prompt's words are made only for an engine that reads them
//! ([`BackendKind::reads_prompt_text`]); the simulator and the OpenCL workload get the count
//! alone, so a prompt of 200,000,000 tokens costs them nothing. How long a prompt may be is
//! checked with the scenario (`engine.max_tokens`, and a cap on generated text).

use crate::engine::Prompt;
use crate::scenario::{text_tokens, BackendKind, PromptSpec};

/// Words for generated prompts. Common English words tokenize to about one token each in the
/// tokenizers the field uses, so N words approximate N tokens.
const VOCABULARY: &[&str] = &[
    "the", "model", "keeps", "memory", "after", "each", "turn", "and", "every", "session",
    "should", "return", "what", "it", "took", "when", "closed", "notes", "summary", "phone",
    "battery", "weather", "report", "today", "list", "items", "short", "answer", "please", "write",
];

/// The prompt for 1-based `turn` on `backend`.
pub(crate) fn prompt_for_turn(
    spec: &PromptSpec,
    turn: u32,
    seed: u64,
    backend: BackendKind,
) -> Prompt {
    let index = turn.saturating_sub(1) as usize;
    match spec {
        PromptSpec::Text(text) => literal(text),
        PromptSpec::Cycle(texts) => literal(&texts[index % texts.len()]),
        PromptSpec::Tokens(counts) => {
            let tokens = counts[index % counts.len()];
            if backend.reads_prompt_text() {
                generated(tokens, turn, seed)
            } else {
                Prompt {
                    text: String::new(),
                    tokens,
                }
            }
        }
    }
}

fn literal(text: &str) -> Prompt {
    Prompt {
        text: text.to_owned(),
        tokens: text_tokens(text),
    }
}

/// A deterministic prompt of `tokens` words; it differs per turn and seed so that engines with
/// prefix caches see distinct prompts, as they would in the field.
fn generated(tokens: u32, turn: u32, seed: u64) -> Prompt {
    let offset = seed
        .wrapping_mul(7919)
        .wrapping_add(u64::from(turn) * 104_729);
    let mut text = String::with_capacity(tokens as usize * 7);
    for i in 0..u64::from(tokens) {
        let k = offset.wrapping_add(i.wrapping_mul(2_654_435_761)) % VOCABULARY.len() as u64;
        if i > 0 {
            text.push(' ');
        }
        text.push_str(VOCABULARY[k as usize]);
    }
    Prompt { text, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIM: BackendKind = BackendKind::Sim;
    const LITERT: BackendKind = BackendKind::LitertLm;

    #[test]
    fn literal_text_counts_words() {
        let p = prompt_for_turn(&PromptSpec::Text("Summarize the notes.".into()), 3, 0, SIM);
        assert_eq!(p.text, "Summarize the notes.");
        assert_eq!(p.tokens, 3);
    }

    #[test]
    fn lists_cycle_per_turn() {
        let spec = PromptSpec::Cycle(vec!["a".into(), "b c".into()]);
        let texts: Vec<_> = (1..=4)
            .map(|t| prompt_for_turn(&spec, t, 0, SIM).text)
            .collect();
        assert_eq!(texts, ["a", "b c", "a", "b c"]);
    }

    #[test]
    fn generated_prompts_have_the_requested_length_and_mix() {
        let spec = PromptSpec::Tokens(vec![32, 128]);
        assert_eq!(prompt_for_turn(&spec, 1, 5, LITERT).tokens, 32);
        assert_eq!(
            prompt_for_turn(&spec, 2, 5, LITERT).text.split(' ').count(),
            128
        );
        assert_eq!(prompt_for_turn(&spec, 3, 5, LITERT).tokens, 32);
    }

    #[test]
    fn generated_prompts_are_deterministic_and_differ_per_turn() {
        let spec = PromptSpec::Tokens(vec![16]);
        assert_eq!(
            prompt_for_turn(&spec, 1, 9, LITERT),
            prompt_for_turn(&spec, 1, 9, LITERT)
        );
        assert_ne!(
            prompt_for_turn(&spec, 1, 9, LITERT).text,
            prompt_for_turn(&spec, 2, 9, LITERT).text
        );
    }

    /// Regression: 200,000,000 tokens for the simulator took 4.3 GB and 11 s per turn, and
    /// 4,294,967,295 aborted on a 64 GiB allocation, because the words were made for every engine.
    #[test]
    fn engines_that_only_count_get_the_count_without_words() {
        for backend in [SIM, BackendKind::Opencl] {
            let p = prompt_for_turn(&PromptSpec::Tokens(vec![u32::MAX]), 1, 0, backend);
            assert_eq!((p.text.as_str(), p.tokens), ("", u32::MAX));
        }
        // Literal text is sent as written, to every engine.
        let p = prompt_for_turn(&PromptSpec::Text("a b".into()), 1, 0, SIM);
        assert_eq!((p.text.as_str(), p.tokens), ("a b", 2));
    }
}
