//! Parsers for the small value languages used in settings (flags, sizes, durations, cpu
//! counts, users). Ranges are not theirs: each setting's row (`rows.rs`) holds its own.

/// `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`.
pub fn parse_flag(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected 1 or 0".into()),
    }
}

/// Parses a size like `512m`, `1g`, `64k`, `1t` or a plain byte count into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let (digits, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
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

/// Parses a duration into milliseconds: seconds (`1`, `0.5`, `2s`) or milliseconds (`500ms`).
/// The range is the setting's (`table.rs`).
pub fn parse_millis(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let bad = || "expected seconds such as 1 or 0.5, or milliseconds such as 500ms".to_string();
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
    if !ms.is_finite() || ms < 0.0 || ms > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(ms as u64)
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
        assert_eq!(parse_size("1t"), Ok(1 << 40));
    }

    #[test]
    fn cpus_and_users() {
        assert_eq!(parse_cpus("0.5"), Ok(0.5));
        assert!(parse_cpus("nan").is_err());
        assert!(parse_user("65534:65534").is_ok());
        assert!(parse_user("nobody").is_ok());
        assert!(parse_user("1:2:3").is_err());
        assert!(parse_user("a b").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_millis("1"), Ok(1000));
        assert_eq!(parse_millis("0.5"), Ok(500));
        assert_eq!(parse_millis("2s"), Ok(2000));
        assert_eq!(parse_millis(" 300ms "), Ok(300));
        for bad in ["soon", "-1", "nan", "inf", ""] {
            assert!(parse_millis(bad).is_err(), "{bad}");
        }
    }
}
