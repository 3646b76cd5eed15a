//! The shape of one row of the settings table (`rows.rs`) and the one way a row is read: a
//! variable unset or blank takes the row's default; a number outside the row's range, or a value
//! that does not parse, is refused with an error naming the variable, the value and what is
//! allowed. Nothing is clamped.

use std::time::Duration;

use super::super::error::ConfigError;
use super::values::{parse_flag, parse_millis, parse_size};

/// A kibibyte, for the rows' bounds (of `rows.rs` and of the settings files that keep their own rows).
pub(super) const KIB: u64 = 1 << 10;
/// A mebibyte.
pub(super) const MIB: u64 = 1 << 20;
/// A gibibyte.
pub(super) const GIB: u64 = 1 << 30;
/// A tebibyte.
pub(super) const TIB: u64 = 1 << 40;
/// A day in seconds: the longest wait any timeout setting accepts.
pub(super) const DAY: u64 = 86_400;

/// An environment lookup that returns only non-blank values.
pub type Lookup<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// What a number setting counts, which decides how it is written and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bytes, written as `65536`, `64k`, `512m`, `1g` or `1t`.
    Bytes,
    /// A plain count.
    Count,
    /// Whole seconds.
    Seconds,
    /// Whole days.
    Days,
    /// Milliseconds, written as seconds (`1`, `0.5`, `2s`) or milliseconds (`500ms`).
    Millis,
}

/// A number setting: its default and the range a given value must lie in.
#[derive(Debug, Clone, Copy)]
pub struct Number {
    /// The variable.
    pub name: &'static str,
    /// What it counts.
    pub unit: Unit,
    /// The value when unset.
    pub default: u64,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
    /// `0` and `off` turn the feature off (they are accepted outside the range).
    pub off: bool,
    /// How GUIDE shows a default the code derives from another setting.
    pub default_shown: Option<&'static str>,
    /// One line for GUIDE.
    pub doc: &'static str,
}

/// A number setting's value as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Not set (or blank).
    Unset,
    /// `0` or `off` on a row that allows turning off.
    Off,
    /// A value within the range.
    Value(u64),
}

impl Number {
    /// A row with a plain default and range.
    pub const fn new(
        name: &'static str,
        unit: Unit,
        default: u64,
        (min, max): (u64, u64),
        doc: &'static str,
    ) -> Number {
        Number {
            name,
            unit,
            default,
            min,
            max,
            off: false,
            default_shown: None,
            doc,
        }
    }

    /// The same row, where `0` and `off` turn the feature off.
    pub const fn or_off(self) -> Number {
        Number { off: true, ..self }
    }

    /// The same row, with its default shown as `text` (the code derives it).
    pub const fn default_shown(self, text: &'static str) -> Number {
        Number {
            default_shown: Some(text),
            ..self
        }
    }

    /// The value given, checked against the range.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the variable, the value and the allowed range.
    pub fn read(&self, var: &Lookup) -> Result<Reading, ConfigError> {
        let Some(raw) = var(self.name) else {
            return Ok(Reading::Unset);
        };
        self.value_of(&raw).map_err(|reason| ConfigError::BadEnv {
            var: self.name,
            value: raw,
            reason,
        })
    }

    /// `raw` read as this row's value, or why not.
    fn value_of(&self, raw: &str) -> Result<Reading, String> {
        let word = raw.trim().to_ascii_lowercase();
        if self.off && (word == "0" || word == "off") {
            return Ok(Reading::Off);
        }
        let n = match self.unit {
            Unit::Bytes => parse_size(&word),
            Unit::Millis => parse_millis(&word),
            Unit::Count | Unit::Seconds | Unit::Days => word
                .parse::<u64>()
                .map_err(|_| "expected a whole number".to_string()),
        }
        .map_err(|why| format!("{why} (allowed: {})", self.allowed()))?;
        if (self.min..=self.max).contains(&n) {
            Ok(Reading::Value(n))
        } else {
            Err(format!("out of range (allowed: {})", self.allowed()))
        }
    }

    /// The value given, else the default (a row that allows `off` reads `0` for it).
    ///
    /// # Errors
    /// As [`Number::read`].
    pub fn get(&self, var: &Lookup) -> Result<u64, ConfigError> {
        Ok(match self.read(var)? {
            Reading::Unset => self.default,
            Reading::Off => 0,
            Reading::Value(n) => n,
        })
    }

