//! kubectl's JSONPath templates, for `-o jsonpath=…` and the columns of `-o custom-columns=…`:
//! text and `{…}` actions, `{range EXPR}…{end}`, quoted literals (`{"\n"}`). Each expression
//! is RFC 9535 JSONPath (serde_json_path) evaluated against the current object, with kubectl's
//! shorthand: `.a.b` means `$.a.b`, `@` the current object.
//!
//! It owns the template language only: it formats a value it is given and reads nothing. As
//! kubectl with its default `--allow-missing-template-keys=true`, a path that matches nothing
//! prints nothing.

use serde_json::Value;
use serde_json_path::JsonPath;

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone)]
enum Node {
    Text(String),
    Expr(JsonPath),
    Range(JsonPath, Vec<Node>),
}

impl Template {
    /// Parses kubectl's template syntax; the error names the part it could not read.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut stack: Vec<(Option<JsonPath>, Vec<Node>)> = vec![(None, Vec::new())];
        for token in tokens(text)? {
            let top = &mut stack.last_mut().expect("the root frame is never popped").1;
            match token {
                Token::Text(t) => top.push(Node::Text(t)),
                Token::Action(action) => {
                    let action = action.trim();
                    if let Some(expr) = action.strip_prefix("range ") {
                        stack.push((Some(path(expr)?), Vec::new()));
                    } else if action == "end" {
                        if stack.len() == 1 {
                            return Err("{end} without a {range …} to close".to_string());
                        }
                        let (expr, nodes) = stack.pop().expect("checked above");
                        let top = &mut stack.last_mut().expect("the root frame").1;
                        top.push(Node::Range(expr.expect("a range frame"), nodes));
                    } else if let Some(literal) = quoted(action) {
                        top.push(Node::Text(literal?));
                    } else {
                        top.push(Node::Expr(path(action)?));
                    }
                }
            }
        }
        if stack.len() != 1 {
            return Err("a {range …} is not closed by {end}".to_string());
        }
        let (_, nodes) = stack.pop().expect("the root frame");
        Ok(Template { nodes })
    }

    /// The template applied to `value`.
    pub fn render(&self, value: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, value, &mut out);
        out
    }

    /// Whether the template holds literal text beside its actions.
    pub fn has_text(&self) -> bool {
        self.nodes
            .iter()
            .any(|n| matches!(n, Node::Text(t) if !t.is_empty()))
    }

    /// Every value the template's expressions select in `value`, as strings: what one
    /// custom column shows.
    pub fn values(&self, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        for node in &self.nodes {
            match node {
                Node::Expr(path) => out.extend(path.query(value).all().into_iter().map(scalar)),
                Node::Text(t) if !t.is_empty() => out.push(t.clone()),
                Node::Text(_) => {}
                Node::Range(path, nodes) => {
                    for item in path.query(value).all() {
                        out.push(render_to_string(nodes, item));
                    }
                }
            }
        }
        out
    }
}

fn render_to_string(nodes: &[Node], value: &Value) -> String {
    let mut out = String::new();
    render(nodes, value, &mut out);
    out
}

fn render(nodes: &[Node], value: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Expr(path) => {
                let found: Vec<String> = path.query(value).all().into_iter().map(scalar).collect();
                out.push_str(&found.join(" "));
            }
            Node::Range(path, nodes) => {
                for item in path.query(value).all() {
                    render(nodes, item, out);
                }
            }
        }
    }
}

/// A string as itself, anything else as compact JSON (kubectl prints `{.status}` as JSON).
fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An expression in kubectl's shorthand as RFC 9535 JSONPath.
fn path(expr: &str) -> Result<JsonPath, String> {
    let expr = expr.trim();
    let rfc = match expr {
        "" | "." | "$" | "@" => "$".to_string(),
        e if e.starts_with('$') => e.to_string(),
        e if e.starts_with('@') => format!("${}", &e[1..]),
        e if e.starts_with('.') || e.starts_with('[') => format!("${e}"),
        e => format!("$.{e}"),
    };
    JsonPath::parse(&bracket_names(&rfc)).map_err(|e| format!("cannot parse {{{expr}}}: {e}"))
}

/// kubectl's dotted names in RFC 9535 form: a dotted segment that is no shorthand name (a
/// label key such as `app-name` or `kruntimes\.io/runtime`, with kubectl's `\.` escape) becomes
/// a bracketed name; brackets, filters and quotes are copied as they are.
fn bracket_names(path: &str) -> String {
    let chars: Vec<char> = path.chars().collect();
    let mut out = String::new();
    let (mut i, mut depth, mut quote) = (0, 0usize, None::<char>);
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') if depth > 0 => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth = depth.saturating_sub(1),
            (None, '.') if depth == 0 => {
                out.push('.');
                i += 1;
                if chars.get(i) == Some(&'.') {
                    out.push('.');
                    i += 1;
                }
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    if chars[i] == '\\' && chars.get(i + 1) == Some(&'.') {
                        name.push('.');
                        i += 2;
                    } else {
                        name.push(chars[i]);
                        i += 1;
                    }
                }
                let shorthand = name == "*"
                    || name
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if shorthand || name.is_empty() {
                    out.push_str(&name);
                } else {
                    // `a.b` → `a['b']` (the dot before a bracket is dropped).
                    out.pop();
                    if out.ends_with('.') {
                        // `..name` stays a descendant segment: `..['name']`.
                        out.push('.');
                    }
                    out.push_str(&format!(
                        "['{}']",
                        name.replace('\\', "\\\\").replace('\'', "\\'")
                    ));
                }
                continue;
            }
            _ => {}
        }
        out.push(c);
        i += 1;
    }
    out
}

