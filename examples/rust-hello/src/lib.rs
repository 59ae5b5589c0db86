//! A tiny crate that `cordon verify` checks in the README's first command.

/// Greets `name`.
pub fn greet(name: &str) -> String {
    format!("hello, {name}!")
}

/// Adds two numbers, refusing to overflow.
pub fn checked_add(a: u32, b: u32) -> Option<u32> {
    a.checked_add(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets() {
        assert_eq!(greet("cordon"), "hello, cordon!");
    }

    #[test]
    fn adds_without_overflow() {
        assert_eq!(checked_add(2, 3), Some(5));
        assert_eq!(checked_add(u32::MAX, 1), None);
    }
}
