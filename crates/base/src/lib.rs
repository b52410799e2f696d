//! The basics every layer of ah uses, and nothing else: RFC 3339 time
//! stamps ([`time`]) and the redaction of secrets from everything ah writes
//! or shows ([`redact`]). The lowest layer: it depends on no crate of ah's.

#![forbid(unsafe_code)]

pub mod redact;
pub mod time;

pub use time::format_rfc3339;
