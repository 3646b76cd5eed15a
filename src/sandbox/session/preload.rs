//! Modules imported ahead (`MCP_BRIDGE_PRELOAD`): the one `preload` a session asked its sandbox
//! for, and the `preloaded` answer to it. Only the first answer to a `preload` that was sent is
//! taken (any other is stray: dropped and counted); a module that failed is logged once per
//! process (a warm pool starts many sandboxes with the same list), and only when it is one of
//! the names asked for, its reason escaped and cut (it comes from the sandbox).

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::log_limit::clipped;
use crate::sandbox::protocol::PreloadedFrame;

/// The modules a session asked its sandbox to import ahead, until the answer comes.
#[derive(Default)]
pub(super) struct Preloading {
    asked: Mutex<Option<Vec<String>>>,
}

impl Preloading {
    /// Notes that `modules` were asked for (their answer is expected next).
    pub(super) fn ask(&self, modules: &[String]) {
        *self.asked.lock().expect("preload lock") = Some(modules.to_vec());
    }

    /// Takes the answer to the `preload` sent and logs it; false when none was expected.
    pub(super) fn answered(&self, frame: &PreloadedFrame) -> bool {
        let Some(asked) = self.asked.lock().expect("preload lock").take() else {
            return false;
        };
        tracing::info!(
            imported = frame.imported,
            asked = asked.len(),
            ms = frame.ms,
            "modules imported ahead (MCP_BRIDGE_PRELOAD)"
        );
        let mut logged = LOGGED.lock().expect("preload log lock");
        for (module, why) in to_log(&asked, frame, &mut logged) {
            tracing::warn!(
                module = %module,
                cause = %why,
                "a module of MCP_BRIDGE_PRELOAD could not be imported ahead; a cell importing it \
                 gets the error itself"
            );
        }
        true
    }
}

/// The modules whose failure this process has logged (bounded by the names asked for, the
/// setting's: no other name is added).
static LOGGED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The failures of `frame` to log: `(module, why)` for each module asked for and not in
/// `logged` yet (then added), its reason escaped and cut. Names not asked for are ignored.
fn to_log(
    asked: &[String],
    frame: &PreloadedFrame,
    logged: &mut BTreeSet<String>,
) -> Vec<(String, String)> {
    frame
        .failed
        .items
        .iter()
        .filter_map(|(module, why)| {
            let known = asked.iter().find(|a| *a == module)?;
            logged
                .insert(known.clone())
                .then(|| (known.clone(), clipped(why)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(failed: &[(&str, &str)]) -> PreloadedFrame {
        PreloadedFrame {
            imported: 0,
            failed: failed
                .iter()
                .map(|(m, w)| (m.to_string(), w.to_string()))
                .collect::<Vec<_>>()
                .into(),
            ms: 1,
        }
    }

    #[test]
    fn a_failure_is_logged_once_and_only_for_a_module_asked_for() {
        let asked = vec!["pandas".to_string(), "nope".to_string()];
        let mut logged = BTreeSet::new();
        let first = frame(&[
            ("nope", "ModuleNotFoundError: No module named 'nope'"),
            ("forged", "not asked for"),
            ("nope", "twice in one frame"),
        ]);
        assert_eq!(
            to_log(&asked, &first, &mut logged),
            vec![(
                "nope".to_string(),
                "ModuleNotFoundError: No module named 'nope'".to_string()
            )]
        );
        // The next sandbox (a warm pool's) fails the same way: nothing new to log.
        assert!(to_log(&asked, &first, &mut logged).is_empty());
        assert_eq!(logged.len(), 1);
    }

    #[test]
    fn a_reason_from_the_sandbox_is_escaped_and_cut() {
        let asked = vec!["m".to_string()];
        let hostile = format!("E\u{1b}[2K\u{202e}{}", "x".repeat(10_000));
        let lines = to_log(&asked, &frame(&[("m", &hostile)]), &mut BTreeSet::new());
        let (_, why) = &lines[0];
        assert!(
            !why.contains('\u{1b}') && !why.contains('\u{202e}'),
            "{why}"
        );
        assert!(why.chars().count() < 300, "{} chars", why.chars().count());
    }

    #[test]
    fn only_the_answer_to_a_preload_sent_is_taken() {
        let p = Preloading::default();
        assert!(!p.answered(&frame(&[])), "nothing was asked for");
        p.ask(&["json".to_string()]);
        assert!(p.answered(&frame(&[])));
        assert!(!p.answered(&frame(&[])), "a second answer is stray");
    }
}
