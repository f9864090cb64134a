//! The alarm's loop, behind a port: the chat object's alarm asks its state for the next effect
//! ([`super::ChatState::alarm_effect`]), has the object carry it out ([`AlarmHost`]), asks again only
//! after an owed message, and arms once at the end. The object implements the port over its
//! storage, the clock, the invocation's meter and its outbound work; these tests run the loop
//! natively with a fake one.
//!
//! Invariants (INVARIANTS.md): "The state decides; the object asks", "One apology, never lost",
//! "Bounded invocations".

use super::effects::{AlarmEffect, Limits, Owed};
use super::port::StatePort;
use super::TurnRun;

/// What the alarm's loop needs from the chat object besides its state and clock.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait AlarmHost: StatePort {
    /// Subrequests this invocation has spent so far.
    fn spent(&self) -> u32;
    /// Whether this instance drives a turn now.
    fn in_flight(&self) -> bool;
    /// Sends `turn_id`'s owed message and says how it went.
    async fn send_owed(&self, turn_id: &str, text: &str) -> Owed;
    /// Drives a turn taken over from a dead instance or a lost retry job.
    async fn drive_turn(&self, turn: TurnRun);
    /// Gives a turn up and tells the user.
    async fn give_up(&self, turn_id: &str, reason: &'static str);
    /// Starts the burst's turn (the debounce is over).
    async fn start_turn(&self);
    /// Carries out the plan's due steps.
    async fn advance_plan(&self);
    /// Fires the chat's due schedule.
    async fn fire_schedules(&self);
    /// Sets the alarm to the state's next wake.
    async fn arm(&self);
}

/// The alarm's work (see the module doc).
pub async fn run<H: AlarmHost>(host: &H, lim: &Limits) {
    let mut owed_now = true;
    loop {
        let (now, spent, in_flight) = (host.now(), host.spent(), host.in_flight());
        let (effect, lost_step) = host.ask(|st, t| st.alarm_effect(now, t, in_flight, spent, owed_now, lim)).await;
        if lost_step {
            host.log("a step's retry job is overdue (lost?); retrying the step here");
        }
        match effect {
            AlarmEffect::SendOwed { turn_id, text } => {
                // One that must wait stops the owed messages of this alarm (not its other work).
                owed_now = send_owed(host, &turn_id, &text, lim).await;
                continue;
            }
            AlarmEffect::Yield => host.log(&format!("the alarm spent {spent} subrequests; continuing in the next invocation")),
            AlarmEffect::DriveTurn(turn) => {
                host.log(&format!("turn {}: taking over (its instance died or its retry job is overdue)", turn.turn_id));
                host.drive_turn(turn).await;
            }
            AlarmEffect::GiveUp { turn_id, reason } => {
                host.log(&format!("turn {turn_id}: {reason}; giving up"));
                host.give_up(&turn_id, reason).await;
            }
            AlarmEffect::StartTurn => host.start_turn().await,
            AlarmEffect::AdvancePlan => host.advance_plan().await,
            AlarmEffect::FireSchedules => host.fire_schedules().await,
            AlarmEffect::Nothing => {}
        }
        break;
    }
    host.arm().await;
}

/// Sends the owed messages that are due while they fit in the invocation (outside the alarm:
/// right after a turn is given up); stops at one that must wait.
pub async fn send_owed_messages<H: AlarmHost>(host: &H, lim: &Limits) {
    loop {
        let (now, spent) = (host.now(), host.spent());
        let Some((turn_id, text)) = host.ask(|st, _| st.next_owed(now, spent, lim)).await else { return };
        if !send_owed(host, &turn_id, &text, lim).await {
            return;
        }
    }
}

