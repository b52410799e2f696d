//! What of a run reaches a Kubernetes name, a label or a quantity, made
//! valid or refused: an object's name is a DNS-1123 label, a label's value
//! at most 63 letters, digits, `-`, `_` or `.`, a size a quantity such as
//! `512Mi`. The run id comes from a folder name and the image from the
//! run's manifest, so neither is trusted to be well-formed: what does not
//! fit is refused with the reason, never cut or passed through.

use anyhow::{Result, bail};

/// The longest DNS-1123 label, and the longest label value.
const MAX_LABEL: usize = 63;
/// The longest image reference taken from a manifest.
const MAX_IMAGE: usize = 1024;

/// `ah-<run id>` in lower case: the Pod's and the policy's name, and the
/// start of its volumes' names. Refused unless it is a DNS-1123 label
/// (lower-case letters, digits and `-`, a letter or digit at each end, at
/// most 63 long) with room for the longest volume suffix.
pub(super) fn object_name(run_id: &str, longest_suffix: usize) -> Result<String> {
    let name = format!("ah-{}", run_id.to_ascii_lowercase());
    let fits = name.len() + longest_suffix <= MAX_LABEL;
    let chars_ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends_ok = name
        .bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    if !(fits && chars_ok && ends_ok) {
        bail!(
            "run id {run_id:?} cannot name a Pod: a Kubernetes name takes lower-case letters, \
             digits and '-' (ending in a letter or digit), at most {MAX_LABEL} long; \
             `ah runs` lists the runs"
        );
    }
    Ok(name)
}

/// `value` as a label's value: at most 63 letters, digits, `-`, `_` or
/// `.`, starting and ending with a letter or digit.
pub(super) fn label_value(value: &str) -> Result<String> {
    let ok = !value.is_empty()
        && value.len() <= MAX_LABEL
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && value
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && value
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if !ok {
        bail!(
            "{value:?} cannot be a Kubernetes label value: at most {MAX_LABEL} letters, digits, \
             '-', '_' or '.', starting and ending with a letter or digit"
        );
    }
    Ok(value.to_string())
}

/// An image reference as a run recorded it, refused when it is empty, too
/// long, or holds a space or a control character (no registry names an
/// image so; the cluster judges the rest).
pub(super) fn image(reference: &str, what: &str) -> Result<String> {
    let ok = !reference.is_empty()
        && reference.len() <= MAX_IMAGE
        && !reference
            .chars()
            .any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        bail!(
            "{what} {reference:?} is not an image reference (empty, longer than {MAX_IMAGE} \
             bytes, or with a space or a control character); name the image with its registry, \
             path and tag, such as localhost/ah-sandbox:latest"
        );
    }
    Ok(reference.to_string())
}

/// `bytes` as a Kubernetes quantity: in the largest binary unit that
/// divides it (`512Mi`, `10Gi`), else in bytes.
pub(super) fn quantity(bytes: u64) -> String {
    for (unit, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_names_the_pod_in_lower_case() {
        let name = object_name("01HZY8J5Q8W3V4N1T2C6B7D9EF", 8).unwrap_or_default();
        assert_eq!(name, "ah-01hzy8j5q8w3v4n1t2c6b7d9ef");
    }

    #[test]
    fn a_run_id_that_is_no_name_is_refused() {
        for hostile in [
            "",
            "x\nkind: Secret",
            "a b",
            "a.b",
            "a_b",
            "ends-",
            "\"quoted\"",
            "ü",
            "{json}",
            &"a".repeat(60),
        ] {
            let refused = object_name(hostile, 8);
            assert!(refused.is_err(), "{hostile:?} was taken");
            let said = format!("{:#}", refused.err().unwrap_or_else(|| anyhow::anyhow!("")));
            assert!(said.contains("`ah runs`"), "{said}");
        }
    }

    #[test]
    fn label_values_are_checked_not_escaped() {
        assert_eq!(
            label_value("01HZY8J5Q8W3V4N1T2C6B7D9EF").ok().as_deref(),
            Some("01HZY8J5Q8W3V4N1T2C6B7D9EF")
        );
        assert_eq!(label_value("a.b_c-d").ok().as_deref(), Some("a.b_c-d"));
        for bad in ["", "-a", "a-", "a b", "a\nb", "a:b", "a/b", &"a".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn images_with_spaces_or_controls_are_refused() {
        assert!(image("localhost/ah-sandbox:latest", "image").is_ok());
        assert!(image("registry.example/p/i@sha256:abc", "image").is_ok());
        for bad in ["", "a b", "a\nkind: Secret", "a\u{7f}", "a\u{2028}b"] {
            assert!(image(bad, "image").is_err(), "{bad:?}");
        }
        assert!(image(&"a".repeat(MAX_IMAGE + 1), "image").is_err());
    }

    #[test]
    fn quantities_use_the_largest_unit_that_divides() {
        assert_eq!(quantity(512 << 20), "512Mi");
        assert_eq!(quantity(4 << 30), "4Gi");
        assert_eq!(quantity(10 << 30), "10Gi");
        assert_eq!(quantity(1536 << 20), "1536Mi");
        assert_eq!(quantity(1000), "1000");
        assert_eq!(quantity(3 << 10), "3Ki");
    }
}
