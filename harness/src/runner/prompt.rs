//! Turns a scenario's prompt spec into the text sent at a given turn: literal text, a list cycled
//! per turn, or a generated prompt of N tokens (so that prompt-length mixes can be scripted).

use crate::engine::Prompt;
use crate::scenario::PromptSpec;

/// Words for generated prompts. Common English words tokenize to about one token each in the
/// tokenizers the field uses, so N words approximate N tokens.
const VOCABULARY: &[&str] = &[
    "the", "model", "keeps", "memory", "after", "each", "turn", "and", "every", "session",
    "should", "return", "what", "it", "took", "when", "closed", "notes", "summary", "phone",
    "battery", "weather", "report", "today", "list", "items", "short", "answer", "please", "write",
];

/// The prompt for 1-based `turn`.
pub(crate) fn prompt_for_turn(spec: &PromptSpec, turn: u32, seed: u64) -> Prompt {
    let index = turn.saturating_sub(1) as usize;
    match spec {
        PromptSpec::Text(text) => literal(text),
        PromptSpec::Cycle(texts) => literal(&texts[index % texts.len()]),
        PromptSpec::Tokens(counts) => generated(counts[index % counts.len()], turn, seed),
    }
}

fn literal(text: &str) -> Prompt {
    Prompt {
        text: text.to_owned(),
        tokens: text.split_whitespace().count() as u32,
    }
}

/// A deterministic prompt of `tokens` words; it differs per turn and seed so that engines with
/// prefix caches see distinct prompts, as they would in the field.
fn generated(tokens: u32, turn: u32, seed: u64) -> Prompt {
    let offset = seed
        .wrapping_mul(7919)
        .wrapping_add(u64::from(turn) * 104_729);
    let text = (0..u64::from(tokens))
        .map(|i| {
            let k = offset.wrapping_add(i.wrapping_mul(2_654_435_761)) % VOCABULARY.len() as u64;
            VOCABULARY[k as usize]
        })
        .collect::<Vec<_>>()
        .join(" ");
    Prompt { text, tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_text_counts_words() {
        let p = prompt_for_turn(&PromptSpec::Text("Summarize the notes.".into()), 3, 0);
        assert_eq!(p.text, "Summarize the notes.");
        assert_eq!(p.tokens, 3);
    }

    #[test]
    fn lists_cycle_per_turn() {
        let spec = PromptSpec::Cycle(vec!["a".into(), "b c".into()]);
        let texts: Vec<_> = (1..=4).map(|t| prompt_for_turn(&spec, t, 0).text).collect();
        assert_eq!(texts, ["a", "b c", "a", "b c"]);
    }

    #[test]
    fn generated_prompts_have_the_requested_length_and_mix() {
        let spec = PromptSpec::Tokens(vec![32, 128]);
        assert_eq!(prompt_for_turn(&spec, 1, 5).tokens, 32);
        assert_eq!(prompt_for_turn(&spec, 2, 5).text.split(' ').count(), 128);
        assert_eq!(prompt_for_turn(&spec, 3, 5).tokens, 32);
    }

    #[test]
    fn generated_prompts_are_deterministic_and_differ_per_turn() {
        let spec = PromptSpec::Tokens(vec![16]);
        assert_eq!(prompt_for_turn(&spec, 1, 9), prompt_for_turn(&spec, 1, 9));
        assert_ne!(
            prompt_for_turn(&spec, 1, 9).text,
            prompt_for_turn(&spec, 2, 9).text
        );
    }
}
