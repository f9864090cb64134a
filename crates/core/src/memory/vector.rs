//! Embedding vectors as `memories.embedding` stores them: `q8:` and the base64 of a 4-byte
//! little-endian `f32` scale followed by one signed byte per component (the component divided
//! by the scale, times 127). A turn with embeddings configured reads up to 300 of them; as
//! JSON arrays of floats that was megabytes of text to parse in every turn, as bytes it is a
//! kilobyte each and a cosine that differs by well under a hundredth.
//!
//! [`Stored::parse`] also reads the JSON arrays stored before (`[0.1, …]`).
//!
//! A turn scores stored vectors with a [`Query`]: on the stored bytes, as they are (the scale
//! cancels out of a cosine), with no vector of floats made per memory. [`Cache`] keeps them
//! decoded across turns, so a turn reads from D1 only the vectors it has not seen.

use base64::Engine;

const PREFIX: &str = "q8:";
const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD_NO_PAD;

/// Components the bot asks Gemini's embedding model for (`outputDimensionality`).
pub const DIMENSIONS: usize = 768;

/// The stored form of a vector.
pub fn encode(v: &[f32]) -> String {
    let scale = v.iter().fold(0f32, |m, x| if x.is_finite() { m.max(x.abs()) } else { m });
    let mut bytes = Vec::with_capacity(4 + v.len());
    bytes.extend_from_slice(&scale.to_le_bytes());
    for x in v {
        let q = if scale > 0.0 && x.is_finite() { (x / scale * 127.0).round().clamp(-127.0, 127.0) as i8 } else { 0 };
        bytes.push(q as u8);
    }
    format!("{PREFIX}{}", B64.encode(bytes))
}

/// A stored vector, decoded once: the signed bytes of the `q8:` form with their norm (its
/// scale cancels out of a cosine), or the floats of the JSON form stored before.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    Bytes { q: Vec<i8>, norm: f32 },
    Floats(Vec<f32>),
}

impl Stored {
    /// `None` when `s` is neither form.
    pub fn parse(s: &str) -> Option<Stored> {
        let Some(rest) = s.strip_prefix(PREFIX) else {
            return serde_json::from_str(s).ok().map(Stored::Floats);
        };
        let bytes = B64.decode(rest).ok()?;
        let body = bytes.get(4..)?;
        let q: Vec<i8> = body.iter().map(|b| *b as i8).collect();
        let squares: i32 = q.iter().map(|x| *x as i32 * *x as i32).sum();
        Some(Stored::Bytes { q, norm: (squares as f32).sqrt() })
    }

}

/// About the bytes a [`Cache`] entry holds (an unreadable vector holds none but its place).
fn held(v: &Option<Stored>) -> usize {
    16 + match v {
        Some(Stored::Bytes { q, .. }) => q.len(),
        Some(Stored::Floats(v)) => 4 * v.len(),
        None => 0,
    }
}

/// A query vector, to score stored vectors against (the cosine of [`crate::memory::cosine`]).
pub struct Query {
    v: Vec<f32>,
    norm: f32,
}

impl Query {
    pub fn new(v: Vec<f32>) -> Query {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        Query { v, norm }
    }

    /// The cosine between the query and a stored vector: 0 when the lengths differ or either
    /// is all zeros.
    pub fn score(&self, stored: &Stored) -> f32 {
        let (q, norm) = match stored {
            Stored::Floats(v) => return crate::memory::cosine(&self.v, v),
            Stored::Bytes { q, norm } => (q, *norm),
        };
        if q.len() != self.v.len() || q.is_empty() || self.norm == 0.0 || norm == 0.0 {
            return 0.0;
        }
        let dot: f32 = self.v.iter().zip(q).map(|(x, b)| x * *b as f32).sum();
        dot / (self.norm * norm)
    }
}

/// Stored vectors by memory id, decoded once and kept across turns (the worker keeps one per
/// isolate): a turn with embeddings configured scores up to 300 of them, and reading them all
/// from D1 every turn was most of what that turn cost.
///
/// Sound because a memory's embedding never changes once set: ids are never reused
/// (`AUTOINCREMENT`), a row's embedding is written once (from none), and what a turn may see is
/// decided by the query that lists the ids, never by the cache, which holds no text.
pub struct Cache {
    vectors: std::collections::HashMap<i64, Option<Stored>>,
    cap_bytes: usize,
}

