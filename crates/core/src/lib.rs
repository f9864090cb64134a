//! # agent-core
//!
//! The pure logic of the Telegram edge agent: everything that decides, with no IO of its own.
//! The worker crate (the edge) calls into it with data, the current time and configuration,
//! and implements its ports over D1, Durable Objects and `fetch`.
//!
//! Module map (see ARCHITECTURE.md for the invariants each keeps):
//! - [`telegram`]: Bot API types in and out, error classification.
//! - [`conversation`], [`normalize`]: the bot's model of messages as ordered parts.
//! - [`gemini`]: generateContent wire types and error classification.
//! - [`format`]: Markdown → Telegram HTML, validation, splitting.
//! - [`config`], [`secret`]: settings and secrets.

pub mod access;
pub mod background;
pub mod chat;
pub mod chat_state;
pub mod config;
pub mod crew;
pub mod crew_state;
pub mod conversation;
pub mod fetch;
pub mod format;
pub mod gemini;
pub mod history;
pub mod limits;
pub mod memory;
pub mod secret;
pub mod telegram;
pub mod turn;
pub mod usage;
