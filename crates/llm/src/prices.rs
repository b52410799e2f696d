//! The list prices of the models ah knows (those of `models.rs`), in US
//! dollars per million tokens, as the providers published them on
//! [`PRICES_AS_OF`]; and which model ids a price covers. Prices change: the
//! user's configuration (`[prices."MODEL"]`) overrides any of them.

use serde::{Deserialize, Serialize};

/// The day the prices below were taken from the providers' price lists.
pub const PRICES_AS_OF: &str = "2025-11-24";

/// What one model's tokens cost, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input read without the prompt cache.
    pub input: f64,
    pub output: f64,
    /// Input read from the prompt cache.
    pub cache_read: f64,
    /// Input written to the prompt cache (Anthropic's five-minute cache;
    /// OpenAI bills no writes, so its models' price is the input price).
    pub cache_write: f64,
}

impl Price {
    /// The first field that is not a finite number of dollars of zero or
    /// more, named as in the configuration.
    pub fn invalid_field(&self) -> Option<&'static str> {
        [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
        ]
        .into_iter()
        .find(|(_, dollars)| !dollars.is_finite() || *dollars < 0.0)
        .map(|(field, _)| field)
    }
}

const fn price(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
    Price {
        input,
        output,
        cache_read,
        cache_write,
    }
}

/// The list prices, by the model id the API reports. Claude's are those of
/// prompts up to 200k tokens (Sonnet's longer prompts cost more).
const LIST_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5-20251101", price(5.0, 25.0, 0.5, 6.25)),
    ("claude-sonnet-4-5-20250929", price(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5-20251001", price(1.0, 5.0, 0.1, 1.25)),
    ("gpt-4o", price(2.5, 10.0, 1.25, 2.5)),
    ("gpt-4o-mini", price(0.15, 0.6, 0.075, 0.15)),
    ("gpt-4.1", price(2.0, 8.0, 0.5, 2.0)),
    ("gpt-4.1-mini", price(0.4, 1.6, 0.1, 0.4)),
    ("o3", price(2.0, 8.0, 0.5, 2.0)),
    ("o4-mini", price(1.1, 4.4, 0.275, 1.1)),
];

/// The list price of `model`, when ah knows one.
pub fn list_price(model: &str) -> Option<Price> {
    LIST_PRICES
        .iter()
        .find(|(id, _)| covers(id, model))
        .map(|(_, price)| *price)
}

/// Whether a price given for `id` is the price of `model`: the same id, or
/// a dated snapshot of it (OpenAI answers `gpt-4o` with the model
/// `gpt-4o-2024-08-06`), but never another model whose id starts alike
/// (`gpt-4o-mini` is not `gpt-4o`).
pub fn covers(id: &str, model: &str) -> bool {
    match model.strip_prefix(id) {
        Some("") => true,
        Some(rest) => is_date_suffix(rest),
        None => false,
    }
}

/// `-YYYY-MM-DD`.
fn is_date_suffix(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 11
        && bytes.iter().enumerate().all(|(i, b)| match i {
            0 | 5 | 8 => *b == b'-',
            _ => b.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::resolve;
    use crate::providers::ApiKind;

    #[test]
    fn every_model_ah_knows_has_a_list_price() {
        for name in ["opus", "sonnet", "haiku"] {
            let id = resolve(ApiKind::Anthropic, name).id;
            assert!(list_price(&id).is_some(), "{id}");
        }
        for id in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-4.1-mini",
            "o3",
            "o4-mini",
        ] {
            assert_eq!(resolve(ApiKind::OpenAi, id).id, id);
            assert!(list_price(id).is_some(), "{id}");
        }
        assert!(LIST_PRICES.iter().all(|(_, p)| p.invalid_field().is_none()));
    }

    #[test]
    fn a_dated_snapshot_has_its_models_price_and_a_longer_name_does_not() {
        assert_eq!(list_price("gpt-4o-2024-08-06"), list_price("gpt-4o"));
        assert_eq!(
            list_price("gpt-4o-mini-2024-07-18").map(|p| p.input),
            Some(0.15)
        );
        assert_eq!(list_price("o3-pro"), None);
        assert_eq!(list_price("gpt-4o-2024-08"), None);
        assert_eq!(list_price("claude-mock"), None);
    }

    #[test]
    fn a_negative_or_non_finite_amount_is_named() {
        let mut bad = price(1.0, 2.0, 0.1, 1.25);
        assert_eq!(bad.invalid_field(), None);
        bad.cache_read = -0.1;
        assert_eq!(bad.invalid_field(), Some("cache_read"));
        bad.cache_read = f64::NAN;
        assert_eq!(bad.invalid_field(), Some("cache_read"));
    }
}
