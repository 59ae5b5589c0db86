//! Human units for durations (`500ms`, `2s`, `10m`) and sizes (`64KiB`, `256MiB`, `2GiB`): the
//! one parser of each that every command line option, `cordon.toml` and `cordon-server.toml`
//! value goes through.

use std::time::Duration;

/// Parses a duration such as `500ms`, `2s`, `1m30s`, `10m`, `1h`. A bare number is refused:
/// the unit must be explicit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "duration {text:?} has no unit; write e.g. {text}s or {text}ms"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("invalid duration {text:?}: {e} (examples: 500ms, 2s, 10m)"))
}

/// A duration as a person writes it, in the units [`parse_duration`] reads: `24h`,
/// `1h30m`, `45s`, `250ms` (parts below a second dropped once there are seconds or more).
pub fn format_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs == 0 {
        return format!("{}ms", duration.as_millis());
    }
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut text = String::new();
    for (value, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if value > 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    text
}

/// Parses a size: plain bytes (`1024`), binary units (`64KiB`, `256MiB`, `2GiB`, also
/// `K`/`M`/`G`), or decimal units (`64KB`, `1MB`, `2GB`). Case-insensitive, spaces allowed.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let bad = || format!("invalid size {text:?} (examples: 65536, 64KiB, 256MiB, 2GiB, 10MB)");
    if number.is_empty() {
        return Err(bad());
    }
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    if let Ok(whole) = number.parse::<u64>() {
        return whole.checked_mul(multiplier).ok_or_else(bad);
    }
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * multiplier as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_formatted_as_they_are_written() {
        for (secs, text) in [
            (86_400, "24h"),
            (5_400, "1h30m"),
            (45, "45s"),
            (3_601, "1h1s"),
        ] {
            assert_eq!(format_duration(Duration::from_secs(secs)), text);
            assert_eq!(parse_duration(text), Ok(Duration::from_secs(secs)));
        }
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
    }

    #[test]
    fn parses_sizes_in_every_unit() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("1.5KiB"), Ok(1536));
        assert_eq!(parse_size(" 3 kib "), Ok(3072));
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in ["", "KiB", "12XB", "-1", "1e3", "99999999999999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn parses_durations_and_refuses_bare_numbers() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("soon").is_err());
    }
}
