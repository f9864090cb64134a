//! Finding memories: a safe full-text query from a person's words (FTS5), and the cosine
//! similarity of embeddings.
//!
//! Invariant: user text never reaches FTS5 as syntax: every term is quoted, operators become
//! plain words.

const STOPWORDS: [&str; 48] = [
    "the", "a", "an", "and", "or", "but", "is", "are", "was", "were", "be", "to", "of", "in", "on", "at", "for",
    "with", "it", "this", "that", "i", "you", "me", "my", "your", "we", "our", "he", "she", "they", "them", "do",
    "does", "did", "what", "who", "how", "when", "where", "why", "can", "could", "would", "will", "just", "so", "not",
];

/// The distinct words of free text worth searching for: lower case, letters and digits only
/// (so no FTS or LIKE syntax survives), at least 3 characters, no stopwords, at most `max_terms`.
pub fn search_terms(text: &str, max_terms: usize) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let w = word.to_lowercase();
        if w.chars().count() < 3 || STOPWORDS.contains(&w.as_str()) || terms.contains(&w) {
            continue;
        }
        terms.push(w);
        if terms.len() >= max_terms {
            break;
        }
    }
    terms
}

/// An FTS5 MATCH expression for free text: its [`search_terms`], quoted so FTS syntax in user
/// text cannot break the query, OR-ed. `None` when nothing is left.
pub fn fts_query(text: &str, max_terms: usize) -> Option<String> {
    let terms = search_terms(text, max_terms);
    (!terms.is_empty()).then(|| terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// A MATCH expression for `memory_fts` (migration 0017): the query's terms in the `content`
/// column only (the `scope` column's tokens are not words anyone wrote), within `filter`
/// (`Scope::memories_fts`) when there is one.
pub fn in_content(query: &str, filter: Option<String>) -> String {
    match filter {
        Some(f) => format!("{f} AND content : ({query})"),
        None => format!("content : ({query})"),
    }
}

/// Cosine similarity of two embeddings (0 when either is empty or their sizes differ).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_stay_in_the_content_column_and_the_filter() {
        assert_eq!(in_content("\"tea\" OR \"cake\"", None), "content : (\"tea\" OR \"cake\")");
        assert_eq!(in_content("\"tea\"", Some("scope : (\"c5\")".into())), "scope : (\"c5\") AND content : (\"tea\")");
    }

    #[test]
    fn fts_queries_are_safe() {
        assert_eq!(fts_query("What's my sister's name?", 8).as_deref(), Some("\"sister\" OR \"name\""));
        // FTS operators in user text become plain quoted terms.
        assert_eq!(fts_query("\" OR * NEAR(", 8).as_deref(), Some("\"near\""));
        assert_eq!(fts_query("the a an", 8), None);
    }

    #[test]
    fn search_terms_are_plain_words() {
        assert_eq!(search_terms("What did I say in that voice note, 100% sure_x?", 8), vec!["say", "voice", "note", "100", "sure"]);
        assert!(search_terms("%%% ___ the", 8).is_empty());
        assert_eq!(search_terms("one two three four", 2), vec!["one", "two"]);
    }

    #[test]
    fn cosine_works() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
        assert_eq!(cosine(&[], &[]), 0.0);
    }
}
