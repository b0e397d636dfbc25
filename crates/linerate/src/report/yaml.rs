//! A JSON value written as block YAML, in the layout `kubectl` prints (list items at their
//! key's indentation), for the Kubernetes manifests (`report/kubernetes.rs`). Keys keep their
//! order. A string is written plain only when YAML cannot read it as anything else (a number,
//! a boolean, null, a date, a comment, a mapping); otherwise it is double-quoted with JSON's
//! escapes, which YAML's double-quoted style shares, so every value reads back as written.

use serde_json::Value;

/// `value` (a mapping) as a YAML document body.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) => mapping(map, 0, &mut out),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn mapping(map: &serde_json::Map<String, Value>, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for (key, value) in map {
        let key = scalar(&Value::String(key.clone()));
        match value {
            Value::Object(m) if !m.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                mapping(m, indent + 2, out);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push_str(&format!("{pad}{key}:\n"));
                sequence(items, indent, out);
            }
            v => out.push_str(&format!("{pad}{key}: {}\n", scalar(v))),
        }
    }
}

fn sequence(items: &[Value], indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    for item in items {
        match item {
            Value::Object(m) if !m.is_empty() => {
                // The mapping at the item's indentation, its first line's indent replaced by
                // the dash.
                let mut body = String::new();
                mapping(m, indent + 2, &mut body);
                out.push_str(&pad);
                out.push_str("- ");
                out.push_str(&body[indent + 2..]);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push_str(&format!("{pad}-\n"));
                sequence(inner, indent + 2, out);
            }
            v => out.push_str(&format!("{pad}- {}\n", scalar(v))),
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) if plain(s) => s.clone(),
        Value::Object(_) => "{}".into(),
        Value::Array(_) => "[]".into(),
        // JSON's numbers, booleans, null and double-quoted strings are YAML's.
        other => other.to_string(),
    }
}

/// True when `s` reads back as this string written plain.
fn plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else { return false };
    let words = ["true", "false", "yes", "no", "on", "off", "y", "n", "null", "~"];
    (first.is_ascii_alphabetic() || first == '/' || (first == '-' && s.len() > 1))
        && !s.starts_with("- ")
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=()$@+,[]' ".contains(c))
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.starts_with(['[', '\''])
        && !words.contains(&s.to_ascii_lowercase().as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubectl_layout_and_safe_scalars() {
        let v = json!({
            "kind": "Pod",
            "metadata": {"labels": {"app.kubernetes.io/name": "x"}, "annotations": {}},
            "spec": {"containers": [{"name": "a", "args": ["server", "--bind=$(POD_IP)"],
                "ports": [{"containerPort": 5201}]}], "hostNetwork": true, "tolerations": []},
            "odd": ["2", "", "yes", "a: b", "x #c", "- y", "-", "0.1.0", "true", "[x]", "ok"]
        });
        let want = "\
kind: Pod
metadata:
  labels:
    app.kubernetes.io/name: x
  annotations: {}
spec:
  containers:
  - name: a
    args:
    - server
    - --bind=$(POD_IP)
    ports:
    - containerPort: 5201
  hostNetwork: true
  tolerations: []
odd:
- \"2\"
- \"\"
- \"yes\"
- \"a: b\"
- \"x #c\"
- \"- y\"
- \"-\"
- \"0.1.0\"
- \"true\"
- \"[x]\"
- ok
";
        assert_eq!(to_yaml(&v), want);
    }
}