/// Sends one owed message and tells the state how it went. False when it must wait.
async fn send_owed<H: AlarmHost>(host: &H, turn_id: &str, text: &str, lim: &Limits) -> bool {
    let outcome = host.send_owed(turn_id, text).await;
    let now = host.now();
    if !host.ask(|st, _| st.owed_outcome(turn_id, outcome, now, lim)).await {
        host.log(&format!("turn {turn_id}: the apology was given up after a day of attempts"));
    }
    matches!(outcome, Owed::Sent | Owed::Never)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat_state::fake::{state_port_over_mem, Mem, L, T};
    use crate::chat_state::Signal;
    use crate::telegram::gating::Trigger;
    use futures::executor::block_on;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;


    /// A chat object in memory: the state, a clock, a meter (each send costs 3), Telegram's
    /// scripted answers to owed messages, and what was done, in order.
    #[derive(Default)]
    struct Fake {
        mem: Mem,
        spent: Cell<u32>,
        in_flight: bool,
        owed_answers: RefCell<VecDeque<Owed>>,
        done: RefCell<Vec<String>>,
    }

    state_port_over_mem!(Fake);

    impl AlarmHost for Fake {
        fn spent(&self) -> u32 {
            self.spent.get()
        }
        fn in_flight(&self) -> bool {
            self.in_flight
        }
        async fn send_owed(&self, turn_id: &str, text: &str) -> Owed {
            self.spent.set(self.spent.get() + 3);
            self.done.borrow_mut().push(format!("send {turn_id}: {text}"));
            self.owed_answers.borrow_mut().pop_front().unwrap_or(Owed::Sent)
        }
        async fn drive_turn(&self, turn: TurnRun) {
            self.done.borrow_mut().push(format!("drive {} attempt {}", turn.turn_id, turn.attempt));
        }
        async fn give_up(&self, turn_id: &str, reason: &'static str) {
            self.mem.st.borrow_mut().give_up(turn_id, self.mem.now.get());
            self.done.borrow_mut().push(format!("give up {turn_id}: {reason}"));
        }
        async fn start_turn(&self) {
            self.done.borrow_mut().push("start turn".into());
        }
        async fn advance_plan(&self) {
            self.done.borrow_mut().push("advance".into());
        }
        async fn fire_schedules(&self) {
            self.done.borrow_mut().push("fire schedules".into());
        }
        async fn arm(&self) {
            self.done.borrow_mut().push("arm".into());
        }
    }

    fn with_burst(at: i64) -> Fake {
        let f = Fake::default();
        f.mem.st.borrow_mut().signal(&Signal { update_id: 1, target_message_id: Some(10), trigger: Trigger::Private, at_ms: at });
        f
    }

    #[test]
    fn an_alarm_sends_what_is_owed_then_starts_the_due_turn_and_arms_once() {
        let f = with_burst(0);
        f.mem.st.borrow_mut().owe_text("t0", "water the plants".into(), 0);
        f.mem.now.set(5_000);
        f.mem.settle();
        block_on(run(&f, &L));
        assert_eq!(*f.done.borrow(), ["send t0: ⏰ water the plants", "start turn", "arm"]);
        assert_eq!(f.mem.st.borrow_mut().next_owed(i64::MAX / 2, 0, &L), None, "sent: owed no more");
        assert_eq!(f.mem.writes.get(), 2, "the attempt counted, then the message done: the state written twice");
    }

    #[test]
    fn an_owed_message_that_must_wait_stops_the_owed_ones_but_not_the_turn() {
        let f = with_burst(0);
        f.mem.st.borrow_mut().owe_text("t0", "a".into(), 0);
        f.mem.st.borrow_mut().owe_text("t1", "b".into(), 0);
        f.owed_answers.borrow_mut().push_back(Owed::Retry { after_ms: Some(12_000), jitter: 0.0 });
        f.mem.now.set(5_000);
        block_on(run(&f, &L));
        assert_eq!(*f.done.borrow(), ["send t0: ⏰ a", "start turn", "arm"], "t1 waits for the next alarm");
        // Both are still owed: t1 now, t0 after Telegram's 12 s.
        assert_eq!(f.mem.st.borrow_mut().next_owed(5_000, 0, &L).map(|(t, _)| t), Some("t1".into()));
    }

    #[test]
    fn owed_messages_that_spend_the_room_leave_the_turn_to_the_next_invocation() {
        let f = with_burst(0);
        f.mem.st.borrow_mut().owe_text("t0", "a".into(), 0);
        f.spent.set(4);
        f.mem.now.set(5_000);
        block_on(run(&f, &L));
        assert_eq!(*f.done.borrow(), ["send t0: ⏰ a", "arm"], "7 subrequests spent: over the turn-start room of 6");
        let t = T;
        assert_eq!(f.mem.st.borrow().due(5_000, &t), crate::chat_state::Due::StartTurn, "the turn is still due, at once");
    }

    #[test]
    fn a_taken_over_turn_is_driven_and_one_that_keeps_dying_is_given_up() {
        let f = with_burst(0);
        let turn = f.mem.st.borrow_mut().begin_turn(5_000, "1", 7);
        f.mem.now.set(6_000);
        block_on(run(&f, &L)); // its instance died: not in flight here
        block_on(run(&f, &L));
        block_on(run(&f, &L));
        let id = &turn.turn_id;
        assert_eq!(
            *f.done.borrow(),
            [format!("drive {id} attempt 2"), "arm".into(), format!("drive {id} attempt 3"), "arm".into(), format!("give up {id}: the turn kept failing"), "arm".into()]
        );
        // Given up: the apology is owed, and the next alarm sends it.
        f.done.borrow_mut().clear();
        block_on(run(&f, &L));
        assert_eq!(*f.done.borrow(), [format!("send {id}: {}", crate::chat_state::effects::APOLOGY), "arm".into()]);
    }

    #[test]
    fn a_turn_running_here_is_left_alone() {
        let mut f = with_burst(0);
        f.mem.st.borrow_mut().begin_turn(5_000, "1", 7);
        f.in_flight = true;
        f.mem.now.set(6_000);
        block_on(run(&f, &L));
        assert_eq!(*f.done.borrow(), ["arm"]);
    }

    #[test]
    fn after_a_turn_is_given_up_its_apology_goes_out_at_once() {
        let f = with_burst(0);
        let turn = f.mem.st.borrow_mut().begin_turn(5_000, "1", 7);
        f.mem.st.borrow_mut().give_up(&turn.turn_id, 5_000);
        f.mem.now.set(5_000);
        block_on(send_owed_messages(&f, &L));
        assert_eq!(*f.done.borrow(), [format!("send {}: {}", turn.turn_id, crate::chat_state::effects::APOLOGY)]);
    }
}
