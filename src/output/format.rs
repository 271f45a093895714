//! `-o`: kubectl's output formats, parsed once from the flag and rendered from any `serde`
//! value a command prints: `json`, `yaml`, `name`, `jsonpath=TEMPLATE` and
//! `custom-columns=HEADER:PATH,…`, beside the command's own `table` and `wide`.
//!
//! It owns the formats, not what a command prints: the command gives its value, the names of
//! what it shows (for `name`) and where its rows are (for `custom-columns`), and draws its own
//! table.

use serde::Serialize;
use serde_json::Value;

use super::jsonpath::Template;
use super::{Result, Table, to_json, to_yaml};

/// One `-o` value.
#[derive(Debug, Clone)]
pub enum Format {
    Table,
    Wide,
    Json,
    Yaml,
    Name,
    JsonPath(Template),
    CustomColumns(Vec<Column>),
}

/// One column of `custom-columns`: its header and the path of its cells.
#[derive(Debug, Clone)]
pub struct Column {
    header: String,
    path: Template,
}

/// What `-o` completes to (the last two go on with their argument).
pub const FORMAT_NAMES: &[&str] = &[
    "table",
    "wide",
    "json",
    "yaml",
    "name",
    "jsonpath=",
    "custom-columns=",
];

/// The formats `-o` takes, for messages and help.
pub const FORMATS: &str =
    "table, wide, json, yaml, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…";

impl Format {
    /// Parses `-o`'s value; the error says what is accepted.
    pub fn parse(value: &str) -> std::result::Result<Format, String> {
        let (kind, arg) = match value.split_once('=') {
            Some((kind, arg)) => (kind, Some(arg)),
            None => (value, None),
        };
        match (kind, arg) {
            ("table", None) => Ok(Format::Table),
            ("wide", None) => Ok(Format::Wide),
            ("json", None) => Ok(Format::Json),
            ("yaml", None) => Ok(Format::Yaml),
            ("name", None) => Ok(Format::Name),
            ("jsonpath", Some("")) => {
                Err("jsonpath needs a template: -o jsonpath='{.metadata.name}'".into())
            }
            ("jsonpath", Some(t)) => Template::parse(t)
                .map(Format::JsonPath)
                .map_err(|e| format!("jsonpath: {e}")),
            ("jsonpath", None) => Err("jsonpath needs a template: -o jsonpath='{.metadata.name}'".into()),
            ("custom-columns", Some(spec)) => parse_columns(spec).map(Format::CustomColumns),
            ("custom-columns", None) => Err(
                "custom-columns needs columns: -o custom-columns=NAME:.metadata.name,PHASE:.status.phase".into(),
            ),
            _ => Err(format!("unknown output format {value:?}; use one of: {FORMATS}")),
        }
    }

    /// `-o` of a command that prints no table of its own (it made or changed one object).
    pub fn parse_object(value: &str) -> std::result::Result<Format, String> {
        match Format::parse(value)? {
            Format::Table | Format::Wide => Err(format!(
                "{value:?} is for listing commands; use one of: json, yaml, name, jsonpath=TEMPLATE, custom-columns=HEADER:PATH,…"
            )),
            other => Ok(other),
        }
    }

    /// Whether the command draws its own table (`table` or `wide`).
    pub fn is_table(&self) -> bool {
        matches!(self, Format::Table | Format::Wide)
    }

    pub fn is_wide(&self) -> bool {
        matches!(self, Format::Wide)
    }
}

fn parse_columns(spec: &str) -> std::result::Result<Vec<Column>, String> {
    spec.split(',')
        .map(|column| {
            let (header, path) = column.split_once(':').ok_or_else(|| {
                format!("custom-columns: {column:?} is not HEADER:PATH (e.g. NAME:.metadata.name)")
            })?;
            if header.is_empty() {
                return Err(format!("custom-columns: {column:?} has no header"));
            }
            // kubectl takes a bare path (`.a.b`) or a template (`{.a.b}`).
            let template = match path.contains('{') {
                true => path.to_string(),
                false => format!("{{{path}}}"),
            };
            let path = Template::parse(&template).map_err(|e| format!("custom-columns: {e}"))?;
            if path.has_text() {
                return Err(format!(
                    "custom-columns: {column:?} mixes text with its path; a column is one path (e.g. NAME:.metadata.name)"
                ));
            }
            Ok(Column {
                header: header.to_string(),
                path,
            })
        })
        .collect()
}

