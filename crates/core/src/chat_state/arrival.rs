//! An arrival's loop, behind a port: a reply-asking message or reaction that reached the chat
//! object. The state says whether it was seen before; the object's checks that need IO (access,
//! budgets) and its commands come next, none of which calls the model; then the signal goes to
//! the state, which debounces the burst and may cancel a plan or abandon an early start, and
//! the loop carries out what it answered. The object arms once afterwards (its fetch does).
//!
//! Invariants (INVARIANTS.md): "Dedup" (an update the state has seen does nothing again),
//! "The state decides; the object asks". Also: a refused or over-budget update is remembered
//! too, so a redelivery is not refused (and notified) twice; a command's update is seen, and
//! its effect on the state (`/new`, the crew switch) is one write.

use super::port::StatePort;
use super::{Signal, SignalOutcome};
use crate::telegram::gating::Trigger;

/// What the object knows of an arrival before it asks its state.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalFacts {
    pub update_id: i64,
    /// The message (or the reacted-to message) a reply threads to.
    pub message_id: i64,
    pub trigger: Trigger,
    /// A command for the bot (`telegram::commands`), if it is one.
    pub command: Option<CommandFacts>,
}

/// What a command does to the chat's state, besides the command's own answer.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CommandFacts {
    /// `/new`: the old session's burst, plan and crew cycle are forgotten.
    pub starts_over: bool,
    /// `/cancel N`: a schedule may be gone, so the alarm's next schedule is read again.
    pub cancels_schedule: bool,
    /// `/crew on|off` by an operator where a crew is set: the chat's switch.
    pub crew_switch: Option<bool>,
}

/// What the chat object does for an arrival besides asking its state.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait ArrivalHost: StatePort {
    /// The access policy admits the sender (else it was refused, and told if it should be).
    async fn admit(&self) -> bool;
    /// The model budgets leave room (else one notice per window went out).
    async fn within_budget(&self) -> bool;
    /// Answers the command.
    async fn run_command(&self);
    /// Reads the chat's next schedule again.
    async fn refresh_schedules(&self);
    /// Stops the early start `turn_id` a newer message abandoned.
    fn abandon_early_start(&self, turn_id: &str);
    /// Shows the bot is on it (the first message of a burst, no turn running).
    fn first_sign(&self);
    /// Records the steps of `turn_id`'s plan from `from` on as cancelled by a new message.
    async fn record_cancelled(&self, turn_id: &str, from: usize);
}

/// How an arrival was handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handled {
    /// Seen before: nothing was done again.
    Redelivered,
    /// The access policy refused it.
    Refused,
    /// A command, answered.
    Command,
    /// Over a model budget.
    OverBudget,
    /// A signal for the debounce; `first`: it began a burst.
    Signalled { first: bool },
}

