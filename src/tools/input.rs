//! Minimal input checks for tool calls: the required fields are present and of
//! the right JSON type, and errors name the field so the model can fix its call.

use serde_json::Value;

/// A required string field.
pub fn string<'a>(input: &'a Value, field: &str) -> Result<&'a str, String> {
    match field_of(input, field)? {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(wrong_type(field, "a string", other)),
        None => Err(format!("missing required field \"{field}\" (a string)")),
    }
}

/// An optional integer field that must be at least 1 when given.
pub fn positive_integer(input: &Value, field: &str) -> Result<Option<u64>, String> {
    match field_of(input, field)? {
        None | Some(Value::Null) => Ok(None),
        Some(value) => match value.as_u64() {
            Some(n) if n >= 1 => Ok(Some(n)),
            _ => Err(wrong_type(field, "an integer of at least 1", value)),
        },
    }
}

/// An optional boolean field.
pub fn boolean(input: &Value, field: &str) -> Result<Option<bool>, String> {
    match field_of(input, field)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(field, "true or false", other)),
    }
}

fn field_of<'a>(input: &'a Value, field: &str) -> Result<Option<&'a Value>, String> {
    match input {
        Value::Object(map) => Ok(map.get(field)),
        other => Err(format!(
            "tool input must be a JSON object with the field \"{field}\", got {}",
            kind(other)
        )),
    }
}

fn wrong_type(field: &str, expected: &str, got: &Value) -> String {
    format!(
        "field \"{field}\" must be {expected}, got {}",
        describe(got)
    )
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) => format!("the number {n}"),
        other => kind(other).to_string(),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_field_present_missing_and_wrong_type() {
        let input = json!({"path": "a.txt", "n": 3});
        assert_eq!(string(&input, "path"), Ok("a.txt"));
        let missing = string(&input, "content").unwrap_err();
        assert!(
            missing.contains("missing required field \"content\""),
            "{missing}"
        );
        let wrong = string(&input, "n").unwrap_err();
        assert_eq!(wrong, "field \"n\" must be a string, got the number 3");
    }

    #[test]
    fn positive_integer_rejects_zero_negative_fraction_and_strings() {
        let input = json!({"a": 5, "b": 0, "c": -1, "d": 1.5, "e": "7", "f": null});
        assert_eq!(positive_integer(&input, "a"), Ok(Some(5)));
        assert_eq!(positive_integer(&input, "f"), Ok(None));
        assert_eq!(positive_integer(&input, "absent"), Ok(None));
        for field in ["b", "c", "d", "e"] {
            let err = positive_integer(&input, field).unwrap_err();
            assert!(
                err.starts_with(&format!("field \"{field}\" must be")),
                "{err}"
            );
        }
    }

    #[test]
    fn boolean_and_non_object_input() {
        let input = json!({"yes": true, "no": "false"});
        assert_eq!(boolean(&input, "yes"), Ok(Some(true)));
        assert_eq!(boolean(&input, "absent"), Ok(None));
        assert!(boolean(&input, "no").unwrap_err().contains("true or false"));
        let err = string(&json!(["path"]), "path").unwrap_err();
        assert!(err.contains("must be a JSON object"), "{err}");
    }
}
