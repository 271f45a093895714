//! YAML for kruntimes: one place that reads and writes it, on serde-saphyr (the YAML crate
//! the kube stack already brings; serde_yaml is archived). Multi-document streams are read
//! as JSON values, one per non-empty document, so callers can name the document that does
//! not decode.

/// The non-empty documents of a multi-document YAML stream, or why it is not YAML.
pub fn documents(text: &str) -> Result<Vec<serde_json::Value>, String> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// One YAML document.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

/// `value` as one YAML document, ending in a newline.
pub fn to_string<T: serde::Serialize>(value: &T) -> Result<String, String> {
    let mut text = serde_saphyr::to_string(value).map_err(|e| e.to_string())?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_skip_empty_documents_and_round_trip() {
        let docs = documents("# a comment\n---\na: 1\n---\n---\nb: [x, \"true\"]\n").unwrap();
        assert_eq!(
            docs,
            [
                serde_json::json!({"a": 1}),
                serde_json::json!({"b": ["x", "true"]})
            ]
        );
        let text = to_string(&docs[1]).unwrap();
        let back: serde_json::Value = from_str(&text).unwrap();
        assert_eq!(
            back, docs[1],
            "a string that looks like a bool stays a string: {text}"
        );
    }
}
