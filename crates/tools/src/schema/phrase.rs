//! The validator's findings in plain words for the model: which field
//! (`field "files[2].path"`, or `the input`), what it must be, and what it
//! was (short values quoted, long ones cut, containers by their kind).

use std::fmt::Write as _;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

/// Longest piece of a string value quoted back in a message, in characters.
pub(super) const MAX_QUOTED_CHARS: usize = 40;

/// Every error as a phrase, in the order [`super::violations`] promises;
/// nothing below a value of the wrong type.
pub(super) fn all(schema: &Value, value: &Value, errors: &[ValidationError<'_>]) -> Vec<String> {
    let mistyped: Vec<String> = errors
        .iter()
        .filter(|error| matches!(error.kind(), ValidationErrorKind::Type { .. }))
        .map(|error| error.instance_path().to_string())
        .collect();
    let below_mistyped = |at: &str| {
        mistyped
            .iter()
            .any(|t| at.starts_with(t.as_str()) && at[t.len()..].starts_with('/'))
    };
    let mut found: Vec<(Vec<(u8, String)>, String)> = Vec::new();
    // `additionalProperties: false` without `properties` reports each
    // field as a false schema: one message per object, as for the others.
    let mut extras: Vec<(String, String, Vec<String>)> = Vec::new();
    for error in errors {
        let at = error.instance_path().to_string();
        let is_type = matches!(error.kind(), ValidationErrorKind::Type { .. });
        if below_mistyped(&at) || (!is_type && mistyped.contains(&at)) {
            continue;
        }
        let location = error.schema_path().to_string();
        if matches!(error.kind(), ValidationErrorKind::FalseSchema)
            && location.ends_with("/additionalProperties")
        {
            // The error is the object's (`at`); with no `properties`
            // beside it, every field of the object is unknown.
            if !extras.iter().any(|(p, l, _)| *p == at && *l == location) {
                let names = value
                    .pointer(&at)
                    .and_then(Value::as_object)
                    .map(|fields| fields.keys().cloned().collect())
                    .unwrap_or_default();
                extras.push((at, location, names));
            }
            continue;
        }
        let last = match error.kind() {
            ValidationErrorKind::Required { .. } => (0, "1".to_string()),
            ValidationErrorKind::AdditionalProperties { .. } => (2, String::new()),
            _ => (0, "0".to_string()),
        };
        found.push((order_key(&at, last), one(schema, value, error)));
    }
    for (parent, location, names) in extras {
        let path = readable(value, &parent);
        let message = unknown_fields(schema, &location, &path, &names);
        found.push((order_key(&parent, (2, String::new())), message));
    }
    // As a walk of the value would find them: at each object its own
    // mistakes, its missing fields (in `required` order: the sort is
    // stable), its fields by name (items by index), then its unknown fields.
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut phrases: Vec<String> = Vec::with_capacity(found.len());
    for (_, phrase) in found {
        if !phrases.contains(&phrase) {
            phrases.push(phrase);
        }
    }
    phrases
}

/// The place of an error at JSON pointer `at` in the walk order, `last`
/// saying where among the value's own findings it goes.
fn order_key(at: &str, last: (u8, String)) -> Vec<(u8, String)> {
    let mut key: Vec<(u8, String)> = at
        .split('/')
        .skip(1)
        .map(|token| match token.parse::<u64>() {
            Ok(index) => (1, format!("{index:020}")),
            Err(_) => (1, token.to_string()),
        })
        .collect();
    key.push(last);
    key
}

/// One error in words.
fn one(schema: &Value, root: &Value, error: &ValidationError<'_>) -> String {
    let path = readable(root, &error.instance_path().to_string());
    let subject = subject(&path);
    let got = error.instance();
    match error.kind() {
        ValidationErrorKind::Type { kind } => {
            format!(
                "{subject} must be {}, got {}",
                type_phrase(kind),
                describe(got)
            )
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            format!("missing required field \"{}\"", join(&path, name))
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            unknown_fields(schema, &error.schema_path().to_string(), &path, unexpected)
        }
        ValidationErrorKind::Enum { options } => {
            let listed: Vec<String> = options
                .as_array()
                .into_iter()
                .flatten()
                .map(quote)
                .collect();
            format!(
                "{subject} must be one of {}, got {}",
                listed.join(", "),
                quote(got)
            )
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!(
                "{subject} must be {}, got {}",
                quote(expected_value),
                quote(got)
            )
        }
        ValidationErrorKind::Minimum { limit } => {
            format!("{subject} must be at least {limit}, got {got}")
        }
        ValidationErrorKind::Maximum { limit } => {
            format!("{subject} must be at most {limit}, got {got}")
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("{subject} must be more than {limit}, got {got}")
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("{subject} must be less than {limit}, got {got}")
        }
        ValidationErrorKind::MultipleOf { multiple_of } => {
            format!("{subject} must be a multiple of {multiple_of}, got {got}")
        }
        ValidationErrorKind::Pattern { pattern } => format!(
            "{subject} must match the pattern {}, got {}",
            Value::String(pattern.clone()),
            quote(got)
        ),
        ValidationErrorKind::Format { format } => {
            format!("{subject} must be a valid {format}, got {}", quote(got))
        }
        ValidationErrorKind::MinLength { limit } => {
            format!(
                "{subject} must be at least {limit} characters long, got {}",
                quote(got)
            )
        }
        ValidationErrorKind::MaxLength { limit } => {
            format!(
                "{subject} must be at most {limit} characters long, got {}",
                quote(got)
            )
        }
        ValidationErrorKind::MinItems { limit } => {
            format!(
                "{subject} must have at least {limit} items, got {}",
                count(got)
            )
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!(
                "{subject} must have at most {limit} items, got {}",
                count(got)
            )
        }
        ValidationErrorKind::UniqueItems => format!("{subject} must not repeat an item"),
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            let forms: Vec<String> = context
                .iter()
                .enumerate()
                .map(|(i, branch)| {
                    let said = all(schema, root, branch);
                    format!("({}) {}", i + 1, said.join("; "))
                })
                .collect();
            format!(
                "{subject} matches none of its {} allowed forms: {}",
                context.len(),
                forms.join(" ")
            )
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => format!(
            "{subject} matches more than one of its allowed forms (oneOf): make it fit exactly one"
        ),
        // Rarer keywords: the validator's own words, after the subject.
        _ => format!("{subject}: {error}"),
    }
}

/// `unknown fields "a", "b" (the fields are x, y)`, the fields read from
/// the schema object whose `additionalProperties` is at `location`.
fn unknown_fields(schema: &Value, location: &str, path: &str, unexpected: &[String]) -> String {
    let names: Vec<String> = unexpected
        .iter()
        .map(|name| format!("\"{}\"", join(path, name)))
        .collect();
    let mut message = format!(
        "unknown field{} {}",
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    let object = location
        .strip_suffix("/additionalProperties")
        .and_then(|at| schema.pointer(at));
    let known: Vec<&str> = object
        .and_then(|object| object.get("properties"))
        .and_then(Value::as_object)
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default();
    match known.is_empty() {
        false => {
            let _ = write!(message, " (the fields are {})", known.join(", "));
        }
        true => message.push_str(" (no fields are allowed)"),
    }
    message
}

/// A JSON pointer into `root` as `a.b[2].c`.
fn readable(root: &Value, pointer: &str) -> String {
    let mut path = String::new();
    let mut at = root;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        match at {
            Value::Array(items) => {
                let _ = write!(path, "[{token}]");
                at = token
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get(i))
                    .unwrap_or(&Value::Null);
            }
            _ => {
                path = join(&path, &token);
                at = at.get(&token).unwrap_or(&Value::Null);
            }
        }
    }
    path
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

fn type_phrase(kind: &TypeKind) -> String {
    let one = |kind: JsonType| {
        let name = kind.to_string();
        match name.as_str() {
            "integer" | "object" | "array" => format!("an {name}"),
            "null" => "null".to_string(),
            _ => format!("a {name}"),
        }
    };
    match kind {
        TypeKind::Single(kind) => one(*kind),
        TypeKind::Multiple(kinds) => {
            let each: Vec<String> = kinds.iter().map(one).collect();
            format!(
                "{} or {}",
                each[..each.len() - 1].join(", "),
                each[each.len() - 1]
            )
        }
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

fn count(value: &Value) -> String {
    match value.as_array().map(Vec::len) {
        Some(1) => "1 item".to_string(),
        Some(n) => format!("{n} items"),
        None => describe(value),
    }
}
