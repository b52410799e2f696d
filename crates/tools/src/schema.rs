//! A validator for the subset of JSON Schema that the tools' `input_schema`s
//! use: `type`, `properties`, `required`, `additionalProperties: false`,
//! `enum`, `minimum`, `maximum` and `items`. It lists every violation, not
//! only the first, so the model can fix a call in one go. It is driven by the
//! schema alone: a new tool gets it by writing its schema.
//!
//! Where JSON Schema leaves room, or models differ from it, it decides:
//! - `integer` is, as in JSON Schema, any number whose fractional part is
//!   zero: `120` and `120.0` are integers, `1.5` is not ([`super::input`]
//!   reads both as integers).
//! - `null` for a property that is not required counts as absent, as models
//!   send it for "not given"; for a required property it is a violation.
//! - `additionalProperties` other than `false` allows any extra property.
//! - A value of the wrong type gets no further checks (bounds, fields, items):
//!   they would only repeat the same mistake.
//! - Keywords outside the subset are ignored; the tools' schemas are tested
//!   to use only the subset, so none is silently skipped.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

/// Longest piece of a string value quoted back in a message, in characters.
const MAX_QUOTED_CHARS: usize = 40;

/// Every way `value` breaks `schema`, in a stable order, each a phrase for the
/// model (`missing required field "path"`); empty when `value` conforms.
///
/// The order: for an object, its missing required fields (in `required`
/// order), then its fields' own violations (in field-name order), then its
/// unknown fields.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    check(schema, value, "", &mut found);
    found
}

/// Checks `value`, found at `path` (`""` for the whole input, else like
/// `a.b[2]`), against `schema`; pushes what is wrong to `found`.
fn check(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    if let Some(expected) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, expected)
    {
        found.push(format!(
            "{} must be {}, got {}",
            subject(path),
            type_phrase(expected),
            describe(value)
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let listed: Vec<String> = allowed.iter().map(quote).collect();
        found.push(format!(
            "{} must be one of {}, got {}",
            subject(path),
            listed.join(", "),
            quote(value)
        ));
    }
    if let Value::Number(number) = value {
        check_bounds(schema, number, path, found);
    }
    match value {
        Value::Object(fields) => check_object(schema, fields, path, found),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{index}]"), found);
                }
            }
        }
        _ => {}
    }
}

/// `minimum` and `maximum`, both inclusive.
fn check_bounds(schema: &Value, number: &Number, path: &str, found: &mut Vec<String>) {
    // Without serde_json's arbitrary precision, every number has an f64 view.
    let Some(n) = number.as_f64() else { return };
    let bound = |keyword: &str| {
        schema
            .get(keyword)
            .and_then(|bound| Some((bound, bound.as_f64()?)))
    };
    if let Some((shown, minimum)) = bound("minimum")
        && n < minimum
    {
        found.push(format!(
            "{} must be at least {shown}, got {number}",
            subject(path)
        ));
    }
    if let Some((shown, maximum)) = bound("maximum")
        && n > maximum
    {
        found.push(format!(
            "{} must be at most {shown}, got {number}",
            subject(path)
        ));
    }
}

fn check_object(schema: &Value, fields: &Map<String, Value>, path: &str, found: &mut Vec<String>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in &required {
        if !fields.contains_key(*name) {
            found.push(format!("missing required field \"{}\"", join(path, name)));
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut unknown = Vec::new();
    for (name, field) in fields {
        match properties.and_then(|known| known.get(name)) {
            Some(_) if field.is_null() && !required.contains(&name.as_str()) => {}
            Some(property) => check(property, field, &join(path, name), found),
            None if closed => unknown.push(format!("\"{}\"", join(path, name))),
            None => {}
        }
    }
    if !unknown.is_empty() {
        let mut message = format!(
            "unknown field{} {}",
            if unknown.len() == 1 { "" } else { "s" },
            unknown.join(", ")
        );
        match properties.filter(|known| !known.is_empty()) {
            Some(known) => {
                let names: Vec<&str> = known.keys().map(String::as_str).collect();
                let _ = write!(message, " (the fields are {})", names.join(", "));
            }
            None => message.push_str(" (no fields are allowed)"),
        }
        found.push(message);
    }
}

fn has_type(value: &Value, expected: &str) -> bool {
    match expected {
        "string" => value.is_string(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        // A type this validator does not know: nothing can match it, which
        // the schema tests catch before a model ever sees it.
        _ => false,
    }
}

/// Whether `value` is a number with a zero fractional part (`7`, `7.0`, `7e2`).
pub(super) fn is_integer(value: &Value) -> bool {
    value.is_i64()
        || value.is_u64()
        || value
            .as_f64()
            .is_some_and(|n| n.is_finite() && n.fract() == 0.0)
}

/// `"a.b"` for field `b` of the object at `a`; just `b` at the top.
fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// What a message calls the value at `path`.
fn subject(path: &str) -> String {
    if path.is_empty() {
        "the input".to_string()
    } else {
        format!("field \"{path}\"")
    }
}

fn type_phrase(expected: &str) -> String {
    match expected {
        "integer" | "object" | "array" => format!("an {expected}"),
        "null" => "null".to_string(),
        _ => format!("a {expected}"),
    }
}

/// The kind of `value`, with the value itself when it is short and plain.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// `value` as JSON when it is a scalar (long strings cut), else its kind.
fn quote(value: &Value) -> String {
    match value {
        Value::String(s) if s.chars().count() > MAX_QUOTED_CHARS => {
            let head: String = s.chars().take(MAX_QUOTED_CHARS).collect();
            format!("{}…", Value::String(head))
        }
        Value::Array(_) | Value::Object(_) => describe(value),
        scalar => scalar.to_string(),
    }
}

#[cfg(test)]
mod tests;
