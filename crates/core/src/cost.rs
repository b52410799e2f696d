//! What model calls cost, in US dollars: prices (ah's list prices,
//! `ah_llm::prices`, under the user's `[prices."MODEL"]`) applied to token
//! counts by model. Every report of a cost — a run's end line and its
//! `run_end` event, `ah usage` — goes through [`Prices::cost`], so they
//! cannot disagree; a model without a price is named, never guessed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use anyhow::Result;

use crate::config::{self, ProjectFiles};
use ah_llm::prices::{Price, covers, list_price};
use ah_session::ModelUsage;

pub use ah_llm::prices::PRICES_AS_OF;

/// How calls stored without a model are named among the unpriced.
pub const NO_MODEL: &str = "(no model recorded)";

/// The prices in force: the configured ones, then ah's list prices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    configured: BTreeMap<String, Price>,
}

/// What a set of calls cost.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cost {
    /// The dollars of the calls whose model has a price.
    pub priced_usd: f64,
    /// The models whose calls have no price, each once, in order
    /// ([`NO_MODEL`] for calls stored without one).
    pub unpriced: Vec<String>,
}

impl Prices {
    /// The prices of `configured` (a configuration's `prices`) over the list
    /// prices.
    pub fn new(configured: &BTreeMap<String, Price>) -> Prices {
        Prices {
            configured: configured.clone(),
        }
    }

    /// The prices for `project` with the `-c` `overrides`: the user's own
    /// configuration's (the project's file sets none, `config::load`).
    pub fn load(project: &Path, overrides: &[String]) -> Result<Prices> {
        let files = ProjectFiles::of_project(project)?;
        let loaded = config::load(&files, overrides)?;
        Ok(Prices::new(&loaded.config.prices))
    }

    /// The price of `model`: the configured one (its exact id first, then
    /// one that covers its dated snapshots), else the list price.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.configured
            .get(model)
            .or_else(|| {
                self.configured
                    .iter()
                    .find(|(id, _)| covers(id, model))
                    .map(|(_, price)| price)
            })
            .copied()
            .or_else(|| list_price(model))
    }

    /// What the calls of one row cost; `None` when its model has no price.
    /// Calls that used no tokens cost nothing, priced or not.
    pub fn of_calls(&self, usage: &ModelUsage) -> Option<f64> {
        if usage.input_tokens == 0 && usage.output_tokens == 0 {
            return Some(0.0);
        }
        let price = self.price(usage.model.as_deref()?)?;
        let cached = usage.cache_read_tokens + usage.cache_write_tokens;
        let uncached = usage.input_tokens.saturating_sub(cached);
        let millionths = uncached as f64 * price.input
            + usage.cache_read_tokens as f64 * price.cache_read
            + usage.cache_write_tokens as f64 * price.cache_write
            + usage.output_tokens as f64 * price.output;
        Some(millionths / 1e6)
    }

    /// What the calls of `usage` (rows by model, as `Session::usage` gives
    /// them) cost together, and which models had no price.
    pub fn cost(&self, usage: &[ModelUsage]) -> Cost {
        let mut cost = Cost::default();
        for row in usage {
            match self.of_calls(row) {
                Some(dollars) => cost.priced_usd += dollars,
                None => {
                    let model = row.model.as_deref().unwrap_or(NO_MODEL).to_string();
                    if !cost.unpriced.contains(&model) {
                        cost.unpriced.push(model);
                    }
                }
            }
        }
        cost.unpriced.sort();
        cost
    }
}

impl Cost {
    /// The whole cost, when every model had a price (rounded to a
    /// ten-billionth of a dollar, so sums print without float noise).
    pub fn total_usd(&self) -> Option<f64> {
        self.unpriced
            .is_empty()
            .then(|| (self.priced_usd * 1e10).round() / 1e10)
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&describe(self.total_usd(), &self.unpriced))
    }
}

/// A cost as people read it: the dollars, or which models have no price and
/// how to give them one.
pub fn describe(total_usd: Option<f64>, unpriced: &[String]) -> String {
    if let Some(dollars) = total_usd {
        return usd(dollars);
    }
    let named: Vec<&String> = unpriced.iter().filter(|m| *m != NO_MODEL).collect();
    let tables: Vec<String> = named
        .iter()
        .map(|model| format!("[prices.{model:?}]"))
        .collect();
    let models: Vec<&str> = unpriced.iter().map(String::as_str).collect();
    match tables.is_empty() {
        true => format!("cost unknown (no price for {})", models.join(", ")),
        false => format!(
            "cost unknown (no price for {}: set {})",
            models.join(", "),
            tables.join(", ")
        ),
    }
}

/// Dollars as people read them: cents from a dollar up (`$12.34`), below
/// up to three significant digits and at least cents (`$0.0123`,
/// `$0.0027`, `$0.50`), at most to a millionth of a dollar.
pub fn usd(dollars: f64) -> String {
    if dollars >= 1.0 || dollars <= 0.0 {
        return format!("${:.2}", dollars.max(0.0));
    }
    if dollars < 0.000_000_5 {
        return "<$0.000001".to_string();
    }
    let magnitude = dollars.log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(2, 6) as usize;
    let digits = format!("{dollars:.decimals$}");
    let cents = digits.find('.').map_or(digits.len(), |dot| dot + 3);
    let trimmed = digits.trim_end_matches('0');
    format!("${}", &digits[..trimmed.len().max(cents)])
}

#[cfg(test)]
mod tests;
