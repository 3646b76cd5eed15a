//! Sandbox handles: what `run_python` gives a client without an MCP session (2026-07-28) so
//! that its next call reaches the same sandbox. A handle is 128 random bits, so it cannot be
//! guessed; the hub binds it to the token that minted it and refuses it for any other.

use crate::ids::fill_random;

/// What every handle starts with.
const PREFIX: &str = "sbx_";
/// Random bytes in a handle.
const RANDOM_BYTES: usize = 16;

/// A new handle.
pub fn mint() -> String {
    let mut bytes = [0u8; RANDOM_BYTES];
    fill_random(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// True when `text` has a handle's shape (it may still be unknown).
pub fn well_formed(text: &str) -> bool {
    text.strip_prefix(PREFIX).is_some_and(|hex| {
        hex.len() == RANDOM_BYTES * 2 && hex.bytes().all(|b| b.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_handles_are_well_formed_and_differ() {
        let (a, b) = (mint(), mint());
        assert!(well_formed(&a) && well_formed(&b));
        assert_ne!(a, b);
        for bad in [
            "",
            "sbx_",
            "sbx_zz",
            "abc_00112233445566778899aabbccddeeff",
            &a[..a.len() - 1],
        ] {
            assert!(!well_formed(bad), "{bad}");
        }
    }
}
