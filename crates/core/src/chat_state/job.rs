//! A retry job's loop, behind a port: the next attempt of a turn or of a plan step that
//! failed in the chat object (`background::jobs::Job`), and its dead letter when it ran out of
//! attempts. The state says whether the work is still to be done (finished or superseded
//! meanwhile: nothing is done); a step that fails again waits for the next job with a
//! deadline, after which the alarm takes it over.
//!
//! Invariants (INVARIANTS.md): "Every waiting state has a deadline" (`ChatState::step_failed`), "The
//! state decides; the object asks". Also: a job for work that finished or was superseded
//! meanwhile does nothing.

use super::effects::Limits;
use super::port::StatePort;
use super::TurnRun;
use crate::background::jobs::{Job, JobOutcome};

/// A plan step to retry: the step that failed, Telegram's error and its requested wait.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRetry {
    pub turn_id: String,
    pub step: usize,
    pub error: String,
    pub after_ms: Option<u64>,
}

/// What a job's loop needs from the chat object besides its state and clock.
#[allow(async_fn_in_trait)] // the object runs on one thread (a Durable Object); no Send needed
pub trait JobHost: StatePort {
    /// Runs the turn and carries out what its result means; `Retry`: it waits for the next job.
    async fn answer_turn(&self, turn: TurnRun) -> JobOutcome;
    /// Carries out the plan's due steps; the step to retry, if one failed.
    async fn advance_plan(&self) -> Option<StepRetry>;
    /// Queues another step's retry (a job of its own).
    async fn queue_step_retry(&self, retry: StepRetry);
    /// Gives a turn (or its plan) up and tells the user.
    async fn give_up(&self, turn_id: &str, reason: &str);
}

/// A job's attempt (see the module doc); its outcome goes back to the queue's consumer.
pub async fn run<H: JobHost>(host: &H, job: Job, lim: &Limits) -> JobOutcome {
    match job {
        Job::Turn { turn_id, attempt, .. } => {
            let now = host.now();
            let Some(turn) = host.ask(|st, _| st.resume_turn(&turn_id, attempt, now)).await else {
                return JobOutcome::Done; // finished or superseded meanwhile
            };
            host.answer_turn(turn).await
        }
        Job::Step { turn_id, step, attempt, .. } => {
            if !host.ask(|st, _| st.resume_step(&turn_id, step)).await {
                return JobOutcome::Done;
            }
            match host.advance_plan().await {
                Some(retry) if retry.turn_id == turn_id && retry.step == step => {
                    // The consumer backs off by this job's attempt: so does the deadline.
                    let now = host.now();
                    host.ask(|st, _| st.step_failed(&turn_id, step, attempt, now, retry.after_ms, lim)).await;
                    JobOutcome::Retry { error: retry.error, after_ms: retry.after_ms }
                }
                Some(other) => {
                    host.queue_step_retry(other).await;
                    JobOutcome::Done
                }
                None => JobOutcome::Done,
            }
        }
        Job::Consolidate { .. } | Job::Guest { .. } | Job::Business { .. } => JobOutcome::Done,
    }
}

