//! The arithmetic of a cost, the prices that win, and how money reads.

use super::*;
use ah_session::CallKind;

fn row(model: Option<&str>, input: u64, output: u64, read: u64, write: u64) -> ModelUsage {
    ModelUsage {
        model: model.map(str::to_string),
        kind: CallKind::Answer,
        calls: 1,
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: read,
        cache_write_tokens: write,
    }
}

fn configured(model: &str, price: Price) -> Prices {
    Prices::new(&BTreeMap::from([(model.to_string(), price)]))
}

const OPUS: &str = "claude-opus-4-5-20251101";

#[test]
fn cache_reads_and_writes_are_priced_apart_from_input() {
    let prices = configured(
        "m",
        Price {
            input: 2.0,
            output: 10.0,
            cache_read: 0.5,
            cache_write: 3.0,
        },
    );
    // 1M read: 100k uncached, 600k from the cache, 300k into it.
    let usage = row(Some("m"), 1_000_000, 20_000, 600_000, 300_000);
    // 0.1·2 + 0.6·0.5 + 0.3·3 + 0.02·10 = 0.2 + 0.3 + 0.9 + 0.2
    assert_eq!(prices.cost(&[usage]).total_usd(), Some(1.6));
}

#[test]
fn a_known_model_costs_its_list_price() {
    let cost = Prices::default().cost(&[row(Some(OPUS), 360, 90, 0, 0)]);
    // 360 × $5 + 90 × $25 per million.
    assert_eq!(cost.total_usd(), Some(0.00405));
    assert_eq!(cost.to_string(), "$0.00405");
}

#[test]
fn a_model_without_a_price_makes_the_total_unknown_and_is_named() {
    let rows = [
        row(Some(OPUS), 1_000_000, 0, 0, 0),
        row(Some("local-llm"), 10, 1, 0, 0),
        row(Some("local-llm"), 5, 1, 0, 0),
        row(None, 3, 1, 0, 0),
        row(Some("never-billed"), 0, 0, 0, 0),
    ];
    let cost = Prices::default().cost(&rows);
    assert_eq!(cost.total_usd(), None);
    assert_eq!(cost.priced_usd, 5.0);
    assert_eq!(cost.unpriced, [NO_MODEL, "local-llm"]);
    assert_eq!(
        cost.to_string(),
        "cost unknown (no price for (no model recorded), local-llm: set [prices.\"local-llm\"])"
    );
    assert_eq!(
        describe(None, &[NO_MODEL.to_string()]),
        "cost unknown (no price for (no model recorded))"
    );
}

#[test]
fn a_configured_price_wins_over_the_list_and_covers_snapshots() {
    let free = Price {
        input: 0.0,
        output: 0.0,
        cache_read: 0.0,
        cache_write: 0.0,
    };
    let prices = configured(OPUS, free);
    assert_eq!(prices.price(OPUS), Some(free));
    assert_eq!(
        prices
            .cost(&[row(Some(OPUS), 1000, 1000, 0, 0)])
            .total_usd(),
        Some(0.0)
    );
    let prices = configured("gpt-4o", free);
    assert_eq!(prices.price("gpt-4o-2024-08-06"), Some(free));
    assert_eq!(prices.price("gpt-4o-mini"), list_price("gpt-4o-mini"));
    // The exact id wins over a price that covers it as a snapshot.
    let mut both = BTreeMap::from([("gpt-4o".to_string(), free)]);
    let dated = Price { input: 9.0, ..free };
    both.insert("gpt-4o-2024-08-06".to_string(), dated);
    assert_eq!(Prices::new(&both).price("gpt-4o-2024-08-06"), Some(dated));
}

#[test]
fn money_reads_in_cents_or_three_significant_digits() {
    assert_eq!(usd(0.0), "$0.00");
    assert_eq!(usd(12.345_6), "$12.35");
    assert_eq!(usd(1.0), "$1.00");
    assert_eq!(usd(0.5), "$0.50");
    assert_eq!(usd(0.0027), "$0.0027");
    assert_eq!(usd(0.101), "$0.101");
    assert_eq!(usd(0.012_34), "$0.0123");
    assert_eq!(usd(0.000_012_3), "$0.000012");
    assert_eq!(usd(0.000_000_1), "<$0.000001");
}
