//! The configuration's fields, types and bounds: `schema.json`, generated from quicbench's
//! impairment table (src/quicbench/model/impairments.py) and embedded here, so linkem accepts
//! exactly what the plan check accepts. A quicbench unit test fails when the committed file and
//! the table drift.
//!
//! The schema uses a small subset of JSON Schema, which this module checks: `$ref` to
//! `#/$defs/NAME`, `type` (a name or a list of names), `enum` of strings, `minimum`,
//! `exclusiveMinimum`, `maximum`, `properties` with `additionalProperties: false`, `required`.
//! (A general validator crate would add dozens of dependencies for this subset.)
//! Errors are one line, `config: <path>: <problem>`, as config.rs's.

use serde_json::{Map, Value};
use std::sync::OnceLock;

pub const SCHEMA_TEXT: &str = include_str!("../schema.json");

pub fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(SCHEMA_TEXT).expect("linkem/schema.json is valid JSON"))
}

fn show(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        _ => v.to_string(),
    }
}

fn err<T>(path: &str, msg: impl AsRef<str>) -> Result<T, String> {
    let p = if path.is_empty() { "(top level)" } else { path };
    Err(format!("config: {}: {}", p, msg.as_ref()))
}

fn resolve<'a>(node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.strip_prefix("#/$defs/").expect("schema refs are #/$defs/NAME");
            &schema()["$defs"][name]
        }
        None => node,
    }
}

fn types(node: &Value) -> Vec<&str> {
    match node.get("type") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "string" => v.is_string(),
        "object" => v.is_object(),
        "number" => v.as_f64().is_some_and(f64::is_finite),
        "integer" => v.is_u64() || v.is_i64(),
        _ => false,
    }
}

fn expected(ts: &[&str]) -> String {
    let main = ts.iter().find(|t| **t != "null").copied().unwrap_or("null");
    match main {
        "number" => "expected a number".into(),
        "integer" => "expected an integer".into(),
        "boolean" => "expected true or false".into(),
        "string" => "expected a string".into(),
        "object" => "expected an object".into(),
        other => format!("expected {}", other),
    }
}

/// The accepted range of a number node, as errors state it.
pub fn range_text(node: &Value) -> String {
    let lo = node.get("minimum").and_then(Value::as_f64);
    let lo_open = node.get("exclusiveMinimum").and_then(Value::as_f64);
    let hi = node.get("maximum").and_then(Value::as_f64);
    match (lo, lo_open, hi) {
        (Some(a), _, Some(b)) => format!("between {} and {}", a, b),
        (_, Some(a), Some(b)) => format!("> {} and <= {}", a, b),
        (Some(a), _, None) => format!(">= {}", a),
        (_, Some(a), None) => format!("> {}", a),
        (None, None, Some(b)) => format!("<= {}", b),
        _ => String::new(),
    }
}

/// Check `v` at `path` against the schema node (the whole configuration: `schema()`).
pub fn validate(v: &Value, node: &Value, path: &str) -> Result<(), String> {
    let node = resolve(node);
    let ts = types(node);
    if !ts.is_empty() && !ts.iter().any(|t| is_type(v, t)) {
        let integer = ts.contains(&"integer") && v.is_number();
        if integer {
            return err(path, format!("must be an integer {}, got {}", range_text(node), show(v)));
        }
        return err(path, format!("{}, got {}", expected(&ts), show(v)));
    }
    if v.is_null() {
        return Ok(());
    }
    if let Some(choices) = node.get("enum").and_then(Value::as_array) {
        if !choices.contains(v) {
            let names: Vec<&str> = choices.iter().filter_map(Value::as_str).collect();
            return err(path, format!("must be one of {}, got {}", names.join(", "), show(v)));
        }
    }
    if let Some(x) = v.as_f64() {
        let lo = node.get("minimum").and_then(Value::as_f64);
        let lo_open = node.get("exclusiveMinimum").and_then(Value::as_f64);
        let hi = node.get("maximum").and_then(Value::as_f64);
        let out = lo.is_some_and(|a| x < a) || lo_open.is_some_and(|a| x <= a) || hi.is_some_and(|b| x > b);
        if out {
            let what = if ts.contains(&"integer") { "an integer " } else { "" };
            return err(path, format!("must be {}{}, got {}", what, range_text(node), show(v)));
        }
    }
    if let Some(m) = v.as_object() {
        check_object(m, node, path)?;
    }
    Ok(())
}

fn check_object(m: &Map<String, Value>, node: &Value, path: &str) -> Result<(), String> {
    let empty = Map::new();
    let props = node.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{}.{}", path, k) };
    if node.get("additionalProperties") == Some(&Value::Bool(false)) {
        for k in m.keys() {
            if !props.contains_key(k) {
                let allowed: Vec<&str> = props.keys().map(String::as_str).collect();
                return err(&join(k), format!("unknown field (allowed: {})", allowed.join(", ")));
            }
        }
    }
    if let Some(req) = node.get("required").and_then(Value::as_array) {
        for k in req.iter().filter_map(Value::as_str) {
            if !m.contains_key(k) {
                return err(&join(k), "required");
            }
        }
    }
    for (k, x) in m {
        if let Some(sub) = props.get(k) {
            validate(x, sub, &join(k))?;
        }
    }
    Ok(())
}

#[cfg(test)]
/// The schema node of one direction field ("delay_ms", or "loss.pct" inside an object).
pub fn field(name: &str) -> &'static Value {
    let mut node = &schema()["$defs"]["direction"];
    for part in name.split('.') {
        node = &node["properties"][part];
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_is_the_subset_this_module_checks() {
        // every keyword the committed schema uses is one validate() knows
        fn walk(v: &Value, out: &mut Vec<String>) {
            if let Some(m) = v.as_object() {
                for (k, x) in m {
                    if k != "properties" && k != "$defs" {
                        out.push(k.clone());
                    }
                    if k == "properties" || k == "$defs" {
                        for y in x.as_object().unwrap().values() {
                            walk(y, out);
                        }
                    }
                }
            }
        }
        let mut keys = vec![];
        walk(schema(), &mut keys);
        let known = ["$schema", "$comment", "title", "description", "type", "additionalProperties", "$ref", "enum",
                     "minimum", "exclusiveMinimum", "maximum", "required"];
        for k in keys {
            assert!(known.contains(&k.as_str()), "schema keyword {} is not checked by schema.rs", k);
        }
    }

    #[test]
    fn bounds_come_from_the_schema() {
        assert_eq!(field("jitter_ms")["maximum"], json!(2000));
        let e = validate(&json!({"up": {"jitter_ms": 3000}}), schema(), "").unwrap_err();
        assert_eq!(e, "config: up.jitter_ms: must be between 0 and 2000, got 3000");
        let e = validate(&json!({"up": {"rate_mbit": 10, "queue": {"ms": 0}}}), schema(), "").unwrap_err();
        assert_eq!(e, "config: up.queue.ms: must be > 0 and <= 60000, got 0");
        let e = validate(&json!({"up": {"rate_overhead_bytes": 14.0}}), schema(), "").unwrap_err();
        assert_eq!(e, "config: up.rate_overhead_bytes: must be an integer between 0 and 1000, got 14.0");
        assert!(validate(&json!({"up": {"rate_mbit": null, "delay_ms": 5}}), schema(), "").is_ok());
    }
}
