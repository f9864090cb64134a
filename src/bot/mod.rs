//! # bot: what the bot can do in a conversation
//!
//! The capabilities a turn and the chat object use, none of which knows the object: [`answer`]
//! (answering one turn: load its inputs, ask the model, store), [`deliver`] (the outbox: sending a step exactly
//! once), [`stream`] (the first sign of a burst, the answer streamed as a draft), [`memory`]
//! (recall and the user's memory commands), [`access`] (who may talk to the bot, budgets),
//! [`commands`] (slash commands), [`to_one_person`] (answers about one person in a group, to them alone where Telegram allows it), [`usage`] (the usage text), [`crew`] (crew mode's lineup
//! and gating) and [`image`] (a plan's picture step: made by the image model, sent as a photo). The chat object (`chat`) decides when; this room does it.
//!
//! Invariants (INVARIANTS.md): "Layers" (this room never imports `chat`).

pub mod access;
pub mod answer;
pub mod business;
pub mod business_digest;
pub mod commands;
pub mod crew;
pub mod deliver;
pub mod image;
pub mod ephemeral;
pub mod guest;
pub mod memory;
pub mod one_shot;
pub mod to_one_person;
pub mod stream;
pub mod topics;
pub mod usage;
