//! What runs cost, through the real binary: the mock reports each call's
//! tokens (cache reads and writes apart), the user's configuration prices
//! the model, and the end line, `run_end` and `ah usage` say the same
//! dollars; a project's prices are not taken; a model without a price
//! shows no cost, only how to give it one.

use serde_json::{Value, json};

use crate::support::host::{Host, describe};
use crate::support::mock::{MockServer, Reply, Turn};

const OPUS: &str = "claude-opus-4-5-20251101";

/// A reply of 1000 uncached input, 2000 written to the cache, 5000 read
/// from it and 100 output tokens.
fn cached_reply() -> Turn {
    Turn::reply(
        Reply::new()
            .text("done")
            .usage(1000, 100)
            .cache_usage(2000, 5000),
    )
}

/// Prices the reply above at 1000·2 + 2000·4 + 5000·0.5 + 100·10
/// millionths: $0.0135.
fn price_opus(host: &Host) {
    let dir = host.home.join(".config/ah");
    std::fs::create_dir_all(&dir).unwrap();
    let table = format!(
        "[prices.\"{OPUS}\"]\ninput = 2\noutput = 10.0\ncache_read = 0.5\ncache_write = 4.0\n"
    );
    std::fs::write(dir.join("config.toml"), table).unwrap();
}

fn run_end(stdout: &[u8]) -> Value {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["type"] == "run_end")
        .unwrap()
}

fn usage(host: &Host, url: &str) -> String {
    let out = host.ah(url).arg("usage").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_run_costs_the_users_price_with_the_cache_priced_apart() {
    let host = Host::git(&[("a.txt", "one\n")]);
    price_opus(&host);
    // The project's file would make the model free: it is not heard.
    let free =
        format!("[prices.\"{OPUS}\"]\ninput = 0\noutput = 0\ncache_read = 0\ncache_write = 0\n");
    host.write(".ah/config.toml", &free);
    let mock = MockServer::start(vec![cached_reply(), cached_reply()]);

    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--json", "look"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let end = run_end(&out.stdout);
    assert_eq!(end["usage"]["input_tokens"], json!(8000));
    assert_eq!(end["cost_usd"], json!(0.0135));
    assert_eq!(end["unpriced"], json!([]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("sets [prices]: ignored"), "{stderr}");

    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--review", "never", "again"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.starts_with('■')).unwrap();
    assert!(
        line.contains("tokens 8.0k in, 100 out · $0.0135 · "),
        "{line}"
    );

    // Both runs, each model's row and the total.
    let usage = usage(&host, &mock.url());
    let row = usage.lines().find(|l| l.starts_with(OPUS)).unwrap();
    assert!(row.ends_with(" $0.027"), "{usage}");
    let total = usage.lines().last().unwrap();
    let words: Vec<&str> = total.split_whitespace().collect();
    assert_eq!(
        words,
        ["total", "2", "calls", "16000", "in", "200", "out", "$0.027"]
    );
}

#[test]
fn a_model_without_a_price_shows_no_cost_and_how_to_set_one() {
    let host = Host::git(&[("a.txt", "one\n")]);
    let mock = MockServer::start(vec![cached_reply(), cached_reply()]);
    let model = "claude-unpriced-1";
    let out = host
        .ah(&mock.url())
        .args(["--backend", "none", "--json", "-m", model, "look"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let end = run_end(&out.stdout);
    assert_eq!(end["cost_usd"], Value::Null);
    assert_eq!(end["unpriced"], json!([model]));

    let out = host
        .ah(&mock.url())
        .args([
            "--backend",
            "none",
            "--review",
            "never",
            "-m",
            model,
            "again",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let unknown = format!("cost unknown (no price for {model}: set [prices.\"{model}\"])");
    let line = stderr.lines().find(|l| l.starts_with('■')).unwrap();
    assert!(line.contains(&unknown), "{line}");

    let usage = usage(&host, &mock.url());
    let row = usage.lines().find(|l| l.starts_with(model)).unwrap();
    assert!(row.ends_with(" no price"), "{usage}");
    assert!(usage.lines().last().unwrap().ends_with(&unknown), "{usage}");
}
