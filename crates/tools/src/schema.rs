//! Tool input validation against the tool's JSON Schema, by the maintained
//! `jsonschema` crate (every keyword of draft 2020-12 and the earlier
//! drafts: `oneOf`/`anyOf`, `$ref` within the schema, `pattern`, `format`,
//! nested arrays…), with every violation listed at once in plain words
//! (`phrase`), so the model can fix a call in one go.
//!
//! Where JSON Schema leaves room, or models differ from it, ah decides:
//! - `null` for a property that is not required counts as absent, as models
//!   send it for "not given"; for a required property it is a violation.
//! - A value of the wrong type gets no further checks (bounds, fields,
//!   items): they would only repeat the same mistake.
//! - `format` is checked (`date`, `email`, `uri`, …), not only annotated.
//! - A `$ref` to another document is never fetched: such a schema does not
//!   compile, and the tool cannot be called (its loader says so first).

mod phrase;

use serde_json::{Map, Value};

/// Every way `value` breaks `schema`, in a stable order, each a phrase for the
/// model (`missing required field "path"`); empty when `value` conforms.
///
/// The order: missing required fields first (in `required` order), then
/// the fields' own violations (in field-name order), then unknown fields.
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let validator = match compile(schema) {
        Ok(validator) => validator,
        Err(why) => return vec![why],
    };
    let value = normalized(schema, value);
    let errors: Vec<jsonschema::ValidationError<'_>> = validator.iter_errors(&value).collect();
    phrase::all(schema, &value, &errors)
}

/// `schema` compiled, or why it cannot be (an error for whoever wrote it).
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|err| format!("the tool's input schema is not valid JSON Schema: {err}"))
}

/// `value` without the `null` fields its schema declares but does not
/// require, at every level the schema describes with `properties`: what a
/// tool is given once the input passed.
pub fn normalized(schema: &Value, value: &Value) -> Value {
    match (value, schema.get("properties").and_then(Value::as_object)) {
        (Value::Object(fields), Some(properties)) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let kept: Map<String, Value> = fields
                .iter()
                .filter(|(name, field)| {
                    !field.is_null()
                        || required.contains(&name.as_str())
                        || !properties.contains_key(name.as_str())
                })
                .map(|(name, field)| {
                    let field = match properties.get(name) {
                        Some(property) => normalized(property, field),
                        None => field.clone(),
                    };
                    (name.clone(), field)
                })
                .collect();
            Value::Object(kept)
        }
        _ => value.clone(),
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

#[cfg(test)]
mod tests;
