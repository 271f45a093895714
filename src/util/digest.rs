//! Content digests as kruntimes writes them (a function registration's, an artifact's):
//! `sha256:` and the lower-case hex of a SHA-256. Pure.

use sha2::Digest as _;

/// The digest of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    written(sha2::Sha256::digest(bytes))
}

/// The digest a streaming hasher computed.
pub fn finish(hasher: sha2::Sha256) -> String {
    written(hasher.finalize())
}

fn written(hash: impl AsRef<[u8]>) -> String {
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_digest_of_empty_json_is_its_known_sha256() {
        assert_eq!(
            super::sha256(b"{}"),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }
}
