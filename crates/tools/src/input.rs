//! A tool call's input once it has passed its tool's schema ([`Input::check`],
//! called by [`super::call`] before any tool runs), with typed getters that
//! cannot fail: the schema already guaranteed what they return.

use serde_json::{Map, Value};

use super::schema;
use ah_llm::ToolDef;

/// The fields of an input that conforms to its tool's `input_schema`. Only
/// [`Input::check`] makes one, so a tool that takes it never re-checks.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    fields: &'a Map<String, Value>,
}

impl<'a> Input<'a> {
    /// Checks `value` against `spec.input_schema`. The error lists every
    /// violation in one message for the model:
    /// `invalid input for edit: missing required field "old_string"; field
    /// "replace_all" must be a boolean, got a string`.
    pub fn check(spec: &ToolDef, value: &'a Value) -> Result<Input<'a>, String> {
        let mut violations = schema::violations(&spec.input_schema, value);
        match value {
            Value::Object(fields) if violations.is_empty() => Ok(Input { fields }),
            _ => {
                // Every tool schema is an object schema (tested), so this only
                // guards a schema that forgot to say so.
                if violations.is_empty() {
                    violations.push("the input must be an object".to_string());
                }
                Err(format!(
                    "invalid input for {}: {}",
                    spec.name,
                    violations.join("; ")
                ))
            }
        }
    }

    /// A string field the schema requires.
    pub fn string(&self, field: &str) -> &'a str {
        let value = self.fields.get(field).and_then(Value::as_str);
        debug_assert!(value.is_some(), "\"{field}\" is not a required string");
        value.unwrap_or_default()
    }

    /// An optional integer field with a schema `minimum` of 0 or more; `None`
    /// when not given. A number written with a zero fraction (`120.0`) is
    /// read as the integer it is; one past `u64::MAX` as `u64::MAX`.
    pub fn integer(&self, field: &str) -> Option<u64> {
        let value = self.fields.get(field)?;
        value.as_u64().or_else(|| {
            let n = value.as_f64().filter(|_| schema::is_integer(value))?;
            // Saturating: the schema's minimum keeps it from being negative.
            Some(n as u64)
        })
    }

    /// An optional boolean field; `None` when not given.
    pub fn boolean(&self, field: &str) -> Option<bool> {
        self.fields.get(field).and_then(Value::as_bool)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec() -> ToolDef {
        ToolDef {
            name: "demo".to_string(),
            description: String::new(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1},
                    "all": {"type": "boolean"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    #[test]
    fn a_conforming_input_gives_typed_fields() {
        let value = json!({"path": "a.txt", "limit": 5, "all": true});
        let input = Input::check(&spec(), &value).unwrap();
        assert_eq!(input.string("path"), "a.txt");
        assert_eq!(input.integer("limit"), Some(5));
        assert_eq!(input.boolean("all"), Some(true));
    }

    #[test]
    fn an_integer_written_with_a_zero_fraction_reads_as_that_integer() {
        let value = json!({"path": "a.txt", "limit": 120.0});
        let input = Input::check(&spec(), &value).unwrap();
        assert_eq!(input.integer("limit"), Some(120));
        let value = json!({"path": "a.txt", "limit": 1e300});
        let input = Input::check(&spec(), &value).unwrap();
        assert_eq!(input.integer("limit"), Some(u64::MAX));
    }

    #[test]
    fn unknown_fields_are_still_refused() {
        let value = json!({"path": "a.txt", "limit": 2.0, "lmit": 2});
        let err = Input::check(&spec(), &value).unwrap_err();
        assert_eq!(
            err,
            "invalid input for demo: unknown field \"lmit\" (the fields are all, limit, path)"
        );
    }

    #[test]
    fn optional_fields_absent_or_null_are_none() {
        let value = json!({"path": "a.txt", "limit": null});
        let input = Input::check(&spec(), &value).unwrap();
        assert_eq!(input.integer("limit"), None);
        assert_eq!(input.boolean("all"), None);
    }

    #[test]
    fn every_violation_is_in_one_message_naming_the_tool() {
        let value = json!({"limit": 0, "all": "yes", "extra": 1});
        let err = Input::check(&spec(), &value).unwrap_err();
        assert_eq!(
            err,
            "invalid input for demo: missing required field \"path\"; \
             field \"all\" must be a boolean, got a string; \
             field \"limit\" must be at least 1, got 0; \
             unknown field \"extra\" (the fields are all, limit, path)"
        );
        let err = Input::check(&spec(), &json!("a.txt")).unwrap_err();
        assert_eq!(
            err,
            "invalid input for demo: the input must be an object, got a string"
        );
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_still_refuses_a_non_object() {
        let spec = ToolDef {
            input_schema: json!({}),
            ..spec()
        };
        let err = Input::check(&spec, &json!([1])).unwrap_err();
        assert_eq!(err, "invalid input for demo: the input must be an object");
    }
}
