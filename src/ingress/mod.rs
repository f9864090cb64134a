//! # ingress: what comes in from outside
//!
//! [`webhook`]: `POST /telegram/webhook`, the only hot path. Later inbound channels land here.
//!
//! Invariant: ingress records and hands over; it never calls the model and never waits for a
//! reply to be made.

pub mod webhook;
