//! Parsers for the small value languages used in settings (flags, sizes, seconds, cpu counts).

/// `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`.
pub fn parse_flag(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 1 or 0".into()),
    }
}

/// Parses a size like `512m`, `1g`, `64k` or a plain byte count into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = digits
        .trim()
        .parse()
        .map_err(|_| "expected a size such as 512m, 1g or 65536".to_string())?;
    n.checked_mul(mult)
        .filter(|b| *b > 0)
        .ok_or_else(|| "size must be greater than zero and fit in 64 bits".to_string())
}

/// Parses a whole number of seconds (`0` allowed only when `allow_zero`).
pub fn parse_seconds(text: &str, allow_zero: bool) -> Result<u64, String> {
    let n: u64 = text
        .trim()
        .parse()
        .map_err(|_| "expected a whole number of seconds".to_string())?;
    if n == 0 && !allow_zero {
        return Err("must be at least 1 second".into());
    }
    Ok(n)
}

/// Parses a duration of at least `min_ms` milliseconds: seconds (`1`, `0.5`, `2s`) or
/// milliseconds (`500ms`).
pub fn parse_interval(text: &str, min_ms: u64) -> Result<std::time::Duration, String> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || {
        format!("expected seconds such as 1 or 0.5, or milliseconds such as 500ms (at least {min_ms}ms)")
    };
    let ms = if let Some(n) = t.strip_suffix("ms") {
        n.trim().parse::<u64>().map_err(|_| bad())? as f64
    } else {
        let n: f64 = t
            .strip_suffix('s')
            .unwrap_or(&t)
            .trim()
            .parse()
            .map_err(|_| bad())?;
        n * 1000.0
    };
    if !ms.is_finite() || ms < min_ms as f64 || ms > 86_400_000.0 {
        return Err(bad());
    }
    Ok(std::time::Duration::from_millis(ms as u64))
}

/// Parses a positive integer count.
pub fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("expected a positive whole number".into()),
    }
}

/// Parses a cpu quota such as `1`, `0.5` or `2.25`.
pub fn parse_cpus(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 && n <= 1024.0 => Ok(n),
        _ => Err("expected a positive number of cpus such as 1 or 0.5".into()),
    }
}

/// Checks a container user spec: `uid`, `uid:gid` (numeric) or a simple user name.
pub fn parse_user(text: &str) -> Result<String, String> {
    let ok_part = |p: &str| {
        !p.is_empty()
            && p.len() <= 32
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let mut parts = text.split(':');
    let (user, group) = (parts.next().unwrap_or(""), parts.next());
    if parts.next().is_some() || !ok_part(user) || group.is_some_and(|g| !ok_part(g)) {
        return Err("expected uid[:gid], for example 65534:65534".into());
    }
    Ok(text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64kb"), Ok(64 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("-5m").is_err());
    }

    #[test]
    fn seconds_counts_cpus_users() {
        assert_eq!(parse_seconds("30", false), Ok(30));
        assert!(parse_seconds("0", false).is_err());
        assert_eq!(parse_seconds("0", true), Ok(0));
        assert!(parse_seconds("1.5", false).is_err());
        assert!(parse_count("0").is_err());
        assert_eq!(parse_cpus("0.5"), Ok(0.5));
        assert!(parse_cpus("nan").is_err());
        assert!(parse_user("65534:65534").is_ok());
        assert!(parse_user("nobody").is_ok());
        assert!(parse_user("1:2:3").is_err());
        assert!(parse_user("a b").is_err());
    }

    #[test]
    fn intervals() {
        use std::time::Duration;
        assert_eq!(parse_interval("1", 250), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("0.5", 250), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("2s", 250), Ok(Duration::from_secs(2)));
        assert_eq!(
            parse_interval(" 300ms ", 250),
            Ok(Duration::from_millis(300))
        );
        for bad in ["0.1", "100ms", "soon", "-1", "nan", "inf", "1e9", ""] {
            assert!(parse_interval(bad, 250).is_err(), "{bad}");
        }
    }
}
