//! API credentials: where ah finds them and how they go on a request.
//!
//! Lookup order: `ANTHROPIC_API_KEY`, then `~/.anthropic/api_key`, then an OAuth
//! bearer token in `~/.anthropic/oauth.json`. The secret never appears in an
//! error message or in `Debug` output.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::LlmError;

/// Beta flag the API requires for requests authenticated with an OAuth token.
const OAUTH_BETA: &str = "oauth-2025-04-20";

/// A secret that authenticates ah to the API.
#[derive(Clone, PartialEq, Eq)]
pub enum Credentials {
    /// Sent as `x-api-key`.
    ApiKey(String),
    /// Sent as `Authorization: Bearer …` with the OAuth beta header.
    OAuthToken(String),
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credentials::ApiKey(_) => f.write_str("ApiKey(<redacted>)"),
            Credentials::OAuthToken(_) => f.write_str("OAuthToken(<redacted>)"),
        }
    }
}

impl Credentials {
    /// Makes the redactor ([`ah_base::redact`]) replace this secret wherever
    /// ah writes or shows text.
    pub fn register_secret(&self) {
        match self {
            Credentials::ApiKey(secret) | Credentials::OAuthToken(secret) => {
                ah_base::redact::register(secret)
            }
        }
    }

    /// Finds credentials given the value of `ANTHROPIC_API_KEY` and the home
    /// directory. Empty values and empty files count as absent.
    pub fn load(
        api_key_env: Option<String>,
        home: Option<PathBuf>,
    ) -> Result<Credentials, LlmError> {
        if let Some(key) = api_key_env.map(|k| k.trim().to_string())
            && !key.is_empty()
        {
            return Ok(Credentials::ApiKey(key));
        }
        let Some(home) = home else {
            return Err(LlmError::NoCredentials);
        };
        let dir = home.join(".anthropic");
        if let Some(text) = read_if_present(&dir.join("api_key"))? {
            let key = text.trim();
            if !key.is_empty() {
                return Ok(Credentials::ApiKey(key.to_string()));
            }
        }
        let oauth_path = dir.join("oauth.json");
        if let Some(text) = read_if_present(&oauth_path)? {
            return oauth_token(&oauth_path, &text).map(Credentials::OAuthToken);
        }
        Err(LlmError::NoCredentials)
    }

    /// The authentication headers for one request, marked sensitive so that
    /// reqwest never prints them.
    pub fn headers(&self) -> Result<HeaderMap, LlmError> {
        let mut headers = HeaderMap::new();
        match self {
            Credentials::ApiKey(key) => {
                headers.insert(HeaderName::from_static("x-api-key"), secret_value(key)?);
            }
            Credentials::OAuthToken(token) => {
                headers.insert(
                    reqwest::header::AUTHORIZATION,
                    secret_value(&format!("Bearer {token}"))?,
                );
                headers.insert(
                    HeaderName::from_static("anthropic-beta"),
                    HeaderValue::from_static(OAUTH_BETA),
                );
            }
        }
        Ok(headers)
    }
}

fn secret_value(secret: &str) -> Result<HeaderValue, LlmError> {
    let mut value = HeaderValue::from_str(secret).map_err(|_| {
        LlmError::BadCredentials(
            "the API key or token contains characters not allowed in an HTTP header; \
             check ANTHROPIC_API_KEY, ~/.anthropic/api_key or ~/.anthropic/oauth.json"
                .to_string(),
        )
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Reads a credentials file; a missing file is `None`, any other failure is an error.
fn read_if_present(path: &Path) -> Result<Option<String>, LlmError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LlmError::BadCredentials(format!(
            "cannot read {}: {e}; fix its permissions or remove it",
            path.display()
        ))),
    }
}

