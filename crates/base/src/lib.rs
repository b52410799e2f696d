//! The basics every layer of ah uses, and nothing else: RFC 3339 time
//! stamps ([`time`]), the redaction of secrets from everything ah writes
//! or shows ([`redact`]) and counts in words ([`words`]). The lowest
//! layer: it depends on no crate of ah's.

#![forbid(unsafe_code)]

pub mod redact;
pub mod time;
pub mod words;

pub use time::format_rfc3339;
pub use words::count;
