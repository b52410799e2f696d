//! The container's environment, built from nothing: a small fixed set
//! (`PATH`, `HOME`, `LANG`, `TERM`, and the proxy variables when the
//! network goes through the proxy), plus the host variables an allowlist
//! names. A name that looks like a secret (`*_API_KEY`, `*_SECRET`,
//! `*_TOKEN`, `*_PASSWORD`, `*_CREDENTIAL`, `*_CREDENTIALS`) is never
//! passed, even when listed, and neither is a value holding a secret ah
//! knows (the API key).

use super::args::CONTAINER_PATH;
use crate::egress::{NetworkMode, proxy_url};
use ah_base::redact;

/// Name endings that mark a secret (compared in upper case). The bare words
/// (`TOKEN`, `API_KEY`) count too.
const SECRET_ENDINGS: &[&str] = &[
    "API_KEY",
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "CREDENTIAL",
    "CREDENTIALS",
];

/// The proxy variables, both spellings: tools read one or the other.
const PROXY_VARS: &[&str] = &["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];

/// Names ah sets itself, which the allowlist cannot override.
const FIXED: &[&str] = &["PATH", "HOME", "LANG", "TERM"];

/// Whether `name` looks like it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_ENDINGS
        .iter()
        .any(|end| upper == *end || upper.ends_with(&format!("_{end}")))
}

/// A listed variable that was not passed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub name: String,
    pub why: &'static str,
}

/// The container's environment for `network`, with the host variables
/// `allowed` names (looked up with `host`), and the names withheld.
pub fn container_env(
    network: NetworkMode,
    allowed: &[String],
    host: &dyn Fn(&str) -> Option<String>,
) -> (Vec<(String, String)>, Vec<Withheld>) {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), CONTAINER_PATH.into()),
        ("HOME".into(), "/tmp".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
    ];
    if network == NetworkMode::Proxy {
        for var in PROXY_VARS {
            env.push((var.to_string(), proxy_url()));
        }
    }
    let mut withheld = Vec::new();
    let mut withhold = |name: &str, why| {
        withheld.push(Withheld {
            name: name.to_string(),
            why,
        })
    };
    for name in allowed {
        let value = host(name);
        match refusal(name, value.as_deref(), false) {
            Some(why) => withhold(name, why),
            None if env.iter().any(|(n, _)| n == name) => {}
            None => env.push((name.clone(), value.unwrap_or_default())),
        }
    }
    (env, withheld)
}

/// Why the host variable `name` (set to `value`, if it is) is not passed
/// into the sandbox, if it is not. A name that marks a secret is refused
/// unless `secret_names` says the user passed it on purpose.
pub fn refusal(name: &str, value: Option<&str>, secret_names: bool) -> Option<&'static str> {
    if !valid_name(name) {
        return Some("not a variable name");
    }
    if is_secret_name(name) && !secret_names {
        return Some("its name marks a secret, which never enters the sandbox");
    }
    if FIXED.contains(&name) || PROXY_VARS.contains(&name) {
        return Some("ah sets it itself");
    }
    match value {
        None => Some("it is not set"),
        Some(value) if redact::contains_secret(value) => Some("its value holds the API key"),
        Some(_) => None,
    }
}

fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn secret_names_are_recognised() {
        for name in [
            "ANTHROPIC_API_KEY",
            "aws_secret",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "GCP_CREDENTIALS",
            "X_CREDENTIAL",
            "TOKEN",
            "API_KEY",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["CARGO_HOME", "TOKENIZER", "SECRETARY", "RUST_LOG"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn only_listed_plain_variables_are_passed() {
        let host = |name: &str| match name {
            "RUST_LOG" => Some("debug".to_string()),
            "GITHUB_TOKEN" => Some("ghp_x".to_string()),
            "PATH" => Some("/host/bin".to_string()),
            "SNEAKY" => Some("sk-test-env-0003-qrstuvwx".to_string()),
            _ => None,
        };
        redact::register("sk-test-env-0003-qrstuvwx");
        let listed: Vec<String> = [
            "RUST_LOG",
            "GITHUB_TOKEN",
            "PATH",
            "UNSET",
            "1BAD",
            "SNEAKY",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (env, withheld) = container_env(NetworkMode::None, &listed, &host);
        assert_eq!(names(&env), ["PATH", "HOME", "LANG", "TERM", "RUST_LOG"]);
        assert!(env.contains(&("PATH".to_string(), CONTAINER_PATH.to_string())));
        let why: Vec<(&str, &str)> = withheld.iter().map(|w| (w.name.as_str(), w.why)).collect();
        assert_eq!(why.len(), 5, "{why:?}");
        assert!(
            why.iter()
                .any(|(n, w)| *n == "GITHUB_TOKEN" && w.contains("secret"))
        );
        assert!(
            why.iter()
                .any(|(n, w)| *n == "SNEAKY" && w.contains("API key"))
        );
        assert!(
            why.iter()
                .any(|(n, w)| *n == "PATH" && w.contains("ah sets"))
        );
    }

    #[test]
    fn the_proxy_mode_points_both_spellings_at_the_proxy() {
        let (env, _) = container_env(NetworkMode::Proxy, &[], &|_| None);
        for var in PROXY_VARS {
            assert!(env.contains(&(var.to_string(), "http://127.0.0.1:3128".to_string())));
        }
        let (env, _) = container_env(NetworkMode::Full, &[], &|_| None);
        assert_eq!(env.len(), 4);
    }
}
