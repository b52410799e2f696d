//! Classification of failures, backoff and `retry-after`.

use super::*;

fn is_retryable(f: &Failure) -> bool {
    matches!(f, Failure::Retryable { .. })
}

#[test]
fn transient_statuses_are_retried_with_the_api_message() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    for status in [429, 500, 502, 503, 504, 529] {
        assert!(
            is_retryable(&classify_status(status, body, None)),
            "{status}"
        );
    }
    match classify_status(529, body, Some(Duration::from_secs(3))) {
        Failure::Retryable {
            reason,
            retry_after,
        } => {
            assert_eq!(reason, "HTTP 529 overloaded_error: Overloaded");
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
        }
        Failure::Fatal(e) => panic!("529 must be retried, got {e}"),
    }
}

#[test]
fn other_client_errors_fail_at_once_with_the_api_message() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too big"}}"#;
    match classify_status(400, body, None) {
        Failure::Fatal(LlmError::Api {
            status,
            kind,
            message,
        }) => {
            assert_eq!(
                (status, kind.as_str(), message.as_str()),
                (400, "invalid_request_error", "max_tokens: too big")
            );
        }
        other => panic!("expected a fatal API error, got {other:?}"),
    }
    for status in [401, 403, 404, 413] {
        assert!(
            !is_retryable(&classify_status(status, "", None)),
            "{status}"
        );
    }
    match classify_status(401, "", None) {
        Failure::Fatal(LlmError::Api { message, .. }) => assert_eq!(message, "Unauthorized"),
        other => panic!("expected a fatal API error, got {other:?}"),
    }
}

#[test]
fn prompt_too_long_is_context_overflow() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
    match classify_status(400, body, None) {
        Failure::Fatal(LlmError::ContextOverflow(msg)) => {
            assert!(msg.contains("210000"), "{msg}")
        }
        other => panic!("expected context overflow, got {other:?}"),
    }
}

#[test]
fn openai_error_bodies_are_read_and_overflow_is_recognised() {
    let body = r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
    match classify_status(400, body, None) {
        Failure::Fatal(LlmError::ContextOverflow(msg)) => assert!(msg.contains("130000")),
        other => panic!("expected context overflow, got {other:?}"),
    }
    let body = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
    match classify_status(401, body, None) {
        Failure::Fatal(LlmError::Api { kind, message, .. }) => {
            assert_eq!(kind, "invalid_request_error");
            assert_eq!(message, "Incorrect API key provided");
        }
        other => panic!("expected a fatal API error, got {other:?}"),
    }
    let vllm = r#"{"object":"error","message":"This model's maximum context length is 32768 tokens.","type":"BadRequestError","param":null,"code":400}"#;
    assert!(matches!(
        classify_status(400, vllm, None),
        Failure::Fatal(LlmError::ContextOverflow(_))
    ));
    let limited = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    match classify_status(429, limited, Some(Duration::from_secs(2))) {
        Failure::Retryable { reason, .. } => {
            assert_eq!(reason, "HTTP 429 requests: Rate limit reached")
        }
        Failure::Fatal(e) => panic!("429 must be retried, got {e}"),
    }
}

#[test]
fn mid_stream_errors_are_classified_by_kind() {
    let api = |kind: &str| StreamError::Api {
        kind: kind.into(),
        message: "m".into(),
    };
    assert!(is_retryable(&classify_stream(api("overloaded_error"))));
    assert!(is_retryable(&classify_stream(api("api_error"))));
    assert!(is_retryable(&classify_stream(StreamError::Incomplete)));
    assert!(matches!(
        classify_stream(api("invalid_request_error")),
        Failure::Fatal(LlmError::Api { status: 400, .. })
    ));
    assert!(matches!(
        classify_stream(StreamError::Protocol("bad".into())),
        Failure::Fatal(LlmError::Protocol(_))
    ));
}

#[test]
fn backoff_doubles_within_jitter_bounds_and_is_capped() {
    let policy = RetryPolicy::default();
    for retry in 1..=4 {
        let cap = Duration::from_secs(1 << (retry - 1));
        assert_eq!(policy.backoff(retry, 0.0), cap / 2);
        assert_eq!(policy.backoff(retry, 1.0), cap);
        let random = policy.delay(retry, None);
        assert!(
            random >= cap / 2 && random <= cap,
            "retry {retry}: {random:?}"
        );
    }
    assert_eq!(policy.backoff(6, 1.0), Duration::from_secs(30));
    assert_eq!(policy.backoff(1000, 1.0), Duration::from_secs(30));
    assert_eq!(policy.backoff(1000, 0.0), Duration::from_secs(15));
}

#[test]
fn retry_after_wins_over_backoff() {
    let policy = RetryPolicy::default();
    assert_eq!(policy.delay(3, Some(Duration::ZERO)), Duration::ZERO);
    assert_eq!(
        policy.delay(1, Some(Duration::from_secs(45))),
        Duration::from_secs(45)
    );
}

#[test]
fn retry_after_parsing() {
    assert_eq!(
        parse_retry_after(None, Some("7")),
        Some(Duration::from_secs(7))
    );
    assert_eq!(parse_retry_after(None, Some(" 0 ")), Some(Duration::ZERO));
    assert_eq!(
        parse_retry_after(None, Some("1.5")),
        Some(Duration::from_millis(1500))
    );
    assert_eq!(
        parse_retry_after(Some("250"), Some("7")),
        Some(Duration::from_millis(250))
    );
    assert_eq!(
        parse_retry_after(Some("soon"), Some("2")),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        parse_retry_after(None, Some("Wed, 21 Oct 2015 07:28:00 GMT")),
        None
    );
    assert_eq!(parse_retry_after(None, Some("-3")), None);
    assert_eq!(parse_retry_after(None, None), None);

    let mut headers = HeaderMap::new();
    headers.insert("retry-after", "4".parse().expect("header value"));
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(4)));
    headers.insert("retry-after-ms", "120".parse().expect("header value"));
    assert_eq!(retry_after(&headers), Some(Duration::from_millis(120)));
}