/// A quoted literal action (`"\n"`, `'-'`), unescaped; `None` when the action is no literal.
fn quoted(action: &str) -> Option<Result<String, String>> {
    let quote = action.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    if action.len() < 2 || !action.ends_with(quote) {
        return Some(Err(format!("unterminated string in {{{action}}}")));
    }
    let body = &action[1..action.len() - 1];
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(c @ ('\\' | '"' | '\'')) => out.push(c),
            other => {
                return Some(Err(format!(
                    "unknown escape \\{} in {{{action}}}",
                    other.map(String::from).unwrap_or_default()
                )));
            }
        }
    }
    Some(Ok(out))
}

enum Token {
    Text(String),
    Action(String),
}

/// Splits text and `{…}` actions; braces inside quotes belong to the action.
fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut text_buf = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '{' {
            text_buf.push(c);
            continue;
        }
        if !text_buf.is_empty() {
            out.push(Token::Text(std::mem::take(&mut text_buf)));
        }
        let mut action = String::new();
        let mut quote: Option<char> = None;
        let mut closed = false;
        while let Some(c) = chars.next() {
            match (quote, c) {
                (None, '}') => {
                    closed = true;
                    break;
                }
                (None, '"' | '\'') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (Some(_), '\\') => {
                    action.push(c);
                    if let Some(next) = chars.next() {
                        action.push(next);
                    }
                    continue;
                }
                _ => {}
            }
            action.push(c);
        }
        if !closed {
            return Err(format!("unclosed action {{{action}"));
        }
        out.push(Token::Action(action));
    }
    if !text_buf.is_empty() {
        out.push(Token::Text(text_buf));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(template: &str, value: &Value) -> String {
        Template::parse(template).unwrap().render(value)
    }

    #[test]
    fn a_field_prints_as_text_and_an_object_as_json() {
        let v =
            json!({"metadata": {"name": "train-1"}, "status": {"phase": "Running", "attempt": 2}});
        assert_eq!(run("{.metadata.name}", &v), "train-1");
        assert_eq!(run("{.status.attempt}", &v), "2");
        assert_eq!(run("{.status}", &v), r#"{"attempt":2,"phase":"Running"}"#);
        assert_eq!(
            run("name={.metadata.name} phase={.status.phase}{\"\\n\"}", &v),
            "name=train-1 phase=Running\n"
        );
    }

    #[test]
    fn several_matches_join_with_a_space_and_a_range_repeats_its_body() {
        let v = json!({"items": [{"name": "a", "size": 1}, {"name": "b", "size": 2}]});
        assert_eq!(run("{.items[*].name}", &v), "a b");
        assert_eq!(
            run("{range .items[*]}{.name}:{.size}{'\\n'}{end}", &v),
            "a:1\nb:2\n"
        );
        assert_eq!(run("{.items[?(@.size > 1)].name}", &v), "b");
    }

    #[test]
    fn label_keys_with_hyphens_slashes_and_escaped_dots_are_names_as_in_kubectl() {
        let v = json!({"metadata": {"labels": {"app-name": "a", "kruntimes.io/runtime": "py"}},
                       "items": [{"x-y": 1}, {"x-y": 2}]});
        assert_eq!(run("{.metadata.labels.app-name}", &v), "a");
        assert_eq!(run(r"{.metadata.labels.kruntimes\.io/runtime}", &v), "py");
        assert_eq!(run("{.items[*].x-y}", &v), "1 2");
        assert_eq!(run("{..app-name}", &v), "a");
        assert_eq!(run("{.metadata.labels['app-name']}", &v), "a");
    }

    #[test]
    fn a_missing_key_prints_nothing() {
        assert_eq!(run("[{.nope.nothing}]", &json!({})), "[]");
    }

    #[test]
    fn bad_templates_say_what_is_wrong() {
        for (template, said) in [
            ("{.a", "unclosed action"),
            ("{range .a[*]}{.b}", "not closed by {end}"),
            ("{end}", "without a {range"),
            ("{.a[}", "cannot parse {.a[}"),
            ("{\"x}", "unclosed action"),
            ("{\"\\q\"}", "unknown escape"),
        ] {
            let err = Template::parse(template).unwrap_err();
            assert!(err.contains(said), "{template}: {err}");
        }
    }

    #[test]
    fn values_are_what_one_custom_column_shows() {
        let v = json!({"tags": ["x", "y"], "n": 3});
        let t = Template::parse("{.tags[*]}").unwrap();
        assert_eq!(t.values(&v), ["x", "y"]);
        assert_eq!(Template::parse("{.n}").unwrap().values(&v), ["3"]);
        assert!(Template::parse("{.none}").unwrap().values(&v).is_empty());
    }
}
