//! Who may use the bot and on whose authority: who may talk to it at all ([`policy`]: private
//! chats, groups, pairing, operators) and, inside a turn, whose request a write acts on
//! ([`authority`]), and who opened the Mini App ([`webapp`]: signed init data). The model budgets and the secrets' strength are `core::limits` (the
//! settings depend on them, and these rules depend on the settings).
pub mod authority;
pub mod policy;
pub mod webapp;
