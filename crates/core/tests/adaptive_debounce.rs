//! The chat state machine with the adaptive debounce: a single private message is answered
//! after a short window, a burst waits for its end (one turn), groups wait longer, the
//! operator's fixed window still rules when set, and a chat that bursts learns a longer window.

use agent_core::chat_state::{ChatState, Due, Signal, Timing};
use agent_core::chat::debounce::{Policy, BURST_QUIET_MS, GROUP_QUIET_MS, PRIVATE_QUIET_MS};
use agent_core::telegram::gating::Trigger;

fn timing(policy: Option<Policy>) -> Timing {
    Timing { adaptive: policy, ..Timing::new(1500, 8000) }
}

fn signal(st: &mut ChatState, id: i64, at: i64) {
    st.signal(&Signal { update_id: id, target_message_id: Some(id), trigger: Trigger::Private, at_ms: at });
}

const PRIVATE: Option<Policy> = Some(Policy::Adaptive { group: false });

#[test]
fn a_single_private_message_starts_a_turn_after_the_short_window() {
    let t = timing(PRIVATE);
    let mut st = ChatState::default();
    signal(&mut st, 1, 10_000);
    assert_eq!(st.debounce_deadline(&t), Some(10_000 + PRIVATE_QUIET_MS));
    assert_eq!(st.due(10_000 + PRIVATE_QUIET_MS - 1, &t), Due::Nothing);
    assert_eq!(st.due(10_000 + PRIVATE_QUIET_MS, &t), Due::StartTurn);
    assert_eq!(st.next_wake(&t, false, 10_000), Some(10_000 + PRIVATE_QUIET_MS));
}

#[test]
fn a_burst_extends_the_window_and_gives_one_turn() {
    let t = timing(PRIVATE);
    let mut st = ChatState::default();
    for (i, at) in [0, 150, 300, 450, 600].into_iter().enumerate() {
        signal(&mut st, i as i64 + 1, at);
        // Never due in the middle of the burst.
        assert_eq!(st.due(at, &t), Due::Nothing);
    }
    assert_eq!(st.debounce_deadline(&t), Some(600 + BURST_QUIET_MS));
    assert_eq!(st.due(600 + BURST_QUIET_MS, &t), Due::StartTurn);
    let turn = st.begin_turn(600 + BURST_QUIET_MS, "1", 7);
    assert_eq!(turn.target_message_id, Some(5));
    assert!(st.pending().is_none(), "the whole burst went into the one turn");
}

#[test]
fn groups_wait_longer() {
    let t = timing(Some(Policy::Adaptive { group: true }));
    let mut st = ChatState::default();
    signal(&mut st, 1, 0);
    assert_eq!(st.debounce_deadline(&t), Some(GROUP_QUIET_MS));
}

#[test]
fn the_fixed_window_is_the_operator_override() {
    let t = timing(None);
    let mut st = ChatState::default();
    signal(&mut st, 1, 0);
    signal(&mut st, 2, 100);
    assert_eq!(st.debounce_deadline(&t), Some(1600));
}

#[test]
fn a_chat_that_sends_bursts_learns_a_longer_single_window() {
    let t = timing(PRIVATE);
    let mut st = ChatState::default();
    // Earlier bursts with ~1 s gaps.
    for (i, at) in [0, 1000, 2000].into_iter().enumerate() {
        signal(&mut st, i as i64 + 1, at);
    }
    st.begin_turn(4000, "1", 1);
    st.end_turn(&st.turn().cloned().unwrap().turn_id);
    signal(&mut st, 10, 60_000);
    assert_eq!(st.debounce_deadline(&t), Some(60_000 + 1500), "the learnt window covers its gaps");
}

#[test]
fn an_older_stored_state_still_loads() {
    let old = serde_json::json!({"generation": 3, "pending": {"first_ms": 1, "last_ms": 2, "target_message_id": null, "trigger": "private"}, "turn": null, "plan": null, "turns_started": 0, "replans_in_row": 0, "seen": []});
    let loaded = agent_core::chat_state::load(Some(old));
    assert!(loaded.error.is_none(), "{:?}", loaded.error);
    assert_eq!(loaded.state.pending().unwrap().count, 0);
}
