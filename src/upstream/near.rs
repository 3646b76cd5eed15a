//! "Did you mean": the name a misspelt server, tool or argument name most likely stands for.
//! Pure.

/// Least Jaro-Winkler similarity for a server or tool name to be suggested.
const NAME_SIMILARITY: f64 = 0.8;
/// Least similarity for an unknown argument to be reported as a misspelt property: stricter than
/// for names, since a match turns an argument the server might accept into an error.
const ARGUMENT_SIMILARITY: f64 = 0.85;

/// `name` folded for comparison: lower case, every non-alphanumeric character as `_`.
fn fold(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The candidate `name` was most likely meant to be: equal once case and separators are
/// ignored (`get_sum` for `get-sum`), else the most similar by Jaro-Winkler at or above
/// [`NAME_SIMILARITY`], a candidate containing `name` (or contained in it) counting as close.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    best(name, candidates, NAME_SIMILARITY, true)
}

/// Like [`closest`] for argument names, stricter: [`ARGUMENT_SIMILARITY`], no substrings.
pub fn closest_argument<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    best(name, candidates, ARGUMENT_SIMILARITY, false)
}

/// The candidate most similar to `name` at or above `min` (see [`closest`]).
fn best<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    min: f64,
    substrings: bool,
) -> Option<&'a str> {
    let want = fold(name);
    let mut found: Option<(f64, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let have = fold(c);
        let mut score = strsim::jaro_winkler(&want, &have);
        if have == want {
            score = 3.0;
        } else if substrings
            && want.len().min(have.len()) >= 3
            && (have.contains(&want) || want.contains(&have))
        {
            score += 1.0;
        }
        if score >= min && found.is_none_or(|(s, _)| score > s) {
            found = Some((score, c));
        }
    }
    found.map(|(_, c)| c)
}

/// ` (did you mean 'x'?)` for the closest of `candidates`, or nothing.
pub fn did_you_mean(name: &str, candidates: &[String]) -> String {
    closest(name, candidates.iter().map(String::as_str))
        .map(|s| format!(" (did you mean '{s}'?)"))
        .unwrap_or_default()
}
