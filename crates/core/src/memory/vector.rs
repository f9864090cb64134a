//! Embedding vectors as `memories.embedding` stores them: `q8:` and the base64 of a 4-byte
//! little-endian `f32` scale followed by one signed byte per component (the component divided
//! by the scale, times 127). A turn with embeddings configured reads up to 300 of them; as
//! JSON arrays of floats that was megabytes of text to parse in every turn, as bytes it is a
//! kilobyte each and a cosine that differs by well under a hundredth.
//!
//! [`decode`] also reads the JSON arrays stored before (`[0.1, …]`).

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
}
