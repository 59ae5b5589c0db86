//! The `cordon.error/v1` document a failed `--json` command prints: parsed from stdout and
//! checked against the committed schema (`schema/error.v1.json`).

use std::process::Output;

use serde_json::Value;

/// The one `cordon.error/v1` document on `out`'s stdout, valid against the committed schema
/// and as a [`cordon::documents::ErrorDocument`]; its `code` is cordon's exit code.
#[track_caller]
pub fn error_document(out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let document: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("stdout is not one JSON document ({e}): {stdout}\nstderr: {stderr}")
    });
    assert_eq!(
        stdout.trim_end().lines().count(),
        1,
        "the document is one line: {stdout}"
    );
    let errors = schema_errors(&document);
    assert!(
        errors.is_empty(),
        "not valid against schema/error.v1.json: {errors:?}\n{document:#}"
    );
    serde_json::from_value::<cordon::documents::ErrorDocument>(document.clone())
        .unwrap_or_else(|e| panic!("not an ErrorDocument ({e}): {document:#}"));
    assert_eq!(
        document["code"].as_i64().map(|c| c as i32),
        out.status.code(),
        "the document's code is the exit code: {document:#}"
    );
    assert!(
        stderr.starts_with("error: "),
        "the message is on stderr too: {stderr}"
    );
    document
}

/// What makes `value` invalid against the committed `cordon.error/v1` schema (nothing: valid).
pub fn schema_errors(value: &Value) -> Vec<String> {
    let schema = committed_schema();
    let mut errors = Vec::new();
    validate(value, &schema, &schema, "", &mut errors);
    errors
}

fn committed_schema() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema/error.v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks `value` against `schema`, for the JSON Schema keywords cordon's generated schemas
/// use (`type`, `properties`, `required`, `additionalProperties`, `items`, `const`, `enum`,
/// `oneOf`, `anyOf`, `$ref` into `$defs`, `minimum`, `maximum`), collecting what fails.
fn validate(value: &Value, schema: &Value, root: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.strip_prefix("#/$defs/").expect("a local $ref");
        validate(value, &root["$defs"][name], root, at, errors);
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            other => panic!("unexpected type {other}"),
        };
        if !types.iter().any(|t| has_type(value, t)) {
            errors.push(format!("{at}: {value} is not of type {types:?}"));
            return;
        }
    }
    if let Some(expected) = schema.get("const")
        && value != expected
    {
        errors.push(format!("{at}: {value} is not {expected}"));
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {options:?}"));
    }
    if let Some(n) = value.as_f64() {
        let below = schema["minimum"].as_f64().is_some_and(|min| n < min);
        let above = schema["maximum"].as_f64().is_some_and(|max| n > max);
        if below || above {
            errors.push(format!("{at}: {n} is out of range"));
        }
    }
    for (keyword, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(options) = schema[keyword].as_array() {
            let matching = options
                .iter()
                .filter(|option| {
                    let mut errs = Vec::new();
                    validate(value, option, root, at, &mut errs);
                    errs.is_empty()
                })
                .count();
            if matching == 0 || (exactly_one && matching > 1) {
                errors.push(format!("{at}: {value} matches {matching} of {keyword}"));
            }
        }
    }
    if let Value::Object(fields) = value {
        let properties = schema["properties"].as_object();
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap();
            if !fields.contains_key(name) {
                errors.push(format!("{at}: `{name}` is missing"));
            }
        }
        for (name, field) in fields {
            match properties.and_then(|p| p.get(name)) {
                Some(property) => validate(field, property, root, &format!("{at}/{name}"), errors),
                None if schema["additionalProperties"] == Value::Bool(false) => {
                    errors.push(format!("{at}: `{name}` is not allowed"));
                }
                None => {}
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            validate(item, item_schema, root, &format!("{at}/{i}"), errors);
        }
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("unknown type {other}"),
    }
}
