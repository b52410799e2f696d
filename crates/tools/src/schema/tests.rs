//! The validator rule by rule, several violations at once, nesting, and the
//! tools' own schemas.

use serde_json::{Map, Value, json};

use super::*;
use ah_llm::models::EditFormat;

/// Every tool's spec, both edit tools included.
fn specs() -> Vec<ah_llm::ToolDef> {
    let mut all = crate::specs(EditFormat::Edit);
    all.extend(
        crate::specs(EditFormat::ApplyPatch)
            .into_iter()
            .filter(|spec| spec.name == "apply_patch"),
    );
    all
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

#[test]
fn each_json_type_accepts_its_own_and_names_what_it_got() {
    let cases = [
        ("string", json!("x"), json!(3), "a string, got the number 3"),
        ("integer", json!(-4), json!("4"), "an integer, got a string"),
        ("number", json!(2.5), json!(true), "a number, got true"),
        (
            "boolean",
            json!(false),
            json!("false"),
            "a boolean, got a string",
        ),
        ("object", json!({}), json!([1]), "an object, got an array"),
        (
            "array",
            json!([]),
            json!({"a": 1}),
            "an array, got an object",
        ),
    ];
    for (kind, good, bad, message) in cases {
        let schema = json!({"type": kind});
        assert_eq!(violations(&schema, &good), Vec::<String>::new(), "{kind}");
        assert_eq!(
            violations(&schema, &bad),
            [format!("the input must be {message}")],
            "{kind}"
        );
    }
}

#[test]
fn an_integer_is_any_number_with_a_zero_fraction() {
    let integer = json!({"type": "integer", "minimum": 1, "maximum": 600});
    assert!(violations(&integer, &json!(7)).is_empty());
    // As in JSON Schema: 120.0 and 1.2e2 are integers, however written.
    assert!(violations(&integer, &json!(120.0)).is_empty());
    let exponent: Value = serde_json::from_str("1.2e2").unwrap();
    assert!(violations(&integer, &exponent).is_empty());
    assert!(violations(&json!({"type": "integer"}), &json!(u64::MAX)).is_empty());
    assert_eq!(
        violations(&integer, &json!(1.5)),
        ["the input must be an integer, got the number 1.5"]
    );
    // Bounds still apply to one written with a fraction.
    assert_eq!(
        violations(&integer, &json!(601.0)),
        ["the input must be at most 600, got 601.0"]
    );
    let number = json!({"type": "number"});
    assert!(violations(&number, &json!(1)).is_empty());
    assert!(violations(&number, &json!(1.5)).is_empty());
}

#[test]
fn missing_required_fields_are_listed_in_required_order() {
    let schema = object(
        json!({"a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}}),
        &["c", "a"],
    );
    assert_eq!(
        violations(&schema, &json!({"b": "x"})),
        [
            "missing required field \"c\"",
            "missing required field \"a\""
        ]
    );
    assert!(violations(&schema, &json!({"a": "x", "c": "y"})).is_empty());
}

#[test]
fn null_is_absent_for_an_optional_field_and_wrong_for_a_required_one() {
    let schema = object(
        json!({"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}}),
        &["path"],
    );
    assert!(violations(&schema, &json!({"path": "a", "limit": null})).is_empty());
    assert_eq!(
        violations(&schema, &json!({"path": null})),
        ["field \"path\" must be a string, got null"]
    );
}

#[test]
fn unknown_fields_are_one_violation_naming_the_allowed_fields() {
    let schema = object(
        json!({"command": {"type": "string"}, "timeout": {"type": "integer"}}),
        &["command"],
    );
    assert_eq!(
        violations(&schema, &json!({"command": "ls", "cwd": "/"})),
        ["unknown field \"cwd\" (the fields are command, timeout)"]
    );
    assert_eq!(
        violations(&schema, &json!({"command": "ls", "cwd": "/", "env": {}})),
        ["unknown fields \"cwd\", \"env\" (the fields are command, timeout)"]
    );
    let empty = json!({"type": "object", "additionalProperties": false});
    assert_eq!(
        violations(&empty, &json!({"x": 1})),
        ["unknown field \"x\" (no fields are allowed)"]
    );
}

#[test]
fn extra_fields_pass_unless_additional_properties_is_false() {
    let open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    assert!(violations(&open, &json!({"a": "x", "b": 2})).is_empty());
    let also_open = json!({"type": "object", "additionalProperties": true});
    assert!(violations(&also_open, &json!({"b": 2})).is_empty());
}

#[test]
fn enum_lists_the_allowed_values_and_quotes_what_it_got() {
    let schema = json!({"type": "string", "enum": ["fast", "slow"]});
    assert!(violations(&schema, &json!("slow")).is_empty());
    assert_eq!(
        violations(&schema, &json!("medium")),
        ["the input must be one of \"fast\", \"slow\", got \"medium\""]
    );
    let long = "y".repeat(100);
    let got = violations(&schema, &json!(long));
    let cut = format!("got \"{}\"…", "y".repeat(phrase::MAX_QUOTED_CHARS));
    assert!(got[0].ends_with(&cut), "{got:?}");
    let any = json!({"enum": [1, null, {"a": 1}]});
    assert!(violations(&any, &json!(null)).is_empty());
    assert_eq!(
        violations(&any, &json!([1])),
        ["the input must be one of 1, null, an object, got an array"]
    );
}

#[test]
fn bounds_are_inclusive_and_apply_to_integers_and_numbers() {
    let schema = json!({"type": "integer", "minimum": 1, "maximum": 600});
    for ok in [1, 2, 600] {
        assert!(violations(&schema, &json!(ok)).is_empty(), "{ok}");
    }
    assert_eq!(
        violations(&schema, &json!(0)),
        ["the input must be at least 1, got 0"]
    );
    assert_eq!(
        violations(&schema, &json!(-5)),
        ["the input must be at least 1, got -5"]
    );
    assert_eq!(
        violations(&schema, &json!(601)),
        ["the input must be at most 600, got 601"]
    );
    let fraction = json!({"type": "number", "minimum": 0.5, "maximum": 1.5});
    assert!(violations(&fraction, &json!(0.5)).is_empty());
    assert_eq!(
        violations(&fraction, &json!(1.75)),
        ["the input must be at most 1.5, got 1.75"]
    );
}

#[test]
fn every_violation_of_an_object_is_listed_at_once() {
    let schema = object(
        json!({
            "path": {"type": "string"},
            "old_string": {"type": "string"},
            "replace_all": {"type": "boolean"},
            "limit": {"type": "integer", "minimum": 1}
        }),
        &["path", "old_string"],
    );
    let input = json!({"replace_all": "true", "limit": 0, "force": true, "path": 3});
    assert_eq!(
        violations(&schema, &input),
        [
            "missing required field \"old_string\"",
            "field \"limit\" must be at least 1, got 0",
            "field \"path\" must be a string, got the number 3",
            "field \"replace_all\" must be a boolean, got a string",
            "unknown field \"force\" (the fields are limit, old_string, path, replace_all)"
        ]
    );
}

#[test]
fn a_value_of_the_wrong_type_gets_no_further_checks() {
    let schema = object(json!({"a": {"type": "string"}}), &["a"]);
    // Not "missing a" as well: the one mistake is that it is not an object.
    assert_eq!(
        violations(&schema, &json!(["a"])),
        ["the input must be an object, got an array"]
    );
    let bounded = json!({"type": "integer", "minimum": 10});
    assert_eq!(
        violations(&bounded, &json!(1.5)),
        ["the input must be an integer, got the number 1.5"]
    );
}

#[test]
fn nested_objects_and_array_items_are_named_by_their_path() {
    let schema = object(
        json!({
            "files": {
                "type": "array",
                "items": object(
                    json!({"path": {"type": "string"}, "mode": {"enum": ["add", "delete"]}}),
                    &["path"],
                )
            },
            "tags": {"type": "array", "items": {"type": "string"}}
        }),
        &["files"],
    );
    let input = json!({
        "files": [{"path": "a"}, {"mode": "move", "x": 1}, "b"],
        "tags": ["ok", 2]
    });
    assert_eq!(
        violations(&schema, &input),
        [
            "missing required field \"files[1].path\"",
            "field \"files[1].mode\" must be one of \"add\", \"delete\", got \"move\"",
            "unknown field \"files[1].x\" (the fields are mode, path)",
            "field \"files[2]\" must be an object, got a string",
            "field \"tags[1]\" must be a string, got the number 2"
        ]
    );
    assert!(violations(&schema, &json!({"files": [], "tags": []})).is_empty());
}

#[test]
fn an_empty_schema_accepts_anything() {
    for value in [
        json!(null),
        json!(1),
        json!("s"),
        json!([1]),
        json!({"a": 1}),
    ] {
        assert!(violations(&json!({}), &value).is_empty(), "{value}");
    }
}

/// What in a tool's own `schema` (at `path`) would let a model's mistake
/// through: object schemas that do not close themselves with
/// `additionalProperties: false`, and required fields that are no property.
fn unclosed(schema: &Value, path: &str, found: &mut Vec<String>) {
    if schema.get("type") == Some(&json!("object")) {
        if schema.get("additionalProperties") != Some(&json!(false)) {
            found.push(format!("{path}: additionalProperties is not false"));
        }
        let properties = schema["properties"].as_object();
        for (name, property) in properties.into_iter().flatten() {
            unclosed(property, &format!("{path}.{name}"), found);
        }
        for name in schema["required"].as_array().into_iter().flatten() {
            let known = name
                .as_str()
                .is_some_and(|name| properties.is_some_and(|p| p.contains_key(name)));
            if !known {
                found.push(format!("{path}: required {name} is not a property"));
            }
        }
    }
    if let Some(items) = schema.get("items") {
        unclosed(items, &format!("{path}[]"), found);
    }
}

/// A value of JSON type `kind`.
fn example(kind: &str) -> Value {
    match kind {
        "string" => json!(""),
        "integer" => json!(0),
        "number" => json!(0.5),
        "boolean" => json!(true),
        "object" => json!({}),
        "array" => json!([]),
        _ => Value::Null,
    }
}

#[test]
fn every_tool_schema_compiles_and_is_closed() {
    for spec in specs() {
        assert!(compile(&spec.input_schema).is_ok(), "{}", spec.name);
        let mut found = Vec::new();
        unclosed(&spec.input_schema, &spec.name, &mut found);
        assert_eq!(found, Vec::<String>::new(), "{}", spec.input_schema);
        assert_eq!(spec.input_schema["type"], json!("object"), "{}", spec.name);
    }
}

#[test]
fn every_tool_schema_rejects_an_unknown_field_and_accepts_its_required_ones() {
    for spec in specs() {
        let schema = &spec.input_schema;
        let mut minimal = Map::new();
        for name in schema["required"].as_array().into_iter().flatten() {
            let name = name.as_str().unwrap_or_default();
            let kind = schema["properties"][name]["type"].as_str().unwrap_or("");
            minimal.insert(name.to_string(), example(kind));
        }
        let minimal = Value::Object(minimal);
        assert!(violations(schema, &minimal).is_empty(), "{}", spec.name);

        let mut extra = minimal.clone();
        extra["surprise"] = json!(1);
        let found = violations(schema, &extra);
        assert_eq!(found.len(), 1, "{}: {found:?}", spec.name);
        assert!(
            found[0].starts_with("unknown field \"surprise\" (the fields are "),
            "{}: {found:?}",
            spec.name
        );
    }
}

#[test]
fn bash_timeout_bounds_are_in_the_schema_the_model_sees() {
    let bash = specs()
        .into_iter()
        .find(|spec| spec.name == "bash")
        .map(|spec| spec.input_schema);
    let timeout = &bash.unwrap_or_default()["properties"]["timeout"];
    assert_eq!(timeout["minimum"], json!(1));
    assert_eq!(timeout["maximum"], json!(600));
}

/// A schema as MCP servers and project tools bring them.
fn rich() -> Value {
    json!({
        "type": "object",
        "$defs": {"count": {"type": "integer", "minimum": 1}},
        "properties": {
            "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 12},
            "when": {"type": "string", "format": "date"},
            "copies": {"$ref": "#/$defs/count"},
            "target": {"oneOf": [
                {"type": "string", "format": "email"},
                {"type": "object", "properties": {"host": {"type": "string"}},
                 "required": ["host"], "additionalProperties": false}
            ]},
            "level": {"anyOf": [{"type": "integer"}, {"enum": ["low", "high"]}]},
            "grid": {"type": "array", "minItems": 1,
                     "items": {"type": "array", "items": {"type": "number"}}}
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

#[test]
fn rich_schemas_accept_what_fits_them() {
    let good = json!({
        "name": "build-7", "when": "2026-11-25", "copies": 2,
        "target": {"host": "ci"}, "level": "low", "grid": [[1, 2.5], []]
    });
    assert_eq!(violations(&rich(), &good), Vec::<String>::new());
    let also = json!({"name": "a", "target": "ops@example.com", "level": 3});
    assert_eq!(violations(&rich(), &also), Vec::<String>::new());
}

#[test]
fn rich_schemas_name_every_violation_in_plain_words() {
    let bad = json!({
        "name": "Build 7!", "when": "yesterday", "copies": 0,
        "target": {"port": 1}, "level": "mid", "grid": [[1, "x"]]
    });
    assert_eq!(
        violations(&rich(), &bad),
        [
            "field \"copies\" must be at least 1, got 0",
            "field \"grid[0][1]\" must be a number, got a string",
            "field \"level\" matches none of its 2 allowed forms: (1) field \"level\" must be \
             an integer, got a string (2) field \"level\" must be one of \"low\", \"high\", got \"mid\"",
            "field \"name\" must match the pattern \"^[a-z][a-z0-9-]*$\", got \"Build 7!\"",
            "field \"target\" matches none of its 2 allowed forms: (1) field \"target\" must be \
             a string, got an object (2) missing required field \"target.host\"; unknown field \
             \"target.port\" (the fields are host)",
            "field \"when\" must be a valid date, got \"yesterday\"",
        ]
    );
    let empty_grid = json!({"name": "a", "grid": []});
    assert_eq!(
        violations(&rich(), &empty_grid),
        ["field \"grid\" must have at least 1 items, got 0 items"]
    );
}

#[test]
fn a_schema_that_reaches_outside_itself_is_refused_and_nothing_is_fetched() {
    for reference in ["http://127.0.0.1:9/schema.json", "file:///etc/passwd"] {
        let schema = json!({"type": "object", "properties": {"a": {"$ref": reference}}});
        let found = violations(&schema, &json!({"a": 1}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("the tool's input schema is not valid JSON Schema"),
            "{found:?}"
        );
    }
}
