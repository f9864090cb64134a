//! Secrets as a type that never prints, and constant-time comparison.
//!
//! Invariants (INVARIANTS.md): "Secrets never print". A [`Secret`]'s value leaves this type
//! only through [`Secret::expose`], which the edge calls exactly where the value goes on the
//! wire (a header, the Telegram URL path).

use std::fmt;

#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// Constant-time comparison with a presented value (a header, a bearer token).
    /// An empty secret matches nothing.
    pub fn matches(&self, presented: &str) -> bool {
        !self.0.is_empty() && constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Compares two byte strings in time that depends only on their lengths, not on where they
/// differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    // Fold the length difference in too, and always walk the longer input.
    let mut diff = (a.len() ^ b.len()) as u64;
    let n = a.len().max(b.len());
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= (x ^ y) as u64;
    }
    std::hint::black_box(diff) == 0
}

/// Removes a secret from text that may be shown (error messages of HTTP clients that could
/// carry the Telegram URL, which contains the bot token).
pub fn scrub(text: &str, secret: &Secret) -> String {
    if secret.is_empty() {
        text.to_string()
    } else {
        text.replace(secret.expose(), "***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_exact_value() {
        let s = Secret::new("s3cret");
        assert!(s.matches("s3cret"));
        assert!(!s.matches("s3cre"));
        assert!(!s.matches("s3cret!"));
        assert!(!s.matches(""));
        assert!(!Secret::new("").matches(""));
    }

    #[test]
    fn never_prints() {
        let s = Secret::new("123:ABC");
        assert_eq!(format!("{s:?} {s}"), "Secret(***) ***");
        assert_eq!(scrub("GET /bot123:ABC/sendMessage failed", &s), "GET /bot***/sendMessage failed");
    }
}
