//! Random ids and digests: the OS's random source and SHA-256 as hex. A leaf.

/// 16 random hex digits (from the OS's random source).
pub fn random_id() -> String {
    let mut bytes = [0u8; 8];
    fill_random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills `buf` from the OS's random source.
///
/// # Panics
/// When the OS has no random source (`/dev/urandom` unreadable): nothing safe can go on.
pub fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    let mut f = std::fs::File::open("/dev/urandom").expect("/dev/urandom is readable");
    f.read_exact(buf).expect("/dev/urandom gives bytes");
}

/// SHA-256 of `bytes`, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_and_hashes_hex() {
        let (a, b) = (random_id(), random_id());
        assert_eq!(a.len(), 16);
        assert_ne!(a, b);
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
