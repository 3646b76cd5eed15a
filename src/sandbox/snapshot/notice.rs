//! The notice of the first result in a fresh sandbox: why the sandbox is new, and what came back
//! of the user's names (which did, which did not and why), or that they are gone. The names and
//! reasons come from the sandbox: only a bounded, single-line part of each is shown, control,
//! bidirectional and invisible characters as spaces.

use std::time::Duration;

use crate::sandbox::protocol::Bounded;

/// Names listed as restored; the rest are counted.
const MAX_RESTORED: usize = 40;
/// Names listed as not restored; the rest are counted.
const MAX_FAILED: usize = 20;
/// Characters of a name shown.
const NAME_CHARS: usize = 60;
/// Characters of a reason shown.
const WHY_CHARS: usize = 200;

/// What a restore into a fresh sandbox gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreOutcome {
    /// The entrypoint's report.
    Restored {
        /// Names that came back.
        names: Bounded<String>,
        /// `(name, why)` of those that did not.
        failed: Bounded<(String, String)>,
        /// How long ago the snapshot was saved.
        age: Duration,
        /// The snapshot was restored before, into a sandbox whose later changes are lost.
        stale: bool,
    },
    /// Restoring failed; the snapshot was dropped.
    Failed(String),
}

/// The notice for a fresh sandbox: `why` it is fresh, then what `restored` brought back, or
/// that earlier state is gone.
pub fn fresh_sandbox(why: &str, restored: Option<&RestoreOutcome>) -> String {
    match restored {
        None => format!("{why}: variables and imports from earlier calls are gone."),
        Some(RestoreOutcome::Failed(reason)) => format!(
            "{why}. The variables saved earlier could not be restored ({}), so that snapshot \
             was dropped: variables and imports from earlier calls are gone.",
            line(reason, WHY_CHARS)
        ),
        Some(RestoreOutcome::Restored {
            names,
            failed,
            age,
            stale,
        }) => {
            let when = if *stale {
                format!(
                    "saved {} ago, when an idle sandbox was stopped (their values are from then; \
                     later changes are lost)",
                    ago(*age)
                )
            } else {
                format!("saved when the sandbox stopped, {} ago", ago(*age))
            };
            let mut text = if names.total == 0 {
                format!("{why}. Nothing came back from the snapshot {when}.")
            } else {
                let each = names.items.iter().map(|n| line(n, NAME_CHARS));
                format!(
                    "{why}. Restored from the snapshot {when}: {}.",
                    listed(each, names.total, MAX_RESTORED)
                )
            };
            if failed.total > 0 {
                let each = failed.items.iter().map(|(name, why)| {
                    format!("{} ({})", line(name, NAME_CHARS), line(why, WHY_CHARS))
                });
                let each = listed(each, failed.total, MAX_FAILED);
                text.push_str(&format!(" Not restored: {each}."));
            }
            text
        }
    }
}

/// `items` joined with ", " (at most `max` of them, then how many more of `total` there were).
fn listed(items: impl Iterator<Item = String>, total: usize, max: usize) -> String {
    let mut shown: Vec<String> = items.take(max).collect();
    if total > max {
        shown.push(format!("and {} more", total - max));
    }
    shown.join(", ")
}

/// `text` on one line (control characters as spaces), cut to `max` characters.
fn line(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .take(max)
        .map(|c| if crate::shown::is_unsafe(c) { ' ' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// A duration for people: seconds, minutes or hours.
fn ago(d: Duration) -> String {
    match d.as_secs() {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_came_back_and_why_the_rest_did_not() {
        let why = "The sandbox was stopped after 300 s idle and started afresh";
        assert_eq!(
            fresh_sandbox(why, None),
            format!("{why}: variables and imports from earlier calls are gone.")
        );
        let r = RestoreOutcome::Restored {
            names: vec!["df".to_string(), "f".to_string()].into(),
            failed: vec![("g".to_string(), "cannot be pickled: TypeError".to_string())].into(),
            age: Duration::from_secs(301),
            stale: false,
        };
        assert_eq!(
            fresh_sandbox(why, Some(&r)),
            format!(
                "{why}. Restored from the snapshot saved when the sandbox stopped, 5 min ago: \
                 df, f. Not restored: g (cannot be pickled: TypeError)."
            )
        );
        let stale = RestoreOutcome::Restored {
            names: Bounded::default(),
            failed: Bounded::default(),
            age: Duration::from_secs(30),
            stale: true,
        };
        assert!(fresh_sandbox("X", Some(&stale)).starts_with("X. Nothing came back"));
        let failed = RestoreOutcome::Failed("the sandbox died".into());
        assert!(
            fresh_sandbox("X", Some(&failed)).contains("could not be restored (the sandbox died)")
        );
    }

    #[test]
    fn hostile_names_are_bounded_and_kept_on_one_line() {
        let names: Vec<String> = (0..100)
            .map(|i| format!("n{i}\n{}", "x".repeat(500)))
            .collect();
        let failed = names
            .iter()
            .map(|n| (n.clone(), "y".repeat(10_000)))
            .collect();
        let r = RestoreOutcome::Restored {
            failed: Bounded {
                items: failed,
                total: 5000,
            },
            names: names.into(),
            age: Duration::from_secs(9000),
            stale: true,
        };
        let text = fresh_sandbox("X", Some(&r));
        assert!(!text.contains('\n'));
        assert!(text.contains("and 60 more") && text.contains("and 4980 more"));
        assert!(text.len() < 20_000, "{}", text.len());
        assert!(text.contains("2 h ago"));
        let bidi = RestoreOutcome::Restored {
            names: vec!["df\u{202E}fd\x1b[2K".to_string()].into(),
            failed: vec![("g\u{200B}".to_string(), "why\u{2066}".to_string())].into(),
            age: Duration::from_secs(1),
            stale: false,
        };
        let text = fresh_sandbox("X", Some(&bidi));
        assert!(!text.chars().any(crate::shown::is_unsafe), "{text:?}");
    }
}
