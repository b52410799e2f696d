//! The one redactor: every secret ah holds (the API key or OAuth token) is
//! registered here when it is loaded, and every place that writes text out
//! of the process (the session database, events, step files, the manifest,
//! `network.log`, error messages, `--json` output) passes it through
//! [`text`] or [`json`], which replace each secret with [`MARK`].
//! Text streamed in pieces goes through a [`Stream`], which holds back the
//! end of a piece that could be the start of a secret.
//!
//! The registry is process-wide on purpose: the key is loaded once, at the
//! command-line edge, and the writers live in every layer.

use std::borrow::Cow;
use std::sync::RwLock;

use serde_json::Value;

/// What a secret is replaced with.
pub const MARK: &str = "[REDACTED]";

/// Shorter values are not treated as secrets: they would redact ordinary
/// words, and no real key is that short.
const MIN_SECRET: usize = 8;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Adds a secret to redact from now on (too-short values are ignored).
pub fn register(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_SECRET {
        return;
    }
    if let Ok(mut secrets) = SECRETS.write()
        && !secrets.iter().any(|s| s == secret)
    {
        secrets.push(secret.to_string());
        // Longest first, so a secret that contains another goes whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

fn secrets() -> Vec<String> {
    SECRETS.read().map(|s| s.clone()).unwrap_or_default()
}

/// Whether `text` holds a registered secret.
pub fn contains_secret(text: &str) -> bool {
    secrets()
        .iter()
        .any(|secret| text.contains(secret.as_str()))
}

/// `text` with every registered secret replaced by [`MARK`].
pub fn text(text: &str) -> Cow<'_, str> {
    let secrets = secrets();
    if !secrets.iter().any(|secret| text.contains(secret.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for secret in &secrets {
        out = out.replace(secret.as_str(), MARK);
    }
    Cow::Owned(out)
}

/// Bytes (tool output) with every registered secret replaced; bytes that
/// are not UTF-8 are searched as they are.
pub fn bytes(data: &[u8]) -> Cow<'_, [u8]> {
    let secrets = secrets();
    let found = |d: &[u8], s: &str| d.windows(s.len()).any(|w| w == s.as_bytes());
    if !secrets.iter().any(|s| found(data, s)) {
        return Cow::Borrowed(data);
    }
    let mut out = data.to_vec();
    for secret in &secrets {
        let mut replaced = Vec::with_capacity(out.len());
        let mut rest = out.as_slice();
        while let Some(at) = rest
            .windows(secret.len())
            .position(|w| w == secret.as_bytes())
        {
            replaced.extend_from_slice(&rest[..at]);
            replaced.extend_from_slice(MARK.as_bytes());
            rest = &rest[at + secret.len()..];
        }
        replaced.extend_from_slice(rest);
        out = replaced;
    }
    Cow::Owned(out)
}

/// Redacts every string (and key) inside a JSON value, in place.
pub fn json(value: &mut Value) {
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = text(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(json),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().filter(|k| contains_secret(k)).cloned().collect();
            for key in keys {
                if let Some(v) = map.remove(&key) {
                    map.insert(text(&key).into_owned(), v);
                }
            }
            map.values_mut().for_each(json);
        }
        _ => {}
    }
}

/// Redacts text that arrives in pieces: a secret split across pieces is
/// still caught, because the end of each piece that could begin a secret is
/// held back until the next piece (or [`Stream::finish`]) shows what it is.
#[derive(Debug, Default)]
pub struct Stream {
    held: String,
}

impl Stream {
    /// The part of everything pushed so far that is safe to show now.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let secrets = secrets();
        let clean = text(&self.held).into_owned();
        // Hold back the longest tail that begins some secret.
        let keep = clean
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &clean[i..];
                secrets
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .unwrap_or(clean.len());
        self.held = clean[keep..].to_string();
        clean[..keep].to_string()
    }

    /// Whatever is still held back (it was not a secret after all).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each test registers its own secret: the registry is shared by the
    // whole test process.

    #[test]
    fn text_bytes_and_json_lose_the_secret() {
        let key = "sk-test-redact-0001-abcdefgh";
        register(key);
        let said = format!("the key is {key}, twice: {key}");
        assert_eq!(text(&said), "the key is [REDACTED], twice: [REDACTED]");
        assert!(matches!(text("nothing secret"), Cow::Borrowed(_)));
        let out = bytes(format!("\u{0}x{key}\u{ff}").as_bytes()).into_owned();
        assert_eq!(out, b"\x00x[REDACTED]\xc3\xbf");
        let mut value = serde_json::json!({"a": [key, 1], key: {"b": format!("<{key}>")}});
        json(&mut value);
        assert!(!value.to_string().contains(key), "{value}");
        assert!(contains_secret(&said));
        assert!(!contains_secret("sk-test-redact-0001"));
    }

    #[test]
    fn short_values_are_not_secrets() {
        register("abc");
        assert_eq!(text("abc abc"), "abc abc");
    }

    #[test]
    fn a_stream_catches_a_secret_split_across_pieces() {
        let key = "sk-test-stream-0002-ijklmnop";
        register(key);
        let mut stream = Stream::default();
        let mut shown = String::new();
        for piece in [
            "here: sk-te",
            "st-stream-00",
            "02-ijklmnop and",
            " sk-",
            "then",
        ] {
            shown.push_str(&stream.push(piece));
        }
        shown.push_str(&stream.finish());
        assert_eq!(shown, "here: [REDACTED] and sk-then");
        // A tail that might start a secret is held, then released.
        let mut stream = Stream::default();
        assert_eq!(stream.push("ok sk-test-s"), "ok ");
        assert_eq!(stream.finish(), "sk-test-s");
    }
}
