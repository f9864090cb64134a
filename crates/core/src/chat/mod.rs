//! The rules the chat object follows between turns (the edge's `chat/` room carries them
//! out): how long a burst's quiet window lasts ([`debounce`]), the reply plan a turn leaves and
//! how its steps run ([`plan`]), reminders and follow-ups set for later ([`schedule`]), and the
//! one list of turn statuses ([`status`]). Nothing here depends on a turn's model call, so the
//! settings (`core::config`) and the state machine (`core::chat_state`) can use it.
pub mod debounce;
pub mod plan;
pub mod schedule;
pub mod status;