/// An arrival's work (see the module doc).
pub async fn run<H: ArrivalHost>(host: &H, a: &ArrivalFacts) -> Handled {
    let id = a.update_id;
    if host.peek(|st| st.has_seen(id)).await {
        return Handled::Redelivered;
    }
    if !host.admit().await {
        host.ask(|st, _| st.mark_seen(id)).await;
        return Handled::Refused;
    }
    if let Some(cmd) = a.command {
        host.ask(|st, _| {
            st.mark_seen(id);
            if cmd.starts_over {
                st.start_over();
            }
            if let Some(on) = cmd.crew_switch {
                st.set_crew_switch(Some(on));
            }
        })
        .await;
        host.run_command().await;
        if cmd.cancels_schedule {
            host.refresh_schedules().await;
        }
        return Handled::Command;
    }
    if !host.within_budget().await {
        host.ask(|st, _| st.mark_seen(id)).await;
        return Handled::OverBudget;
    }
    // The debounce runs on this object's clock: when it learned of the message.
    let signal = Signal { update_id: id, target_message_id: Some(a.message_id), trigger: a.trigger, at_ms: host.now() };
    let (outcome, first) = host.ask(|st, _| (st.signal(&signal), st.burst_just_began())).await;
    let SignalOutcome::Accepted { cancelled, abandoned } = outcome else { return Handled::Redelivered };
    if let Some(turn_id) = abandoned {
        host.log(&format!("turn {turn_id}: early start abandoned for a newer message"));
        host.abandon_early_start(&turn_id);
    }
    if first {
        host.first_sign();
    }
    if let Some((turn_id, from)) = cancelled {
        host.log(&format!("turn {turn_id}: plan cancelled from step {from} by a new message"));
        host.record_cancelled(&turn_id, from).await;
    }
    Handled::Signalled { first }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::Step;
    use crate::chat_state::fake::{state_port_over_mem, Mem};
    use futures::executor::block_on;
    use std::cell::RefCell;


    /// A chat object in memory (its state's writes counted as the object makes them: `Mem`),
    /// the access and budget answers, and what was done, in order.
    struct Fake {
        mem: Mem,
        admits: bool,
        within_budget: bool,
        done: RefCell<Vec<String>>,
    }

    impl Default for Fake {
        fn default() -> Self {
            let mem = Mem::default();
            mem.now.set(1_000);
            Fake { mem, admits: true, within_budget: true, done: Default::default() }
        }
    }

    state_port_over_mem!(Fake);

    impl ArrivalHost for Fake {
        async fn admit(&self) -> bool {
            self.done.borrow_mut().push("admit".into());
            self.admits
        }
        async fn within_budget(&self) -> bool {
            self.done.borrow_mut().push("budget".into());
            self.within_budget
        }
        async fn run_command(&self) {
            // What the state says when the answer goes: the update is seen first, so a
            // redelivery after a crash here is not answered twice.
            let seen: Vec<i64> = (1..=3).filter(|id| self.mem.st.borrow().has_seen(*id)).collect();
            self.done.borrow_mut().push(format!("command (seen {seen:?})"));
        }
        async fn refresh_schedules(&self) {
            self.done.borrow_mut().push("schedules".into());
        }
        fn abandon_early_start(&self, turn_id: &str) {
            self.done.borrow_mut().push(format!("stop {turn_id}"));
        }
        fn first_sign(&self) {
            self.done.borrow_mut().push("sign".into());
        }
        async fn record_cancelled(&self, turn_id: &str, from: usize) {
            self.done.borrow_mut().push(format!("cancelled {turn_id} from {from}"));
        }
    }

    fn message(update_id: i64) -> ArrivalFacts {
        ArrivalFacts { update_id, message_id: update_id * 10, trigger: Trigger::Private, command: None }
    }

    fn send(text: &str) -> Step {
        Step::Send { text: text.into(), reply_to: None, no_link_preview: false }
    }

    #[test]
    fn a_message_is_handled_once_however_often_it_is_delivered() {
        let f = Fake::default();
        f.mem.st.borrow_mut().count_alarm(); // changed in memory only, as the alarm leaves it
        assert_eq!(block_on(run(&f, &message(1))), Handled::Signalled { first: true });
        assert_eq!(block_on(run(&f, &message(1))), Handled::Redelivered);
        assert_eq!(*f.done.borrow(), ["admit", "budget", "sign"], "checked and signed once");
        assert_eq!(f.mem.writes.get(), 1, "the signal and the burst's start: one write (the check for a redelivery reads)");
        assert_eq!(f.mem.st.borrow().pending().map(|p| p.count), Some(1));
    }

    #[test]
    fn the_second_message_of_a_burst_shows_no_new_sign() {
        let f = Fake::default();
        block_on(run(&f, &message(1)));
        f.mem.now.set(1_500);
        assert_eq!(block_on(run(&f, &message(2))), Handled::Signalled { first: false });
        assert_eq!(*f.done.borrow(), ["admit", "budget", "sign", "admit", "budget"]);
        assert_eq!(f.mem.st.borrow().pending().map(|p| (p.count, p.last_ms)), Some((2, 1_500)), "the debounce runs on the object's clock");
    }

    #[test]
    fn a_refused_or_over_budget_message_is_remembered_so_a_redelivery_is_not_refused_twice() {
        let f = Fake { admits: false, ..Fake::default() };
        assert_eq!(block_on(run(&f, &message(1))), Handled::Refused);
        assert_eq!(block_on(run(&f, &message(1))), Handled::Redelivered);
        assert_eq!(*f.done.borrow(), ["admit"]);
        let f = Fake { within_budget: false, ..Fake::default() };
        assert_eq!(block_on(run(&f, &message(1))), Handled::OverBudget);
        assert_eq!(block_on(run(&f, &message(1))), Handled::Redelivered);
        assert_eq!(*f.done.borrow(), ["admit", "budget"], "one notice, never two");
        assert!(f.mem.st.borrow().pending().is_none(), "no turn for it");
    }

    #[test]
    fn a_command_is_answered_and_its_effect_on_the_state_is_one_write() {
        let f = Fake::default();
        block_on(run(&f, &message(1)));
        f.mem.writes.set(0);
        let new = ArrivalFacts { command: Some(CommandFacts { starts_over: true, crew_switch: Some(true), ..Default::default() }), ..message(2) };
        assert_eq!(block_on(run(&f, &new)), Handled::Command);
        assert!(f.mem.st.borrow().pending().is_none(), "/new forgets the burst");
        assert_eq!(f.mem.writes.get(), 1, "seen, started over and the crew switched: one write");
        assert_eq!(block_on(run(&f, &new)), Handled::Redelivered, "a redelivered command is not answered twice");
        let cancel = ArrivalFacts { command: Some(CommandFacts { cancels_schedule: true, ..Default::default() }), ..message(3) };
        block_on(run(&f, &cancel));
        assert_eq!(*f.done.borrow(), ["admit", "budget", "sign", "admit", "command (seen [1, 2])", "admit", "command (seen [1, 2, 3])", "schedules"]);
    }

    #[test]
    fn a_new_message_cancels_the_plan_in_progress_and_stops_an_early_start() {
        let f = Fake::default();
        block_on(run(&f, &message(1)));
        let turn = f.mem.st.borrow_mut().begin_turn(2_000, "1", 7);
        f.mem.st.borrow_mut().finish_turn(&turn.turn_id, vec![send("a"), send("b")], 3_000);
        f.done.borrow_mut().clear();
        f.mem.now.set(4_000);
        block_on(run(&f, &message(2)));
        assert_eq!(*f.done.borrow(), ["admit", "budget", "sign", format!("cancelled {} from 0", turn.turn_id).as_str()]);
        assert!(f.mem.st.borrow().plan().is_none(), "the cancelled steps are never sent");

        let early = f.mem.st.borrow_mut().begin_turn(5_000, "1", 8);
        f.mem.st.borrow_mut().turn.as_mut().unwrap().early_until_ms = Some(9_000);
        f.done.borrow_mut().clear();
        f.mem.now.set(6_000);
        block_on(run(&f, &message(3)));
        assert_eq!(*f.done.borrow(), ["admit", "budget", format!("stop {}", early.turn_id).as_str()], "no new sign: the burst is not new");
        assert!(f.mem.st.borrow().turn().is_none() && f.mem.st.borrow().pending().is_some(), "the burst waits for its own turn");
    }
}