/// A job that ran out of attempts: its turn (or plan) is given up and the user told.
pub async fn dead<H: JobHost>(host: &H, job: &Job) {
    if let Job::Turn { turn_id, .. } | Job::Step { turn_id, .. } = job {
        host.give_up(turn_id, "gave up after the last attempt").await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat::plan::Step;
    use crate::chat_state::effects::job_deadline;
    use crate::chat_state::fake::{state_port_over_mem, Mem, L, T};
    use crate::chat_state::Signal;
    use crate::conversation::ConvKey;
    use crate::telegram::gating::Trigger;
    use futures::executor::block_on;
    use std::cell::RefCell;


    /// A chat object in memory: the state, a clock, what the turn and the plan's steps do, and
    /// what was done, in order.
    #[derive(Default)]
    struct Fake {
        mem: Mem,
        turn_outcome: Option<JobOutcome>,
        step_fails: RefCell<Option<StepRetry>>,
        done: RefCell<Vec<String>>,
    }

    state_port_over_mem!(Fake);

    impl JobHost for Fake {
        async fn answer_turn(&self, turn: TurnRun) -> JobOutcome {
            self.done.borrow_mut().push(format!("answer {} attempt {}", turn.turn_id, turn.attempt));
            self.turn_outcome.clone().unwrap_or(JobOutcome::Done)
        }
        async fn advance_plan(&self) -> Option<StepRetry> {
            self.done.borrow_mut().push("advance".into());
            self.step_fails.borrow_mut().take()
        }
        async fn queue_step_retry(&self, retry: StepRetry) {
            self.done.borrow_mut().push(format!("queue step {}", retry.step));
        }
        async fn give_up(&self, turn_id: &str, reason: &str) {
            self.done.borrow_mut().push(format!("give up {turn_id}: {reason}"));
        }
    }

    fn conv() -> ConvKey {
        ConvKey::chat(1)
    }

    /// A chat whose turn started at 1 s (a burst of one message at 0) and failed: it waits
    /// for its retry job.
    fn with_turn() -> (Fake, TurnRun) {
        let f = Fake::default();
        f.mem.st.borrow_mut().signal(&Signal { update_id: 1, target_message_id: Some(10), trigger: Trigger::Private, at_ms: 0 });
        let turn = f.mem.st.borrow_mut().begin_turn(1_000, "1", 7);
        f.mem.st.borrow_mut().turn_waiting(&turn.turn_id, 400_000);
        (f, turn)
    }

    fn send(text: &str) -> Step {
        Step::Send { text: text.into(), reply_to: None, no_link_preview: false }
    }

    #[test]
    fn a_turn_job_runs_the_next_attempt_and_one_for_a_finished_turn_does_nothing() {
        let (f, turn) = with_turn();
        f.mem.now.set(10_000);
        let job = Job::Turn { conv: conv(), turn_id: turn.turn_id.clone(), attempt: 2 };
        assert_eq!(block_on(run(&f, job.clone(), &L)), JobOutcome::Done);
        assert_eq!(*f.done.borrow(), [format!("answer {} attempt 2", turn.turn_id)]);
        f.mem.st.borrow_mut().end_turn(&turn.turn_id);
        assert_eq!(block_on(run(&f, job, &L)), JobOutcome::Done);
        assert_eq!(f.done.borrow().len(), 1, "finished meanwhile: not run again");
    }

    #[test]
    fn a_turn_that_fails_again_says_retry_to_the_consumer() {
        let (mut f, turn) = with_turn();
        f.turn_outcome = Some(JobOutcome::Retry { error: "503".into(), after_ms: None });
        let job = Job::Turn { conv: conv(), turn_id: turn.turn_id.clone(), attempt: 2 };
        assert_eq!(block_on(run(&f, job, &L)), JobOutcome::Retry { error: "503".into(), after_ms: None });
    }

    #[test]
    fn a_step_that_fails_again_waits_for_the_next_job_with_a_deadline() {
        let (f, turn) = with_turn();
        f.mem.st.borrow_mut().resume_turn(&turn.turn_id, 2, 2_000);
        f.mem.st.borrow_mut().finish_turn(&turn.turn_id, vec![send("a")], 2_000);
        assert!(f.mem.st.borrow_mut().start_step(&turn.turn_id, 0).is_some());
        f.mem.st.borrow_mut().step_waiting(&turn.turn_id, 0, 400_000); // its first attempt failed
        f.mem.now.set(10_000);
        *f.step_fails.borrow_mut() = Some(StepRetry { turn_id: turn.turn_id.clone(), step: 0, error: "429".into(), after_ms: Some(30_000) });
        let job = Job::Step { conv: conv(), turn_id: turn.turn_id.clone(), step: 0, attempt: 2 };
        assert_eq!(block_on(run(&f, job.clone(), &L)), JobOutcome::Retry { error: "429".into(), after_ms: Some(30_000) });
        // The step waits until its job is overdue by the grace: then the alarm takes it over.
        let deadline = job_deadline(10_000, 2, Some(30_000), &L);
        assert!(deadline >= 10_000 + 30_000 + 300_000, "Telegram's wait and the grace, at least");
        let wake = f.mem.st.borrow().next_wake(&T, false, 10_000);
        assert_eq!(wake, Some(deadline), "the waiting step has a deadline the alarm wakes for");
        // Another step's failure is its own job; this one is done.
        *f.step_fails.borrow_mut() = Some(StepRetry { turn_id: turn.turn_id.clone(), step: 1, error: "429".into(), after_ms: None });
        assert_eq!(block_on(run(&f, job, &L)), JobOutcome::Done);
        assert_eq!(f.done.borrow().last().map(String::as_str), Some("queue step 1"));
    }

    #[test]
    fn a_step_job_for_a_plan_that_is_gone_does_nothing_and_a_dead_one_gives_up() {
        let (f, turn) = with_turn();
        let job = Job::Step { conv: conv(), turn_id: turn.turn_id.clone(), step: 0, attempt: 2 };
        assert_eq!(block_on(run(&f, job.clone(), &L)), JobOutcome::Done);
        assert!(f.done.borrow().is_empty(), "no plan: no step carried out");
        block_on(dead(&f, &job));
        assert_eq!(*f.done.borrow(), [format!("give up {}: gave up after the last attempt", turn.turn_id)]);
    }
}
