//! # agent-core
//!
//! The pure logic of the Telegram edge agent: everything that decides, with no IO of its own.
//! The worker crate (the edge) calls into it with data, the current time and configuration,
//! and implements its ports over D1, Durable Objects and `fetch`.
//!
//! ## Rooms
//!
//! The core is grouped by what a part of it is about, the way the edge is grouped into rooms;
//! no two top-level modules import each other in a cycle (`scripts/check-modules.mjs`). From
//! the outside in:
//! - [`telegram`]: the Telegram side: Bot API types in and out, an update made into the bot's
//!   own model (`normalize`), whether a message asks for a reply (`gating`), the commands
//!   answered without a model call, the pace of streamed drafts.
//! - [`gemini`]: the Gemini side: the `generateContent` wire types, the streamed answer, prices.
//! - [`conversation`], [`history`]: the bot's model of messages as ordered parts, and the
//!   history a prompt shows of them (two formats, token budget, people's text kept apart from
//!   the metadata).
//! - [`turn`]: one agent turn: the loop and its ports, the prompt, the history window it sees,
//!   sessions, media, the function declarations and the parsing of the model's calls.
//! - [`fetch`]: the `fetch_url` tool's pure parts (host policy, links in view, redirects, HTML
//!   to text, the fence, link previews).
//! - [`format`](mod@format): Markdown → Telegram HTML, validation, splitting, drafts.
//! - [`memory`]: long-term memory: extraction, merge, rendering, recall, the privacy scope.
//! - [`chat`]: the rules the chat object follows between turns (debounce, the reply plan,
//!   schedules, turn statuses); [`chat_state`] and [`crew_state`] are its state machine and
//!   crew mode's state, [`crew`] crew mode's rules.
//! - [`image`]: pictures the bot makes: the image model's request and answer, limits, upload.
//! - [`background`]: the retry queue's jobs, retention.
//! - [`access`]: who may talk to the bot, and on whose authority a turn's writes act.
//! - [`config`], [`limits`], [`secret`], [`usage`]: settings, the model budgets and
//!   throttles, secrets, what the model calls cost.
//! - [`time_zone`]: the time-zone database the caller supplies (the worker: the runtime's
//!   `Intl`; tests: chrono-tz), and a zone's offsets and local times.
//!
//! Why these stay top-level: [`config`] depends on `chat`, `fetch`, `gemini` (prices) and
//! [`limits`] (their defaults and types), and `access`, `turn`, [`usage`] and [`crew`] depend on
//! the settings, so the settings sit between rooms rather than in one, with the modules on
//! either side of them ([`limits`] and [`secret`] below, [`usage`] and [`crew`] above). See
//! INVARIANTS.md for the invariants each keeps.

pub mod access;
pub mod background;
pub mod business;
pub mod chat;
pub mod chat_state;
pub mod config;
pub mod conversation;
pub mod crew;
pub mod crew_state;
pub mod decimal;
pub mod fetch;
pub mod guest;
pub mod format;
pub mod gemini;
pub mod history;
pub mod image;
pub mod limits;
pub mod memory;
pub mod order;
pub mod secret;
pub mod telegram;
pub mod time_zone;
pub mod turn;
pub mod usage;
