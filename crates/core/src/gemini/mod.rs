//! The Gemini side: the `generateContent` wire types and the classification of its answers
//! ([`wire`], re-exported here as `gemini::*`, as `telegram` re-exports its types), the
//! streamed answer read as it arrives ([`stream`]), and what the models cost ([`prices`]).
pub mod prices;
pub mod stream;
pub mod wire;

pub use wire::*;