/// What a command prints, for the formats it does not draw itself.
pub struct Printed<'a, T: Serialize> {
    /// The whole result (`json`, `yaml`, `jsonpath`).
    pub value: &'a T,
    /// What `name` prints, one per line (`run.kruntimes.io/NAME`, …).
    pub names: Vec<String>,
    /// A JSON pointer to the rows of `custom-columns` in the value ("": the value itself); an
    /// array there gives one row per element, anything else one row.
    pub rows: &'a str,
}

/// Renders `printed` as `format` asks; `None` for `table` and `wide`, which the command draws.
pub fn render<T: Serialize>(format: &Format, printed: &Printed<'_, T>) -> Result<Option<String>> {
    Ok(Some(match format {
        Format::Table | Format::Wide => return Ok(None),
        Format::Json => to_json(printed.value)?,
        Format::Yaml => to_yaml(printed.value)?,
        Format::Name => printed.names.iter().map(|n| format!("{n}\n")).collect(),
        Format::JsonPath(template) => template.render(&serde_json::to_value(printed.value)?),
        Format::CustomColumns(columns) => {
            let value = serde_json::to_value(printed.value)?;
            let rows = match value.pointer(printed.rows) {
                Some(Value::Array(items)) => items.iter().collect(),
                Some(one) => vec![one],
                None => Vec::new(),
            };
            columns_table(columns, &rows)
        }
    }))
}

fn columns_table(columns: &[Column], rows: &[&Value]) -> String {
    let mut table = Table::new(columns.iter().map(|c| c.header.clone()).collect());
    for row in rows {
        table.row(
            columns
                .iter()
                .map(|c| match c.path.values(row) {
                    v if v.is_empty() => "<none>".to_string(),
                    v => v.join(","),
                })
                .collect(),
        );
    }
    table.render(&super::Palette::plain())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn printed(value: &Value) -> Printed<'_, Value> {
        Printed {
            value,
            names: vec!["run.kruntimes.io/a".into(), "run.kruntimes.io/b".into()],
            rows: "/items",
        }
    }

    #[test]
    fn every_format_renders_from_the_same_value() {
        let v = json!({"items": [{"name": "a", "phase": "Running"}, {"name": "b"}]});
        let out = |f: &str| render(&Format::parse(f).unwrap(), &printed(&v)).unwrap();
        assert_eq!(out("table"), None);
        assert_eq!(out("wide"), None);
        assert_eq!(
            out("name").unwrap(),
            "run.kruntimes.io/a\nrun.kruntimes.io/b\n"
        );
        assert_eq!(out("jsonpath={.items[*].name}").unwrap(), "a b");
        assert_eq!(
            out("custom-columns=NAME:.name,PHASE:.phase").unwrap(),
            "NAME   PHASE\na      Running\nb      <none>\n"
        );
        let json: Value = serde_json::from_str(&out("json").unwrap()).unwrap();
        assert_eq!(json, v);
        assert!(out("yaml").unwrap().contains("phase: Running"));
    }

    #[test]
    fn a_bad_format_says_what_is_accepted() {
        for (value, said) in [
            ("xml", "use one of: table, wide, json"),
            ("jsonpath", "needs a template"),
            ("jsonpath={.a", "unclosed action"),
            ("custom-columns", "needs columns"),
            ("custom-columns=NAME", "is not HEADER:PATH"),
            ("custom-columns=:.a", "has no header"),
            ("custom-columns=AB:{.a}-{.b}", "mixes text"),
        ] {
            let err = Format::parse(value).unwrap_err();
            assert!(err.contains(said), "{value}: {err}");
        }
        assert!(
            Format::parse_object("table")
                .unwrap_err()
                .contains("for listing commands")
        );
        assert!(Format::parse_object("name").is_ok());
    }
}
