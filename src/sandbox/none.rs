//! Placeholder: owned by a helper, replaced before merge.
