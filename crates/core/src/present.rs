//! What a front-end needs from the lower layers to show things, in one
//! place: the escaping every piece of model-written text goes through
//! before a terminal sees it, the redaction of secrets, and small
//! formatters (sizes, counts in words, the diffstat's `+++--` scaling).
//! Helpers for display only; nothing here decides anything.

pub use ah_base::redact::text as redact;
pub use ah_base::{count, format_rfc3339};
pub use ah_record::safe_text::{
    copy_terminal_safe, name_safe, terminal_safe, terminal_safe_bytes, terminal_safe_piece,
};
pub use ah_review::review::bar as stat_bar;
pub use ah_tools::bounds::size;
pub use ah_tools::names as tool_names;
