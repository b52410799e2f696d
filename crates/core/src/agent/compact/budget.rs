//! How much output a request asks for, and how big the conversation may
//! grow before it is compacted.
//!
//! The API refuses a request whose input plus `max_tokens` exceeds the
//! context window ("input length and `max_tokens` exceed context limit").
//! One way to respect that is to compact once the input passes
//! `window − reserve − max_output`; with a 64 000-token output limit that
//! compacts a 200 000-token window at about 120 000 tokens, giving up a
//! third of the window for answers that are rarely that long. ah instead
//! asks for less output as the conversation grows: the model's whole output
//! limit while it fits, then what is left below the window less a safety
//! margin for what the size estimate misses, but never less than a floor
//! that leaves room for a useful answer (plus the thinking budget, which the
//! API counts in `max_tokens`). The conversation is compacted when it comes
//! within the reserve of the window, or when even the floor would no longer
//! fit (a reserve smaller than the floor); so long answers keep their full
//! limit until the last stretch before compaction, and no request asks for
//! more than fits.

use crate::agent::AgentConfig;

/// Tokens left unused below the window, for what the size estimate misses.
const SAFETY_TOKENS: u64 = 2_048;
/// The least visible output a request asks for.
const MIN_OUTPUT_TOKENS: u32 = 4_096;

/// The `max_tokens` for a request whose input is about `input` tokens: the
/// model's output limit, lowered to what fits below the window, but not
/// below the floor (a conversation that large is compacted first; if it
/// could not be, the API's refusal goes down the overflow path).
pub(super) fn max_tokens(config: &AgentConfig, input: u64) -> u32 {
    let cap = config.model.max_output_tokens;
    let room = config
        .model
        .context_window
        .saturating_sub(input.saturating_add(SAFETY_TOKENS));
    u32::try_from(room)
        .unwrap_or(u32::MAX)
        .clamp(floor(config).min(cap), cap)
}

/// The largest conversation, in tokens, sent without compacting first: the
/// reserve stays free below the window, and so does room for the floor.
pub(super) fn compact_above(config: &AgentConfig) -> u64 {
    let floor = floor(config).min(config.model.max_output_tokens);
    let keep_free = config.compact_reserve.max(u64::from(floor) + SAFETY_TOKENS);
    config.model.context_window.saturating_sub(keep_free)
}

/// The least output worth asking for: room for an answer after thinking.
fn floor(config: &AgentConfig) -> u32 {
    MIN_OUTPUT_TOKENS.saturating_add(config.thinking_budget.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ah_llm::models::{EditFormat, ModelInfo, ToolProtocol};

    fn config(reserve: u64, thinking_budget: Option<u32>) -> AgentConfig {
        AgentConfig {
            model: ModelInfo {
                id: "claude-test".into(),
                context_window: 200_000,
                max_output_tokens: 64_000,
                edit_format: EditFormat::Edit,
                tool_protocol: ToolProtocol::Native,
                images: true,
            },
            system: String::new(),
            tools: Vec::new(),
            max_tools: None,
            loop_window: 0,
            thinking_budget,
            compact_reserve: reserve,
            compact_prompt: String::new(),
        }
    }

    #[test]
    fn a_small_conversation_gets_the_whole_output_limit() {
        let config = config(16_384, None);
        assert_eq!(max_tokens(&config, 0), 64_000);
        assert_eq!(max_tokens(&config, 120_000), 64_000);
    }

    #[test]
    fn below_the_threshold_no_request_asks_for_more_than_fits() {
        let config = config(16_384, None);
        let limit = compact_above(&config);
        assert_eq!(limit, 200_000 - 16_384, "the reserve sets the threshold");
        // Everything the threshold lets through, including the stretch
        // between 136 000 and 184 000 tokens that used to be refused.
        for input in (0..=limit).step_by(997).chain([150_000, limit]) {
            let asked = u64::from(max_tokens(&config, input));
            assert!(
                input + asked + SAFETY_TOKENS <= 200_000,
                "{input} + {asked} does not fit"
            );
            assert!(asked >= u64::from(MIN_OUTPUT_TOKENS), "{input}: {asked}");
        }
        assert_eq!(max_tokens(&config, 150_000), 200_000 - 150_000 - 2_048);
    }

    #[test]
    fn a_reserve_smaller_than_the_floor_still_compacts_before_the_floor_stops_fitting() {
        let config = config(1_000, None);
        let limit = compact_above(&config);
        assert_eq!(limit, 200_000 - 4_096 - 2_048);
        assert_eq!(max_tokens(&config, limit), 4_096);
        assert_eq!(
            max_tokens(&config, 199_000),
            4_096,
            "past the threshold (compaction found nothing to cut) the floor is asked for"
        );
    }

    #[test]
    fn the_floor_leaves_room_for_an_answer_after_the_thinking_budget() {
        let config = config(1_000, Some(10_000));
        assert_eq!(max_tokens(&config, 199_000), 14_096);
        assert_eq!(compact_above(&config), 200_000 - 14_096 - 2_048);
        assert_eq!(max_tokens(&config, compact_above(&config)), 14_096);
    }

    #[test]
    fn the_output_limit_bounds_the_floor_too() {
        let mut config = config(16_384, None);
        config.model.max_output_tokens = 2_000;
        assert_eq!(max_tokens(&config, 0), 2_000);
        assert_eq!(max_tokens(&config, 199_000), 2_000);
        assert_eq!(compact_above(&config), 200_000 - 16_384);
    }
}