    /// [`Number::get`] as a duration (for seconds, days and milliseconds).
    ///
    /// # Errors
    /// As [`Number::read`].
    pub fn duration(&self, var: &Lookup) -> Result<Duration, ConfigError> {
        let n = self.get(var)?;
        Ok(match self.unit {
            Unit::Millis => Duration::from_millis(n),
            Unit::Days => Duration::from_secs(n.saturating_mul(86_400)),
            Unit::Bytes | Unit::Count | Unit::Seconds => Duration::from_secs(n),
        })
    }

    /// `n` as a user writes it in this unit.
    fn show(&self, n: u64) -> String {
        match self.unit {
            Unit::Bytes => human_size(n),
            Unit::Millis if n.is_multiple_of(1000) => format!("{}s", n / 1000),
            Unit::Millis => format!("{n}ms"),
            Unit::Count | Unit::Seconds | Unit::Days => n.to_string(),
        }
    }

    /// The unit's name after a range, where the numbers alone do not say it.
    fn unit_word(&self) -> &'static str {
        match self.unit {
            Unit::Seconds => " s",
            Unit::Days => " days",
            Unit::Bytes | Unit::Count | Unit::Millis => "",
        }
    }

    /// The allowed values, as an error message says them: `from 1m to 4g`.
    pub fn allowed(&self) -> String {
        let range = format!("from {} to {}", self.show(self.min), self.show(self.max));
        self.with_off(range, "`0` or `off`, or ")
    }

    /// The allowed values, as GUIDE's table shows them: `1m–4g`.
    pub fn range_shown(&self) -> String {
        let range = format!("{}–{}", self.show(self.min), self.show(self.max));
        self.with_off(range, "`0`/`off`, ")
    }

    /// `range` with the unit's word, after `off_words` when the setting can be turned off.
    fn with_off(&self, range: String, off_words: &str) -> String {
        let range = range + self.unit_word();
        if self.off {
            format!("{off_words}{range}")
        } else {
            range
        }
    }

    /// The default, as GUIDE's table shows it.
    pub fn default_text(&self) -> String {
        self.default_shown
            .map_or_else(|| self.show(self.default), str::to_string)
    }
}

/// An on/off setting (`1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`).
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// The variable.
    pub name: &'static str,
    /// The value when unset.
    pub default: bool,
    /// One line for GUIDE.
    pub doc: &'static str,
}

impl Flag {
    /// The value given, else the default.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the variable and the words it accepts.
    pub fn get(&self, var: &Lookup) -> Result<bool, ConfigError> {
        match var(self.name) {
            None => Ok(self.default),
            Some(v) => parse_flag(&v).map_err(|reason| ConfigError::BadEnv {
                var: self.name,
                value: v,
                reason,
            }),
        }
    }
}

/// A setting with its own parser: a path, a choice of words, a list.
#[derive(Debug, Clone, Copy)]
pub struct Text {
    /// The variable.
    pub name: &'static str,
    /// The default, as GUIDE shows it (`unset` when there is none).
    pub default: &'static str,
    /// What is accepted, as GUIDE shows it.
    pub allowed: &'static str,
    /// One line for GUIDE.
    pub doc: &'static str,
}

impl Text {
    /// The value given, as it is.
    pub fn raw(&self, var: &Lookup) -> Option<String> {
        var(self.name)
    }

