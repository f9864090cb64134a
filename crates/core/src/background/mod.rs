//! What the edge's background work decides (its `background/` room carries it out): the retry
//! queue's jobs and what becomes of each after it ran ([`jobs`]), and how long the tables that
//! only grow keep their rows ([`retention`]).
pub mod jobs;
pub mod retention;