/// Extracts the bearer token from the content of `oauth.json`.
fn oauth_token(path: &Path, text: &str) -> Result<String, LlmError> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        LlmError::BadCredentials(format!(
            "{} is not valid JSON ({e}); fix or remove it",
            path.display()
        ))
    })?;
    ["access_token", "accessToken"]
        .iter()
        .find_map(|field| json.get(field).and_then(|v| v.as_str()))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            LlmError::BadCredentials(format!(
                "{} has no `access_token` or `accessToken` string; log in again or remove it",
                path.display()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let home = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(home.path().join(".anthropic")).expect("mkdir");
        for (name, content) in files {
            std::fs::write(home.path().join(".anthropic").join(name), content).expect("write");
        }
        home
    }

    fn load(env: Option<&str>, home: &tempfile::TempDir) -> Result<Credentials, LlmError> {
        Credentials::load(env.map(str::to_string), Some(home.path().to_path_buf()))
    }

    #[test]
    fn env_key_wins_over_files() {
        let home = home_with(&[
            ("api_key", "file-key"),
            ("oauth.json", r#"{"access_token":"t"}"#),
        ]);
        let creds = load(Some("env-key"), &home).expect("credentials");
        assert_eq!(creds, Credentials::ApiKey("env-key".into()));
    }

    #[test]
    fn key_file_is_trimmed_and_wins_over_oauth() {
        let home = home_with(&[
            ("api_key", "  file-key\n"),
            ("oauth.json", r#"{"access_token":"t"}"#),
        ]);
        assert_eq!(
            load(None, &home).expect("credentials"),
            Credentials::ApiKey("file-key".into())
        );
        assert_eq!(
            load(Some(""), &home).expect("credentials"),
            Credentials::ApiKey("file-key".into())
        );
    }

    #[test]
    fn oauth_token_accepts_both_spellings() {
        let snake = home_with(&[("oauth.json", r#"{"access_token":"tok-a"}"#)]);
        assert_eq!(
            load(None, &snake).expect("credentials"),
            Credentials::OAuthToken("tok-a".into())
        );
        let camel = home_with(&[
            ("api_key", "\n"),
            ("oauth.json", r#"{"accessToken":"tok-b"}"#),
        ]);
        assert_eq!(
            load(None, &camel).expect("credentials"),
            Credentials::OAuthToken("tok-b".into())
        );
    }

    #[test]
    fn nothing_anywhere_is_no_credentials() {
        let home = tempfile::tempdir().expect("temp dir");
        assert!(matches!(
            load(None, &home_with(&[])),
            Err(LlmError::NoCredentials)
        ));
        assert!(matches!(
            Credentials::load(None, Some(home.path().to_path_buf())),
            Err(LlmError::NoCredentials)
        ));
        assert!(matches!(
            Credentials::load(None, None),
            Err(LlmError::NoCredentials)
        ));
    }

    #[test]
    fn broken_oauth_file_is_reported_without_leaking_it() {
        let home = home_with(&[("oauth.json", r#"{"token":"sk-secret"}"#)]);
        let err = load(None, &home).expect_err("no usable token");
        let text = err.to_string();
        assert!(text.contains("oauth.json"), "{text}");
        assert!(!text.contains("sk-secret"), "{text}");
        let garbage = home_with(&[("oauth.json", "sk-secret-not-json")]);
        assert!(matches!(
            load(None, &garbage),
            Err(LlmError::BadCredentials(_))
        ));
    }

    #[test]
    fn debug_output_is_redacted() {
        let key = format!("{:?}", Credentials::ApiKey("sk-ant-secret".into()));
        let token = format!("{:?}", Credentials::OAuthToken("oauth-secret".into()));
        assert!(!key.contains("secret") && key.contains("redacted"), "{key}");
        assert!(
            !token.contains("secret") && token.contains("redacted"),
            "{token}"
        );
    }

    #[test]
    fn headers_depend_on_the_kind_of_secret() {
        let api = Credentials::ApiKey("k1".into()).headers().expect("headers");
        assert_eq!(
            api.get("x-api-key").and_then(|v| v.to_str().ok()),
            Some("k1")
        );
        assert!(api.get("authorization").is_none());
        assert!(api.get("x-api-key").is_some_and(HeaderValue::is_sensitive));

        let oauth = Credentials::OAuthToken("t1".into())
            .headers()
            .expect("headers");
        assert_eq!(
            oauth.get("authorization").and_then(|v| v.to_str().ok()),
            Some("Bearer t1")
        );
        assert_eq!(
            oauth.get("anthropic-beta").and_then(|v| v.to_str().ok()),
            Some("oauth-2025-04-20")
        );
        assert!(oauth.get("x-api-key").is_none());
    }

    #[test]
    fn key_with_a_newline_inside_is_rejected_without_leaking_it() {
        let err = Credentials::ApiKey("sk-a\nb".into())
            .headers()
            .expect_err("invalid header");
        assert!(!err.to_string().contains("sk-a"));
    }
}
