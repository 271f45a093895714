//! Rendering helpers for commands that print: the color decision (made once per command),
//! kubectl-style borderless tables (tabled) with optional cell colors (owo-colors), and JSON /
//! YAML of plain `serde` structs, and kubectl's other `-o` formats ([`Format`]).
//!
//! It owns presentation only: it must not talk to a cluster, read command data types or decide
//! what a command prints. Color is decided once by [`color_enabled`]: `--color always` forces it
//! on (an explicit flag wins over the environment, as no-color.org asks), `--color never` and a
//! non-empty `NO_COLOR` turn it off, and `auto` colors only a terminal.

use std::io::{IsTerminal as _, Write as _};

use owo_colors::Style;
use tabled::builder::Builder;
use tabled::settings::object::Cell;
use tabled::settings::{Color, Padding, Style as TableStyle};
use thiserror::Error;

mod format;
mod jsonpath;
pub mod progress;

pub use format::{Column, FORMAT_NAMES, FORMATS, Format, Printed, render};
pub use jsonpath::Template;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a value could not be serialized.
#[derive(Debug, Error)]
pub enum Error {
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write YAML: {0}")]
    Yaml(String),
}

/// Whether to color output, from the flag, the value of `NO_COLOR` and whether stdout is a
/// terminal. Pure, so the rules are testable.
pub fn decide_color(choice: ColorChoice, no_color: Option<&str>, stdout_is_tty: bool) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => no_color.is_none_or(str::is_empty) && stdout_is_tty,
    }
}

/// [`decide_color`] for this process: reads `NO_COLOR` and checks stdout.
pub fn color_enabled(choice: ColorChoice) -> bool {
    let no_color = std::env::var_os("NO_COLOR");
    let no_color = no_color.as_ref().map(|v| v.to_str().unwrap_or("1"));
    decide_color(choice, no_color, std::io::stdout().is_terminal())
}

/// What a piece of output means; the palette maps it to a color.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Fits, chosen, healthy.
    Good,
    /// Rejected, failed.
    Bad,
    /// Needs attention.
    Warn,
    /// Secondary information.
    Muted,
    /// Headers and emphasis.
    Strong,
}

impl Tone {
    fn style(self) -> Style {
        match self {
            Tone::Good => Style::new().green(),
            Tone::Bad => Style::new().red(),
            Tone::Warn => Style::new().yellow(),
            Tone::Muted => Style::new().dimmed(),
            Tone::Strong => Style::new().bold(),
        }
    }
}

/// Colors text when enabled, and is a no-op otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    enabled: bool,
}

impl Palette {
    pub fn new(enabled: bool) -> Self {
        Palette { enabled }
    }

    /// A palette that never colors (JSON, YAML, tests).
    pub fn plain() -> Self {
        Palette { enabled: false }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// `text` in the tone's color, or unchanged when colors are off.
    pub fn paint(&self, text: &str, tone: Tone) -> String {
        if self.enabled {
            tone.style().style(text).to_string()
        } else {
            text.to_string()
        }
    }

    /// The tone as a table cell color (applied outside the measured text, so colored columns
    /// stay aligned).
    fn cell_color(&self, tone: Tone) -> Option<Color> {
        self.enabled.then(|| {
            let style = tone.style();
            Color::new(
                style.prefix_formatter().to_string(),
                style.suffix_formatter().to_string(),
            )
        })
    }
}

/// A borderless, left-aligned table in kubectl's layout (three spaces between columns, no
/// trailing blanks).
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// (row, column, tone) of data cells; row 0 is the first data row.
    tones: Vec<(usize, usize, Tone)>,
}

impl Table {
    pub fn new(header: Vec<String>) -> Self {
        Table {
            header,
            ..Default::default()
        }
    }

    /// Appends a row; returns its index for [`Table::tone`].
    pub fn row(&mut self, cells: Vec<String>) -> usize {
        self.rows.push(cells);
        self.rows.len() - 1
    }

    /// Colors one data cell.
    pub fn tone(&mut self, row: usize, column: usize, tone: Tone) {
        self.tones.push((row, column, tone));
    }

    pub fn render(&self, palette: &Palette) -> String {
        let mut builder = Builder::default();
        builder.push_record(self.header.clone());
        for row in &self.rows {
            builder.push_record(row.clone());
        }
        let mut table = builder.build();
        table
            .with(TableStyle::empty())
            .with(Padding::new(0, 3, 0, 0));
        if let Some(color) = palette.cell_color(Tone::Strong) {
            for column in 0..self.header.len() {
                table.modify(Cell::new(0, column), color.clone());
            }
        }
        for &(row, column, tone) in &self.tones {
            if let Some(color) = palette.cell_color(tone) {
                table.modify(Cell::new(row + 1, column), color);
            }
        }
        let mut out = String::new();
        for line in table.to_string().lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// kubectl-style ages: `45s`, `3m20s`, `2h5m`, `4d3h`. Negative durations read as `0s`.
pub fn age(d: jiff::SignedDuration) -> String {
    let secs = d.as_secs().max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) if s == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) if m == 0 => format!("{h}h"),
        (0, _, _) => format!("{h}h{m}m"),
        _ if h == 0 => format!("{d}d"),
        _ => format!("{d}d{h}h"),
    }
}

/// Pretty JSON with a trailing newline.
pub fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// YAML (one document, ending in a newline).
pub fn to_yaml<T: serde::Serialize>(value: &T) -> Result<String> {
    crate::util::yaml::to_string(value).map_err(Error::Yaml)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error, there is nothing left
/// to say.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn color_is_decided_by_the_flag_then_no_color_then_the_terminal() {
        let table = [
            (ColorChoice::Always, Some("1"), false, true),
            (ColorChoice::Never, None, true, false),
            (ColorChoice::Auto, None, true, true),
            (ColorChoice::Auto, Some(""), true, true),
            (ColorChoice::Auto, Some("1"), true, false),
            (ColorChoice::Auto, None, false, false),
        ];
        for (choice, no_color, tty, want) in table {
            assert_eq!(
                decide_color(choice, no_color, tty),
                want,
                "{choice:?} NO_COLOR={no_color:?} tty={tty}"
            );
        }
    }

    #[test]
    fn a_table_is_kubectl_aligned_without_trailing_blanks() {
        let mut t = Table::new(vec!["NAME".into(), "READY".into()]);
        t.row(vec!["py-a".into(), "True".into()]);
        t.row(vec!["py-long-name".into(), "False".into()]);
        assert_eq!(
            t.render(&Palette::plain()),
            "NAME           READY\npy-a           True\npy-long-name   False\n"
        );
    }

    #[test]
    fn colored_cells_keep_the_columns_aligned() {
        let mut t = Table::new(vec!["NAME".into(), "READY".into()]);
        let r = t.row(vec!["py-a".into(), "True".into()]);
        t.tone(r, 0, Tone::Good);
        let colored = t.render(&Palette::new(true));
        assert!(colored.contains("\u{1b}[32m"), "{colored:?}");
        let stripped: String = strip_ansi(&colored);
        assert_eq!(stripped, t.render(&Palette::plain()));
    }

    #[test]
    fn a_plain_palette_never_emits_escapes() {
        assert_eq!(Palette::plain().paint("x", Tone::Bad), "x");
        assert_ne!(Palette::new(true).paint("x", Tone::Bad), "x");
    }

    /// Removes `ESC [ ... m` sequences.
    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}
