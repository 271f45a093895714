//! A Run's outputs (pure): the `KEY=VALUE` lines its execution left in the file
//! `$KRUNTIME_OUTPUTS` names, parsed and bounded as the Go project's runtimed parses them, so
//! a Run written for it reports the same `status.outputs` here. Reading the file and writing
//! the status are the agent's; this module only decides what the bytes mean.
//!
//! The rules: lines end at `\n` (a trailing `\r` is dropped); blank lines and lines starting
//! with `#` are skipped; a line is split at its first `=` (a value may hold `=`), key and value
//! trimmed; an empty key or a line without `=` is invalid; a later line of a key replaces an
//! earlier one. Bounds: [`MAX_KEYS`] keys, [`MAX_KEY_BYTES`] per key, [`MAX_VALUE_BYTES`] per
//! value, [`MAX_TOTAL_BYTES`] of keys and values together, and a file of at most
//! [`MAX_FILE_BYTES`].

use std::collections::BTreeMap;

use thiserror::Error;

use crate::api::status::reasons;

/// The environment variable that names the outputs file of an execution.
pub const ENV_OUTPUTS: &str = "KRUNTIME_OUTPUTS";
/// The outputs file's name in the Run's directory.
pub const FILE: &str = "outputs";
/// At most this many keys (the CRD's `status.outputs` holds at most 64 properties too).
pub const MAX_KEYS: usize = 64;
pub const MAX_KEY_BYTES: usize = 128;
pub const MAX_VALUE_BYTES: usize = 8192;
/// Keys and values together.
pub const MAX_TOTAL_BYTES: usize = 65536;
/// The most the agent reads of the file (keys and values within the bounds, with room for
/// comments and blank lines); a larger file is too large whatever it holds.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// Why an outputs file cannot become `status.outputs`. The Run ends Failed with
/// [`Self::reason`] and the error as its message, and is not retried (the same task writes the
/// same file again).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OutputsError {
    #[error("$KRUNTIME_OUTPUTS line {0} is not KEY=VALUE")]
    NotKeyValue(usize),
    #[error("$KRUNTIME_OUTPUTS line {0} has an empty key")]
    EmptyKey(usize),
    #[error("$KRUNTIME_OUTPUTS line {0} is not valid UTF-8")]
    NotUtf8(usize),
    #[error("$KRUNTIME_OUTPUTS line {line}: the key is longer than {MAX_KEY_BYTES} bytes")]
    KeyTooLong { line: usize },
    #[error("$KRUNTIME_OUTPUTS key {key:?}: the value is longer than {MAX_VALUE_BYTES} bytes")]
    ValueTooLong { key: String },
    #[error("$KRUNTIME_OUTPUTS has more than {MAX_KEYS} keys")]
    TooManyKeys,
    #[error("$KRUNTIME_OUTPUTS holds more than {MAX_TOTAL_BYTES} bytes of keys and values")]
    TooLarge,
    /// The file is no regular file below the Run's directory (a link, a FIFO, a device), or
    /// could not be read: the message names it and why.
    #[error("$KRUNTIME_OUTPUTS: {0}")]
    Unreadable(String),
    /// The file is larger than [`MAX_FILE_BYTES`] (its size, read from its descriptor).
    #[error("$KRUNTIME_OUTPUTS holds {0} bytes, more than the {MAX_FILE_BYTES} runtimed reads")]
    FileTooLarge(u64),
}

/// `Failed` with `OutputsInvalid`.
pub const OUTPUTS_INVALID: &str = reasons::OUTPUTS_INVALID;
/// `Failed` with `OutputsTooLarge`.
pub const OUTPUTS_TOO_LARGE: &str = reasons::OUTPUTS_TOO_LARGE;

impl OutputsError {
    /// The Run's reason: `OutputsInvalid` or `OutputsTooLarge`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotKeyValue(_) | Self::EmptyKey(_) | Self::NotUtf8(_) | Self::Unreadable(_) => {
                OUTPUTS_INVALID
            }
            Self::KeyTooLong { .. }
            | Self::ValueTooLong { .. }
            | Self::TooManyKeys
            | Self::TooLarge
            | Self::FileTooLarge(_) => OUTPUTS_TOO_LARGE,
        }
    }
}

