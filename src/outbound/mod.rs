//! # outbound: the worker's calls to other services
//!
//! HTTP clients ([`net`] with a timeout and the subrequest count; [`telegram`] the Bot API;
//! [`gemini`] the model and embeddings; [`gemini_stream`] the streamed answer, [`drafts`]
//! Telegram's message drafts), the chat Durable Object client ([`objects`]) and the
//! queues ([`queues`]). Each call counts on the invocation's meter.
//!
//! Invariants (INVARIANTS.md): "Secrets never print", "Layers" (this room imports only
//! `config` and the core: it knows nothing of what the calls mean).

pub mod drafts;
pub mod gemini;
pub mod gemini_stream;
pub mod net;
pub mod objects;
pub mod queues;
pub mod telegram;