    /// The value given, read by `parse`, else `default`.
    ///
    /// # Errors
    /// [`ConfigError::BadEnv`] naming the variable, with `parse`'s reason (which says what a
    /// valid value looks like).
    pub fn parse<T>(
        &self,
        var: &Lookup,
        default: T,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, ConfigError> {
        match var(self.name) {
            None => Ok(default),
            Some(v) => parse(&v).map_err(|reason| ConfigError::BadEnv {
                var: self.name,
                value: v,
                reason,
            }),
        }
    }
}

/// One row of the settings table.
#[derive(Debug, Clone, Copy)]
pub enum Row {
    /// A number with a range.
    Number(&'static Number),
    /// On or off.
    Flag(&'static Flag),
    /// Anything else, with its own parser.
    Text(&'static Text),
}

impl Row {
    /// The variable.
    pub fn name(&self) -> &'static str {
        match self {
            Row::Number(n) => n.name,
            Row::Flag(f) => f.name,
            Row::Text(t) => t.name,
        }
    }

    /// The one-line description.
    pub fn doc(&self) -> &'static str {
        match self {
            Row::Number(n) => n.doc,
            Row::Flag(f) => f.doc,
            Row::Text(t) => t.doc,
        }
    }

    /// The default, as GUIDE shows it.
    pub fn default_text(&self) -> String {
        match self {
            Row::Number(n) => n.default_text(),
            Row::Flag(f) => u8::from(f.default).to_string(),
            Row::Text(t) => t.default.to_string(),
        }
    }

    /// What is accepted, as GUIDE shows it.
    pub fn allowed_text(&self) -> String {
        match self {
            Row::Number(n) => n.range_shown(),
            Row::Flag(_) => "`0` or `1`".to_string(),
            Row::Text(t) => t.allowed.to_string(),
        }
    }

    /// Whether `raw` (a value the variable holds, already accepted) means something other
    /// than the default.
    pub fn differs(&self, raw: &str) -> bool {
        match self {
            Row::Number(n) => n.value_of(raw) != Ok(Reading::Value(n.default)),
            Row::Flag(f) => parse_flag(raw) != Ok(f.default),
            Row::Text(t) => !raw.trim().eq_ignore_ascii_case(t.default),
        }
    }
}

/// `n` in the units [`parse_size`] reads (`64k`, `25m`, `4g`, `1t`) when it is a whole number
/// of them, else plain.
pub fn human_size(n: u64) -> String {
    for (unit, shift) in [("t", 40), ("g", 30), ("m", 20), ("k", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::rows::ROWS;
    use crate::config::settings::Settings;

    /// `n` as a user would write it for `row` (a bare number is seconds for a duration).
    fn written(row: &Number, n: u64) -> String {
        match row.unit {
            Unit::Millis => format!("{n}ms"),
            _ => n.to_string(),
        }
    }

    fn numbers() -> impl Iterator<Item = &'static Number> {
        ROWS.iter().filter_map(|r| match r {
            Row::Number(n) => Some(*n),
            _ => None,
        })
    }

    #[test]
    fn every_number_just_outside_its_range_is_refused_at_start_naming_setting_value_and_range() {
        for row in numbers() {
            let mut outside = vec![row.max + 1];
            if row.min > 0 {
                outside.push(row.min - 1);
            }
            // `0` turns an `off` row off: it is not a value below the range.
            outside.retain(|n| !(row.off && *n == 0));
            for n in outside {
                let value = written(row, n);
                let err = Settings::from_pairs(&[(row.name, value.as_str())])
                    .expect_err(&format!("{}={value} is outside the range", row.name))
                    .to_string();
                assert!(
                    err.contains(row.name)
                        && err.contains(&format!("{value:?}"))
                        && err.contains(&row.allowed()),
                    "{}={value}: {err}",
                    row.name
                );
            }
        }
    }

    #[test]
    fn every_number_reads_both_ends_of_its_range_and_its_default() {
        for row in numbers() {
            for n in [row.min, row.max, row.default] {
                let value = written(row, n);
                let got = row.read(&|k| (k == row.name).then(|| value.clone()));
                let want = if row.off && n == 0 {
                    Reading::Off
                } else {
                    Reading::Value(n)
                };
                assert_eq!(got.expect(row.name), want, "{}={value}", row.name);
            }
            assert!(
                row.min <= row.default && row.default <= row.max,
                "{}",
                row.name
            );
            let err = row
                .read(&|k| (k == row.name).then(|| "lots".to_string()))
                .expect_err(row.name)
                .to_string();
            assert!(err.contains(&row.allowed()), "{err}");
        }
    }

    #[test]
    fn every_on_off_setting_reads_the_same_words() {
        // One parser for all of them: `on` once worked for one setting and exited 2 for another.
        let flags: Vec<&Flag> = ROWS
            .iter()
            .filter_map(|r| match r {
                Row::Flag(f) => Some(*f),
                _ => None,
            })
            .collect();
        let names: Vec<&str> = flags.iter().map(|f| f.name).collect();
        for name in [
            "MCP_BRIDGE_PREWARM",
            "MCP_BRIDGE_ALLOW_WEAK_SANDBOX",
            "MCP_BRIDGE_CALL_LANE",
            "MCP_BRIDGE_IMPORT_CLIENT_CONFIGS",
            "MCP_BRIDGE_ALLOW_SELF_SERVER",
            "MCP_BRIDGE_STRUCTURED_CONTENT",
            "MCP_BRIDGE_IMAGES",
        ] {
            assert!(names.contains(&name), "{name} is an on/off row");
        }
        for name in names {
            for word in ["1", "true", "yes", "on", "ON", "0", "false", "no", "off"] {
                assert!(
                    Settings::from_pairs(&[(name, word)]).is_ok(),
                    "{name}={word}"
                );
            }
            let err = Settings::from_pairs(&[(name, "maybe")])
                .expect_err(name)
                .to_string();
            assert!(err.contains(name), "{err}");
        }
    }
}