impl Cache {
    /// A cache that holds about `cap_bytes` of vectors; past that it drops all but what the
    /// turn that fills it scores ([`Cache::fill`]).
    pub fn new(cap_bytes: usize) -> Cache {
        Cache { vectors: Default::default(), cap_bytes }
    }

    /// The ids of `ids` it does not hold.
    pub fn missing(&self, ids: &[i64]) -> Vec<i64> {
        ids.iter().copied().filter(|id| !self.vectors.contains_key(id)).collect()
    }

    /// Keeps the stored vectors of `rows` (an unreadable one as never scored). When they would
    /// pass the cap, what it held before is dropped first, but for `keep` (the ids the turn
    /// that read `rows` scores).
    pub fn fill<'a>(&mut self, keep: &[i64], rows: impl IntoIterator<Item = (i64, &'a str)>) {
        let parsed: Vec<(i64, Option<Stored>)> = rows.into_iter().map(|(id, s)| (id, Stored::parse(s))).collect();
        let adding: usize = parsed.iter().map(|(_, v)| held(v)).sum();
        if self.vectors.values().map(held).sum::<usize>() + adding > self.cap_bytes {
            let keep: std::collections::HashSet<i64> = keep.iter().copied().collect();
            self.vectors.retain(|id, _| keep.contains(id));
        }
        self.vectors.extend(parsed);
    }

    /// Up to `n` of `ids` whose vectors score at least `min` against `query`, best first (ties
    /// in the order of `ids`); ids it does not hold are skipped.
    pub fn best(&self, query: &Query, ids: &[i64], min: f32, n: usize) -> Vec<i64> {
        let scored = ids
            .iter()
            .filter_map(|id| Some((query.score(self.vectors.get(id)?.as_ref()?), *id)))
            .filter(|(score, _)| *score >= min);
        crate::order::top_n(scored, n)
    }

    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::search::cosine;

    /// A stored vector as floats (the scale applied), in either form: the oracle of the tests.
    fn decode(s: &str) -> Option<Vec<f32>> {
        if let Some(rest) = s.strip_prefix(PREFIX) {
            let bytes = B64.decode(rest).ok()?;
            let (head, body) = bytes.split_at_checked(4)?;
            let scale = f32::from_le_bytes(head.try_into().ok()?);
            return Some(body.iter().map(|b| (*b as i8) as f32 * scale / 127.0).collect());
        }
        serde_json::from_str(s).ok()
    }

    fn wave(n: usize, k: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32 * k).sin() * 0.07) + if i % 17 == 0 { 0.2 } else { 0.0 }).collect()
    }

    #[test]
    fn a_vector_comes_back_close_and_its_cosines_stay() {
        let (a, b) = (wave(DIMENSIONS, 0.37), wave(DIMENSIONS, 0.41));
        let (qa, qb) = (decode(&encode(&a)).unwrap(), decode(&encode(&b)).unwrap());
        assert_eq!(qa.len(), DIMENSIONS);
        let max = a.iter().fold(0f32, |m, x| m.max(x.abs()));
        assert!(a.iter().zip(&qa).all(|(x, y)| (x - y).abs() <= max / 127.0), "within one step");
        assert!((cosine(&a, &b) - cosine(&qa, &qb)).abs() < 0.01);
        assert!(encode(&a).len() < 1100, "about a kilobyte: {}", encode(&a).len());
    }

    #[test]
    fn the_json_arrays_stored_before_are_read_and_garbage_is_not() {
        assert_eq!(decode("[0.5, -0.25, 1]"), Some(vec![0.5, -0.25, 1.0]));
        assert_eq!(decode("q8:!!"), None);
        assert_eq!(decode("q8:"), None, "no scale");
        assert_eq!(decode("nonsense"), None);
        assert_eq!(decode(&encode(&[])), Some(vec![]));
        let zeros = decode(&encode(&[0.0, 0.0])).unwrap();
        assert_eq!(zeros, vec![0.0, 0.0]);
        let odd = decode(&encode(&[f32::NAN, 1.0, f32::INFINITY])).unwrap();
        assert_eq!(odd, vec![0.0, 1.0, 0.0], "non-finite components are stored as 0");
    }

    fn scored(q: &Query, s: &str) -> Option<f32> {
        Stored::parse(s).map(|v| q.score(&v))
    }

    #[test]
    fn a_query_scores_the_stored_bytes_as_the_cosine_of_the_decoded_vector() {
        let a = wave(DIMENSIONS, 0.37);
        let q = Query::new(a.clone());
        for k in [0.41, 0.9, 2.3] {
            let b = wave(DIMENSIONS, k);
            let stored = encode(&b);
            let want = cosine(&a, &decode(&stored).unwrap());
            let got = scored(&q, &stored).unwrap();
            assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        }
        let negated: Vec<f32> = a.iter().map(|x| -x).collect();
        assert!((scored(&q, &encode(&negated)).unwrap() + 1.0).abs() < 0.01, "opposite: about -1");
        assert_eq!(scored(&q, "[0.5, -0.25]"), Some(0.0), "another length scores 0");
        let legacy = format!("{:?}", wave(DIMENSIONS, 0.41));
        let want = cosine(&a, &wave(DIMENSIONS, 0.41));
        assert!((scored(&q, &legacy).unwrap() - want).abs() < 1e-6, "the JSON arrays stored before");
        assert_eq!(scored(&q, "q8:!!"), None);
        assert_eq!(scored(&q, "q8:"), None, "no scale");
        assert_eq!(scored(&q, "nonsense"), None);
        assert_eq!(scored(&q, &encode(&vec![0.0; DIMENSIONS])), Some(0.0), "all zeros");
        assert_eq!(scored(&Query::new(vec![0.0; DIMENSIONS]), &encode(&a)), Some(0.0), "a zero query");
    }

    #[test]
    fn the_cache_scores_only_the_ids_asked_for_best_first_and_keeps_what_it_read() {
        let a = wave(DIMENSIONS, 0.37);
        let near: Vec<f32> = a.iter().enumerate().map(|(i, x)| if i % 50 == 0 { x + 0.05 } else { *x }).collect();
        let far: Vec<f32> = a.iter().map(|x| -x).collect();
        let (near, far, same) = (encode(&near), encode(&far), encode(&a));
        let legacy = format!("{:?}", wave(DIMENSIONS, 0.37));
        let mut c = Cache::new(1 << 20);
        assert_eq!(c.missing(&[1, 2, 3]), vec![1, 2, 3]);
        c.fill(&[], [(1, near.as_str()), (2, far.as_str()), (3, same.as_str()), (4, "garbage"), (5, legacy.as_str())]);
        assert_eq!(c.len(), 5);
        assert_eq!(c.missing(&[1, 2, 3, 4, 5, 6]), vec![6], "an unreadable one is held too (never scored)");
        assert!(!c.is_empty());
        let q = Query::new(a);
        assert_eq!(c.best(&q, &[1, 2, 3, 4, 5, 6], 0.55, 6), vec![5, 3, 1], "best first (the floats are exact); far, unreadable and unknown ones left out");
        c.fill(&[], [(7, same.as_str())]);
        assert_eq!(c.best(&q, &[7, 3], 0.55, 6), vec![7, 3], "ties in the order asked");
        assert_eq!(c.best(&q, &[3, 7], 0.55, 6), vec![3, 7], "ties in the order asked");
        assert_eq!(c.best(&q, &[1, 2], 0.55, 6), vec![1], "only the ids asked for: what the turn may see");
        assert_eq!(c.best(&q, &[1, 3, 5], 0.55, 2).len(), 2, "at most n");
    }

    #[test]
    fn the_cache_starts_over_past_its_cap_and_keeps_the_turn_that_filled_it() {
        let v = encode(&wave(DIMENSIONS, 0.5));
        let one = held(&Stored::parse(&v));
        let mut c = Cache::new(one * 10);
        c.fill(&[], (0..8).map(|id| (id, v.as_str())));
        assert_eq!(c.len(), 8);
        c.fill(&[], (0..8).map(|id| (id, v.as_str())));
        assert_eq!(c.len(), 8, "filling the same ids again does not grow it");
        // A turn that scores ids 6, 7 (held) and 100..105 (read now): past the cap, the
        // others go, and every id the turn scores is held.
        let turn: Vec<i64> = [6, 7].into_iter().chain(100..105).collect();
        c.fill(&turn, (100..105).map(|id| (id, v.as_str())));
        assert_eq!(c.len(), 7);
        assert!(c.missing(&turn).is_empty(), "the turn's ids stay: {:?}", c.missing(&turn));
        assert_eq!(c.missing(&[0, 5]), vec![0, 5]);
        let q = Query::new(wave(DIMENSIONS, 0.5));
        assert_eq!(c.best(&q, &turn, 0.55, 10), turn, "all of them scored (ties in the order asked)");
    }
}
