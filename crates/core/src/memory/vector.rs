//! Embedding vectors as `memories.embedding` stores them: `q8:` and the base64 of a 4-byte
//! little-endian `f32` scale followed by one signed byte per component (the component divided
//! by the scale, times 127). A turn with embeddings configured reads up to 300 of them; as
//! JSON arrays of floats that was megabytes of text to parse in every turn, as bytes it is a
//! kilobyte each and a cosine that differs by well under a hundredth.
//!
//! [`decode`] also reads the JSON arrays stored before (`[0.1, …]`).
//!
//! A turn scores its stored vectors with a [`Query`]: on the stored bytes, as they are (the
//! scale cancels out of a cosine), with no vector of floats made per memory.

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

/// A stored vector, in either form; `None` when it is neither.
pub fn decode(s: &str) -> Option<Vec<f32>> {
    if let Some(rest) = s.strip_prefix(PREFIX) {
        let bytes = B64.decode(rest).ok()?;
        let (head, body) = bytes.split_at_checked(4)?;
        let scale = f32::from_le_bytes(head.try_into().ok()?);
        return Some(body.iter().map(|b| (*b as i8) as f32 * scale / 127.0).collect());
    }
    serde_json::from_str(s).ok()
}

/// A query vector, to score stored vectors against (the cosine of [`crate::memory::cosine`]).
pub struct Query {
    v: Vec<f32>,
    norm: f32,
    /// The bytes of the stored vector being scored, kept for the next.
    buf: Vec<u8>,
}

impl Query {
    pub fn new(v: Vec<f32>) -> Query {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        Query { v, norm, buf: Vec::new() }
    }

    /// The cosine between the query and a stored vector; `None` when `stored` is neither form,
    /// 0 when the lengths differ or either is all zeros.
    pub fn score(&mut self, stored: &str) -> Option<f32> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return decode(stored).map(|v| crate::memory::cosine(&self.v, &v));
        };
        self.buf.clear();
        B64.decode_vec(rest, &mut self.buf).ok()?;
        let body = self.buf.get(4..)?;
        if body.len() != self.v.len() || body.is_empty() || self.norm == 0.0 {
            return Some(0.0);
        }
        let (mut dot, mut squares) = (0f32, 0i32);
        for (x, b) in self.v.iter().zip(body) {
            let q = *b as i8;
            dot += x * q as f32;
            squares += q as i32 * q as i32;
        }
        Some(if squares == 0 { 0.0 } else { dot / (self.norm * (squares as f32).sqrt()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::search::cosine;

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

    #[test]
    fn a_query_scores_the_stored_bytes_as_the_cosine_of_the_decoded_vector() {
        let a = wave(DIMENSIONS, 0.37);
        let mut q = Query::new(a.clone());
        for k in [0.41, 0.9, 2.3] {
            let b = wave(DIMENSIONS, k);
            let stored = encode(&b);
            let want = cosine(&a, &decode(&stored).unwrap());
            let got = q.score(&stored).unwrap();
            assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        }
        let negated: Vec<f32> = a.iter().map(|x| -x).collect();
        assert!((q.score(&encode(&negated)).unwrap() + 1.0).abs() < 0.01, "opposite: about -1");
        assert_eq!(q.score("[0.5, -0.25]"), Some(0.0), "another length scores 0");
        let legacy = format!("{:?}", wave(DIMENSIONS, 0.41));
        let want = cosine(&a, &wave(DIMENSIONS, 0.41));
        assert!((q.score(&legacy).unwrap() - want).abs() < 1e-6, "the JSON arrays stored before");
        assert_eq!(q.score("q8:!!"), None);
        assert_eq!(q.score("q8:"), None, "no scale");
        assert_eq!(q.score("nonsense"), None);
        assert_eq!(q.score(&encode(&vec![0.0; DIMENSIONS])), Some(0.0), "all zeros");
        assert_eq!(Query::new(vec![0.0; DIMENSIONS]).score(&encode(&a)), Some(0.0), "a zero query");
    }
}