/// The outputs the file's `bytes` hold (empty for an empty or missing file). `bytes` longer
/// than [`MAX_FILE_BYTES`] are too large.
pub fn parse(bytes: &[u8]) -> Result<BTreeMap<String, String>, OutputsError> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(OutputsError::TooLarge);
    }
    let mut outputs = BTreeMap::new();
    for (index, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line_no = index + 1;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw).map_err(|_| OutputsError::NotUtf8(line_no))?;
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or(OutputsError::NotKeyValue(line_no))?;
        let (key, value) = (key.trim(), value.trim());
        if key.is_empty() {
            return Err(OutputsError::EmptyKey(line_no));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(OutputsError::KeyTooLong { line: line_no });
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(OutputsError::ValueTooLong { key: key.into() });
        }
        outputs.insert(key.to_string(), value.to_string());
        if outputs.len() > MAX_KEYS {
            return Err(OutputsError::TooManyKeys);
        }
    }
    let total: usize = outputs.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > MAX_TOTAL_BYTES {
        return Err(OutputsError::TooLarge);
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<(String, String)> {
        parse(text.as_bytes()).unwrap().into_iter().collect()
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn key_value_lines_become_outputs_with_comments_blanks_and_crlf_skipped() {
        assert_eq!(ok(""), pairs(&[]));
        assert_eq!(
            ok("# a comment\n\nresult = 42\r\nurl=http://x/?a=b\n  # indented comment\n"),
            pairs(&[("result", "42"), ("url", "http://x/?a=b")])
        );
        // A later line of a key replaces the earlier one.
        assert_eq!(ok("a=1\na=2"), pairs(&[("a", "2")]));
        // An empty value is a value.
        assert_eq!(ok("empty="), pairs(&[("empty", "")]));
    }

    #[test]
    fn lines_that_are_not_key_value_are_invalid_with_their_line_number() {
        for (text, want) in [
            ("a=1\njust words\n", OutputsError::NotKeyValue(2)),
            ("=1", OutputsError::EmptyKey(1)),
            ("  = 1", OutputsError::EmptyKey(1)),
        ] {
            let got = parse(text.as_bytes()).unwrap_err();
            assert_eq!(got, want, "{text:?}");
            assert_eq!(got.reason(), OUTPUTS_INVALID);
        }
        let got = parse(b"a=1\nb=\xff\n").unwrap_err();
        assert_eq!(got, OutputsError::NotUtf8(2));
        assert_eq!(got.reason(), OUTPUTS_INVALID);
    }

    #[test]
    fn each_bound_is_inclusive_and_one_more_is_too_large() {
        let key = "k".repeat(MAX_KEY_BYTES);
        assert!(parse(format!("{key}=v").as_bytes()).is_ok());
        let got = parse(format!("{key}k=v").as_bytes()).unwrap_err();
        assert_eq!(got, OutputsError::KeyTooLong { line: 1 });
        assert_eq!(got.reason(), OUTPUTS_TOO_LARGE);

        let value = "v".repeat(MAX_VALUE_BYTES);
        assert!(parse(format!("k={value}").as_bytes()).is_ok());
        let got = parse(format!("k={value}v").as_bytes()).unwrap_err();
        assert_eq!(got, OutputsError::ValueTooLong { key: "k".into() });
        assert_eq!(got.reason(), OUTPUTS_TOO_LARGE);

        let keys = |n: usize| (0..n).map(|i| format!("k{i}=v\n")).collect::<String>();
        assert_eq!(parse(keys(MAX_KEYS).as_bytes()).unwrap().len(), MAX_KEYS);
        assert_eq!(
            parse(keys(MAX_KEYS + 1).as_bytes()),
            Err(OutputsError::TooManyKeys)
        );

        // Eight keys of 8,192-byte values: exactly the total; one byte more is too large.
        let big = |i: usize, extra: usize| {
            let k = format!("k{i}");
            let v = "v".repeat(MAX_VALUE_BYTES - k.len() + extra);
            format!("{k}={v}\n")
        };
        let exact: String = (0..8).map(|i| big(i, 0)).collect();
        assert_eq!(parse(exact.as_bytes()).unwrap().len(), 8);
        let over: String = (0..8).map(|i| big(i, usize::from(i == 0))).collect();
        assert_eq!(parse(over.as_bytes()), Err(OutputsError::TooLarge));
        assert_eq!(
            parse(&vec![b'#'; MAX_FILE_BYTES + 1]),
            Err(OutputsError::TooLarge)
        );
    }
}
